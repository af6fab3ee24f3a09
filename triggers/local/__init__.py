"""The local trigger stack (``up`` / ``down``): Pub/Sub emulator, fake-gcs-server, scheduler."""
