"""Storage uploads -> file processing (docs/storage.md).

A GCS notification for one object generation is matched against configured rules
(``consumer.config.storage_rules``); the chosen processor (``consumer.storage.processors``)
reads the generation pinned and checksum-verified (``consumer.storage.reader``), and every run
is recorded in ``processed_files`` (``consumer.storage.store``). The built-in processor
``import-jobs`` turns each row of a CSV or JSON Lines file into a job.

Plugins import the processor API (``FileInput``, ``FileResult``...) from ``consumer``.
"""
