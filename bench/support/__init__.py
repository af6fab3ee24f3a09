"""What the tests and the benchmarks share: real servers on loopback, migrated databases, a TCP
proxy that cuts connections, recorders for mail and HTTP targets, the storage harness. It lives
under ``bench`` so that the benchmarks import nothing from ``tests``; the tests import it."""
