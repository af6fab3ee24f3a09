"""Benchmarks and the chaos harness (not tests): each is run from the repository's root as
``python -m bench.NAME`` (``python -m bench.chaos`` for the harness); ``bench.support`` holds what
they share with the tests."""
