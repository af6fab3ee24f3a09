"""``python -m consumer`` is the ``consumer`` command."""

from consumer.cli import main

main()
