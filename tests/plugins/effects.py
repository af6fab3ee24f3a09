"""A test plugin whose handlers have a deliberately NON-idempotent effect: each run inserts a row
into ``test_effects``. If the inbox ever lets an event run twice, the row count shows it.

Behaviour is steered by message attributes (the test decides, the handler obeys):
- ``sleep``: seconds to sleep before the effect (to overlap deliveries);
- ``fail``: ``retryable-once`` fails the first attempt, ``permanent`` always fails permanently,
  ``always`` always fails retryably, ``unstorable`` fails with text no database stores;
  ``incomplete`` reports committed progress (``Incomplete``) until its 8th attempt;
- ``odd_result``: return a result that is not plain JSON (datetimes, bytes, NULs);
- ``hang``: on the first attempt only, record the worker pid, then sleep this long (a test
  SIGKILLs the worker meanwhile);
- ``after``: seconds to sleep after the effect, before returning (a test cuts the database
  meanwhile, so the cut lands on the write that records the outcome).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Engine, Integer, MetaData, Table, Text, insert, select

from consumer.errors import Incomplete, Permanent, Retryable
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent, StorageEvent, TickEvent

effects_metadata = MetaData()
effects = Table(
    "test_effects",
    effects_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("stage", Text, nullable=False),
)


def record(engine: Engine, key: str, stage: str) -> None:
    with engine.begin() as connection:
        connection.execute(insert(effects).values(key=key, pid=os.getpid(), stage=stage))


def effect_rows(engine: Engine, stage: str = "effect") -> list[Any]:
    effects_metadata.create_all(engine)
    with engine.connect() as connection:
        return list(connection.execute(select(effects).where(effects.c.stage == stage)))


def _run(context: HandlerContext, attributes: Any) -> dict[str, Any]:
    effects_metadata.create_all(context.engine)
    if "hang" in attributes and context.attempt == 1:
        record(context.engine, context.key, "started")
        time.sleep(float(attributes["hang"]))
    time.sleep(float(attributes.get("sleep", 0)))
    mode = attributes.get("fail", "")
    if mode == "permanent":
        raise Permanent("this event can never succeed")
    if mode == "always" or (mode == "retryable-once" and context.attempt == 1):
        raise Retryable("transient failure, try again")
    if mode == "incomplete" and context.attempt < 8:
        # Pretend progress was committed each time: attempts are refunded, never exhausted.
        raise Incomplete(f"chunk {context.attempt} committed, more to do")
    if mode == "unstorable":
        raise RuntimeError("a NUL \x00 and a lone surrogate \udc80 in an error")
    record(context.engine, context.key, "effect")
    time.sleep(float(attributes.get("after", 0)))
    if "odd_result" in attributes:
        return {"at": datetime.now(UTC), "raw": b"\x00", "text": "nul\x00", 7: {1, 2}}
    return {"effect": "recorded", "attempt": context.attempt}


def on_storage(context: HandlerContext, event: StorageEvent) -> dict[str, Any]:
    return _run(context, event.message.attributes)


def on_deploy(context: HandlerContext, event: DeployEvent) -> dict[str, Any]:
    return _run(context, event.message.attributes)


def on_tick(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    return _run(context, event.message.attributes)


def register(registry: Registry) -> None:
    registry.storage(on_storage, replace=True)
    registry.deploy(on_deploy, replace=True)
    registry.tick("effect", period_seconds=60)(on_tick)
