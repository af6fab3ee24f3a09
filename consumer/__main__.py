"""``python -m consumer`` is the ``consumer`` command."""

from consumer.cli.main import main

main()
