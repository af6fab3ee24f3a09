"""The wake-up's sender and the NOTIFY listener belong to the engine of the service that made
them, not to a table in the module: two services in one process, each with its engine, never
share one, and the same engine keeps its own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.jobs import listen, wake
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import Service

WAKE_URL = "http://127.0.0.1:9/push"
"""Never reached: these tests look at who holds the sender, not at what it sends."""


def service(tmp_path: Path, name: str) -> Service:
    url = f"sqlite:///{tmp_path / name}"
    upgrade(url)
    settings = Settings(database_url=url, local_mode=True).with_values(wake_url=WAKE_URL)
    return Service.of(settings, make_engine(url))


def test_two_services_with_the_same_target_each_wake_through_a_sender_of_their_own(
    tmp_path: Path,
) -> None:
    first, second = service(tmp_path, "a.db"), service(tmp_path, "b.db")
    try:
        a, b = wake.waker_of(first.engine), wake.waker_of(second.engine)
        assert a is not None and b is not None
        assert a.target == b.target
        assert a.sender() is not b.sender()
        assert a.sender() is a.sender()
    finally:
        first.close()
        second.close()


def test_attaching_the_same_target_again_keeps_the_sender_and_none_removes_it(
    tmp_path: Path,
) -> None:
    first = service(tmp_path, "a.db")
    try:
        waker = wake.waker_of(first.engine)
        assert waker is not None
        wake.attach(first.engine, first.settings)
        assert wake.waker_of(first.engine) is waker
        wake.attach(first.engine, first.settings.with_values(wake_url=""))
        assert wake.waker_of(first.engine) is None
    finally:
        first.close()


class QuietListener:
    """Stands in for ``listen.Listener``: no thread, no connection."""

    def __init__(self, dispatcher: Dispatcher, notified: Any) -> None:
        self.dispatcher = dispatcher
        self.pid = os.getpid()


def test_each_engine_holds_the_listener_started_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listen, "Listener", QuietListener)
    url = "postgresql+psycopg://127.0.0.1:9/never_connected"
    settings = Settings(database_url=url, local_mode=True)
    registry = build_registry(settings)
    engines = create_engine(url), create_engine(url)
    first, second = (listen.start(Dispatcher(settings, e, registry)) for e in engines)
    assert first is not None and second is not None and first is not second
    assert listen.listener_of(engines[0]) is first
    assert listen.start(Dispatcher(settings, engines[0], registry)) is first
