"""The operator's dashboard: a small server-rendered web UI on its own listener, and the same
overview in the terminal (``consumer status``). It reads and writes through the service's stores."""
