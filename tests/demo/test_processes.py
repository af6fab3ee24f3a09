"""The process helpers the demo and the local stack share (consumer.demo.processes, used by
triggers.local.services): the environment a child gets, readiness, and stopping its group."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from consumer.demo import processes
from triggers.local import services

pytestmark = pytest.mark.slow
SLEEP = "import os, time; print(os.environ['PROBE'], flush=True); time.sleep(60)"
SLEEPER = [sys.executable, "-c", SLEEP]


def test_the_stack_adds_its_variables_to_this_environment(tmp_path: Path) -> None:
    os.environ["TESTS_INHERITED"] = "yes"
    try:
        child = services.spawn("probe", [sys.executable, "-c", INHERIT], tmp_path / "a.log",
                               {"PROBE": "stack"})  # fmt: skip
        assert child.process.wait(timeout=30) == 0
    finally:
        del os.environ["TESTS_INHERITED"]
    assert child.log.read_text().split() == ["stack", "yes"]


INHERIT = "import os; print(os.environ['PROBE'], os.environ.get('TESTS_INHERITED'))"


def test_a_child_that_exits_early_is_reported_with_its_log(tmp_path: Path) -> None:
    child = processes.spawn("quitter", [sys.executable, "-c", "print('bye')"], tmp_path / "q.log",
                            dict(os.environ))  # fmt: skip
    with pytest.raises(RuntimeError, match="quitter exited early:\nbye"):
        processes.wait_until(child, lambda: False, timeout=30)


def test_a_service_never_ready_is_stopped_with_its_whole_group(tmp_path: Path) -> None:
    service = services.spawn("sleeper", SLEEPER, tmp_path / "s.log", {"PROBE": "up"})
    assert service.pid == service.process.pid
    with pytest.raises(RuntimeError, match="sleeper was not ready within 1s"):
        processes.wait_until(service, lambda: False, timeout=1)
    assert not service.alive()
    with pytest.raises(ProcessLookupError):
        os.killpg(service.pid, 0)  # no process of its group is left
