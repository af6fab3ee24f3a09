"""consumer.http.gunicorn_conf: its values come from the settings, its hooks keep multiprocess
metrics
honest, and ``consumer serve`` uses it too, so the image and the CLI cannot disagree."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from consumer.config.settings import Settings
from consumer.http.gunicorn_options import WORKER_CLASS
from consumer.http.serve import Server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No CONSUMER_* variable from the caller (scripts/test exports one for the test suite)."""
    for key in list(os.environ):
        if key.startswith("CONSUMER_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CONSUMER_LOCAL_MODE", "true")
    return monkeypatch


@pytest.fixture
def conf(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """The config module as gunicorn loads it."""
    monkeypatch = clean_env
    monkeypatch.setenv("CONSUMER_ACK_DEADLINE_SECONDS", "45")
    monkeypatch.setenv("CONSUMER_BIND", "127.0.0.1:9999")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "prometheus"))
    import consumer.http.gunicorn_conf

    return importlib.reload(consumer.http.gunicorn_conf)


def test_values_follow_the_settings(conf: ModuleType) -> None:
    assert (conf.timeout, conf.graceful_timeout) == (45, 45)
    assert conf.bind == "127.0.0.1:9999"
    assert conf.control_socket_disable is True


def test_invalid_settings_stop_gunicorn_at_start(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("CONSUMER_ACK_DEADLINE_SECONDS", "5")
    import consumer.http.gunicorn_conf

    with pytest.raises(SystemExit) as stopped:
        importlib.reload(consumer.http.gunicorn_conf)
    assert stopped.value.code == 2
    assert "CONSUMER_ACK_DEADLINE_SECONDS" in capsys.readouterr().err


def test_on_starting_empties_the_metrics_directory(conf: ModuleType, tmp_path: Path) -> None:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    (directory / "counter_4242.db").write_bytes(b"stale")
    (directory / "keep.txt").write_text("not ours")
    conf.on_starting(None)
    assert sorted(p.name for p in directory.iterdir()) == ["keep.txt"]


def test_on_starting_creates_the_metrics_directory(conf: ModuleType, tmp_path: Path) -> None:
    conf.on_starting(None)
    assert (tmp_path / "prometheus").is_dir()


def test_child_exit_drops_the_dead_workers_live_gauges(conf: ModuleType, tmp_path: Path) -> None:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    (directory / "gauge_livesum_4242.db").write_bytes(b"")
    (directory / "gauge_livesum_4343.db").write_bytes(b"")
    conf.child_exit(None, SimpleNamespace(pid=4242))
    assert [p.name for p in directory.iterdir()] == ["gauge_livesum_4343.db"]


def test_values_follow_the_settings_with_the_watchdog_worker(conf: ModuleType) -> None:
    assert conf.worker_class == WORKER_CLASS == "consumer.http.worker.ConsumerWorker"


def test_consumer_serve_resolves_what_the_config_module_does(conf: ModuleType) -> None:
    """``serve`` (in-process, gunicorn's application API) and the image's config module agree."""
    served = Server(
        Settings.of(local_mode=True, ack_deadline_seconds=45, bind="127.0.0.1:9999")
    ).cfg
    for name in ("bind", "timeout", "graceful_timeout", "worker_class", "keepalive"):
        expected = getattr(conf, name)
        assert served.settings[name].get() in (expected, [expected]), name
