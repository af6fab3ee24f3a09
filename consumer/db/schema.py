"""The shared ``metadata``: each store's ``schema`` module adds its tables to it when imported
(``consumer.inbox.schema``, ``consumer.ticks.schema``, ``consumer.jobs.schema``,
``consumer.storage.schema``, ``consumer.deploy.schema``), and Alembic compares them all with the
migrations."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
