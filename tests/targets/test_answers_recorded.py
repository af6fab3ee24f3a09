"""Every 2xx a target gives is recorded ``done``, whatever its body, on both databases: a body
that is not strict JSON (``NaN``, ``1e999``, 20,000 nested arrays, garbage) is kept as a
summary, and a redelivery finds the event done instead of calling the target again."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from bench.support.target_servers import PyTarget, Reply
from consumer.config.settings import Settings
from consumer.config.targets import TargetSettings, target
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind

BODIES = {
    "nan": b'{"count": NaN, "more": [Infinity, -Infinity]}',
    "overflow": b'{"count": 1e999}',
    "deep": b"[" * 20_000 + b"]" * 20_000,
    "garbage": b"\xff\xfe\x00garbage",
}


def dispatcher(settings: Settings, engine: Engine, url: str) -> Dispatcher:
    spec = target(
        "orders", url=url, serves={"tick": "process-pending", "period_seconds": 60},
        auth={"type": "none"},
    )  # fmt: skip
    settings = dataclasses.replace(settings, targets=TargetSettings(targets=(spec,)))
    service = Service.of(settings, engine)
    return Dispatcher(service.settings, engine, service.registry)


def tick_message() -> PushMessage:
    now = datetime.now(UTC).replace(microsecond=0)
    data = json.dumps({"task": "process-pending"}).encode()
    return PushMessage("m1", now, data=data, subscription="projects/p/subscriptions/ticks")


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_a_2xx_is_done_once_whatever_its_body(
    py_target: PyTarget, settings: Settings, engine: Engine, body: bytes
) -> None:
    py_target.replies = [Reply(200, body)]
    consumer = dispatcher(settings, engine, py_target.url)
    first = consumer.dispatch(tick_message())
    assert first.kind is Kind.DONE, first
    assert first.details["status"] == 200 and "answer" not in first.details
    assert first.details["answer_bytes"] == len(body)
    assert len(json.dumps(first.details)) < 1000
    again = consumer.dispatch(tick_message())
    assert again.kind is Kind.DUPLICATE and len(py_target.received) == 1
