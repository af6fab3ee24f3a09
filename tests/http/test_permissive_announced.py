"""Local mode (and settings that declare no source) keeps the permissive routing of old, and says
so once at start, before any delivery: one WARNING line naming what is open and how to declare
the sources (``consumer.pipeline.admission.announce``). Through ``create_app``, the embedded
extension, and a real ``consumer serve`` process (gunicorn's asyncio worker)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http.app import create_app
from consumer.http.embed import Consumer
from consumer.pipeline import admission
from consumer.service import Service
from tests.conftest import TEST_SIGNING_SECRET, Server, settings_env

ANNOUNCED = "routing is permissive: any source may start any route"
SOURCES = {"consumer-jobs-push": frozenset({"job"})}


@pytest.fixture(autouse=True)
def unannounced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh process, as far as the once-per-process line goes."""
    monkeypatch.setattr(admission, "_announced", threading.Event())


@pytest.fixture
def started(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> Iterator[Callable[..., list[str]]]:
    """Build an app from settings (``embedded``: through the extension) and return the
    warnings the start logged about routing."""
    engine = make_engine(sqlite_url)
    caplog.set_level(logging.WARNING, logger="consumer.admission")

    def start(embedded: bool = False, **values: object) -> list[str]:
        settings = Settings.of(database_url=sqlite_url, **values)
        service = Service.of(settings, engine)
        if embedded:
            Consumer(Flask("host"), service)
        else:
            create_app(service)
        return [
            record.getMessage()
            for record in caplog.records
            if record.name == "consumer.admission" and record.levelno == logging.WARNING
        ]

    yield start
    engine.dispose()


@pytest.mark.parametrize("embedded", [False, True])
def test_local_mode_says_at_start_that_routing_is_permissive(
    started: Callable[..., list[str]], embedded: bool
) -> None:
    lines = started(embedded, local_mode=True)
    assert len(lines) == 1
    assert lines[0].startswith(f"local mode: {ANNOUNCED}")
    assert "declare the routes each subscription may start in CONSUMER_SOURCES" in lines[0]
    assert "docs/sources.md" in lines[0]


def test_the_line_is_said_once_per_process(started: Callable[..., list[str]]) -> None:
    started(local_mode=True)
    assert len(started(local_mode=True)) == 1


def test_settings_that_declare_no_source_say_why(started: Callable[..., list[str]]) -> None:
    lines = started(local_mode=False, push_token="announce-token-0123456789")
    assert [line.split(":")[0] for line in lines] == ["no CONSUMER_SOURCES declared"]


def test_declared_sources_say_nothing(started: Callable[..., list[str]]) -> None:
    values = {"sources": SOURCES, "signing_secrets": (TEST_SIGNING_SECRET,)}
    assert started(local_mode=False, push_token="announce-token-0123456789", **values) == []


@pytest.mark.slow
def test_consumer_serve_logs_it_once_per_worker_at_start(
    sqlite_url: str, tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    """Before any request: the line is there once the server answers its health probe."""
    env = settings_env(Settings(database_url=sqlite_url, local_mode=True))
    server = start_server(env, workers=1, output=tmp_path / "serve.log")
    lines = [line for line in server.text().splitlines() if ANNOUNCED in line]
    assert len(lines) == 1, server.text()
    assert "WARNING" in lines[0] and "CONSUMER_SOURCES" in lines[0]
