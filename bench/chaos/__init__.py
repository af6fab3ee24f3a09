"""The chaos harness (``python -m bench.chaos``): three consumer pods under faults, and the ledger
that accounts for every tick, event, job, email and call (docs/faults.md, "The chaos harness")."""
