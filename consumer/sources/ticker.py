"""Moved: the local tick source is ``consumer.ticks.stand_in``. This name stays only until the
last test that imports it (``tests/http/test_serve_observability.py``) imports the new one;
nothing in the package uses it, and it is not public API (docs/plugins.md)."""

from consumer.ticks.stand_in import log

__all__ = ["log"]
