"""The fault plan of a chaos run, drawn up front from the seed (``--seed`` replays it): one list
per family, each played in time order by a thread of its own (``bench.chaos.faults``), so faults
of different families overlap and those of one family never do.

- ``kill``: SIGKILL a random pod every 15-30 s (scaled down for short runs), then start it again;
- ``pod-pause``: SIGSTOP a pod (its whole process group, or one worker, alternately) and SIGCONT
  it 10-30 s later, one per 100 s begun (at most a quarter of a short run long);
- ``pg-restart`` (at least two per run, alternately ``fast`` and ``immediate``), ``db-cut``
  (every connection through the proxy cut for 1-10 s) and ``db-pause`` (every byte through the
  proxy held, as long as a pod's pause; one in six database faults, at least one);
- ``target-fail`` / ``target-stall`` and ``smtp-fail`` / ``smtp-stall``: short spells.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SPELL_SECONDS = (2.0, 5.0)
CUT_SECONDS = (1.0, 10.0)
KILL_EVERY = (15.0, 30.0)
PAUSE_SECONDS = (10.0, 30.0)
"""Past the ack deadline (10 s) and the inbox lease (12 s): a frozen owner's claims are taken
over, and it resumes after that."""
PAUSE_EVERY_SECONDS = 100.0
"""A 60 s slice pauses one pod (the whole group), a 120 s run two (the group, then a worker)."""


@dataclass(frozen=True)
class Planned:
    at: float
    """Seconds after the start of the run."""
    kind: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Window:
    """Faults start between ``first`` and ``last`` seconds into a run of ``seconds``."""

    seconds: float
    first: float
    last: float

    @classmethod
    def of(cls, seconds: float) -> Window:
        return cls(seconds, min(10.0, seconds / 6), seconds - min(15.0, seconds / 6))

    @property
    def pause_seconds(self) -> tuple[float, float]:
        """10-30 s, the longest no more than a quarter of the run (a 60 s slice: 10-15 s)."""
        low, high = PAUSE_SECONDS
        return low, max(low, min(high, self.seconds / 4))


def plan(window: Window, rng: random.Random) -> list[list[Planned]]:
    """One list per family, each in time order."""
    return [_kills(window, rng), _pauses(window, rng), _database(window, rng),
            _spells(window, rng, "target"), _spells(window, rng, "smtp")]  # fmt: skip


def _kills(window: Window, rng: random.Random) -> list[Planned]:
    scale = min(1.0, window.seconds / 90)
    planned, at = [], window.first + rng.uniform(*KILL_EVERY) * scale / 2
    while at < window.last:
        planned.append(Planned(at, "kill"))
        at += rng.uniform(*KILL_EVERY) * scale
    return planned


def _pauses(window: Window, rng: random.Random) -> list[Planned]:
    count = math.ceil(window.seconds / PAUSE_EVERY_SECONDS)
    return _in_slots(window, rng, ["pod-pause"] * count, {"pod-pause": window.pause_seconds})


def _database(window: Window, rng: random.Random) -> list[Planned]:
    """Evenly spread slots, each holding one restart, cut or pause at a random moment in it."""
    count = max(4, round(window.seconds / 30))
    kinds = ["pg-restart"] * max(2, count // 3) + ["db-pause"] * max(1, count // 6)
    kinds += ["db-cut"] * (count - len(kinds))
    rng.shuffle(kinds)
    lengths = {"db-cut": CUT_SECONDS, "db-pause": window.pause_seconds}
    return _in_slots(window, rng, kinds, lengths)


def _spells(window: Window, rng: random.Random, family: str) -> list[Planned]:
    count = max(2, round(window.seconds / 60))
    kinds = [f"{family}-{'fail' if n % 2 == 0 else 'stall'}" for n in range(count)]
    return _in_slots(window, rng, kinds, dict.fromkeys(kinds, SPELL_SECONDS))


def _in_slots(window: Window, rng: random.Random, kinds: list[str],
              lengths: dict[str, tuple[float, float]]) -> list[Planned]:  # fmt: skip
    """``lengths``: each kind's shortest and longest; a kind not in it is a moment (0 s)."""
    slot = (window.last - window.first) / len(kinds)
    planned = []
    for n, kind in enumerate(kinds):
        seconds = rng.uniform(*lengths[kind]) if kind in lengths else 0.0
        room = max(0.0, slot - min(seconds, slot * 0.8))
        planned.append(Planned(window.first + n * slot + rng.uniform(0, room), kind, seconds))
    return planned
