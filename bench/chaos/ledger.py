"""The chaos run's ledger: every event, job, email and call the load asked for, checked against
what the database recorded and what the SMTP sink and the target saw.

- **lost**: an event with no terminal inbox row (``done`` or ``skipped``), a published tick whose
  slot has no row (``bench.chaos.ticks``), a job that is missing or not ``done``, a done email
  job whose Message-ID never reached the sink, a done call job or deploy whose key never reached
  the target's effect.
- **duplicates**: each extra copy of an email (same Message-ID), each repeated call of a key the
  target had already done. A duplicate is **attributed** to a fault whose window lies between
  the first copy and the repeat: a SIGKILL or a pause of the pod that held the job (or any kill
  or pause when the job is not known), a worker's death observed in the pods' logs if it held
  the job, a database restart, cut or pause, or a spell of the sink that received it.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, text

from bench.chaos.faults import Fault
from bench.chaos.load import Published
from bench.chaos.pods import BUCKET, DEPLOY_SERVICE
from bench.chaos.sinks import Call
from bench.chaos.ticks import TickCount, count_ticks

JOBS = text("SELECT id, kind, status, idempotency_key, finished_at, attempts, errors FROM jobs")
EVENTS = text("SELECT key, route, status, finished_at FROM inbox")
JOB_ID = re.compile(r"<job-(\d+)\.")
TERMINAL = ("done", "skipped")
CONTINUATION = ":continuation:"
CRASHES = ("kill", "worker-exit", "pod-pause")
"""Faults that end or freeze a process mid-work: they explain the repeats of the jobs it held."""
EFFECTS = ("done", "lost")
"""Target outcomes that did the effect (``lost``: done, then the answer was cut)."""
SLACK = {"email": 0.5, "call": 2.5}
"""How far a copy's stamp may lag the truth: emails are stamped on arrival, calls when polled."""


@dataclass(frozen=True)
class JobRow:
    id: int
    kind: str
    status: str
    key: str | None
    finished_at: float | None
    attempts: int = 1
    errors: tuple[str, ...] = ()
    """The job's error history (why it ran again), oldest first."""


@dataclass(frozen=True)
class Records:
    """What the database holds at the end, read straight from the server (not the proxy)."""

    jobs: list[JobRow]
    events: dict[str, tuple[str, str, float | None]]
    """key -> (route, status, finished_at)."""
    read_at: float = math.inf
    """When they were read (ticks published just before are not expected yet)."""

    @classmethod
    def read(cls, engine: Engine) -> Records:
        read_at = time.time()
        with engine.connect() as connection:
            jobs = [_job(row) for row in connection.execute(JOBS)]
            events = {r.key: (r.route, r.status, _epoch(r.finished_at))
                      for r in connection.execute(EVENTS)}  # fmt: skip
        return cls(jobs, events, read_at)


@dataclass(frozen=True)
class Duplicate:
    what: str
    """``email`` or ``call``."""
    identity: str
    first: float
    again: float
    job_id: int | None
    fault: Fault | None = None
    history: str = ""
    """The job's attempts and last error (what the database says about the repeat)."""


@dataclass
class Account:
    lost: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    expected: Counter[str] = field(default_factory=Counter)
    unfinished_wakeups: int = 0
    ticks: TickCount = field(default_factory=lambda: TickCount(0, Counter()))
    """Ticks published against the slots' rows (``skipped``: stale or a duplicate slot)."""

    def lose(self, category: str, what: str) -> None:
        self.lost[category] += 1
        if len(self.examples) < 10:
            self.examples.append(f"{category}: {what}")

    @property
    def attributed(self) -> int:
        return sum(1 for duplicate in self.duplicates if duplicate.fault is not None)


def account(published: Published, records: Records, mail: list[tuple[str, float]],
            calls: list[Call], faults: list[Fault]) -> Account:  # fmt: skip
    found = Account()
    by_key = {job.key: job for job in records.jobs if job.key is not None}
    _events(found, published, records)
    _jobs(found, published, records, by_key)
    _emails(found, records, mail)
    _calls(found, published, by_key, calls)
    found.duplicates = [_attribute(duplicate, faults) for duplicate in found.duplicates]
    return found


def _events(found: Account, published: Published, records: Records) -> None:
    keys = [f"storage:{BUCKET}/{u.name}#{u.generation}:OBJECT_FINALIZE" for u in published.uploads]
    keys += [f"job:{key}" for key in (*published.mail_jobs, *published.call_jobs)]
    keys += [f"deploy:{DEPLOY_SERVICE}:{release}" for release in published.releases]
    found.expected["events"] = len(keys) + len(published.ticks)
    for key in keys:
        status = records.events.get(key, ("", "missing", None))[1]
        if status not in TERMINAL:
            found.lose("events", f"{key} is {status}")
    found.ticks = count_ticks(published.ticks, records.events, records.read_at)
    for tick in found.ticks.missing:
        found.lose("events", f"the tick published at {_clock(tick.sent)} has no inbox row")
    for key, (route, status, _) in records.events.items():
        if route != "tick" or status in TERMINAL:
            continue
        if CONTINUATION in key:  # a pod's own wake-up: the next tick does its work
            found.unfinished_wakeups += 1
        else:
            found.lose("events", f"{key} is {status}")


def _jobs(found: Account, published: Published, records: Records,
          by_key: dict[str, JobRow]) -> None:  # fmt: skip
    per_upload = Counter(key.rpartition(":")[0] for key in by_key if key.startswith(f"{BUCKET}/"))
    for upload in published.uploads:
        made = per_upload[f"{BUCKET}/{upload.name}#{upload.generation}"]
        for _ in range(upload.rows - made):
            found.lose("jobs", f"a row of {upload.name} has no job")
    for key in (*published.mail_jobs, *published.call_jobs):
        if key not in by_key:
            found.lose("jobs", f"job {key} was never enqueued")
    found.expected["jobs"] = len(records.jobs)
    for job in records.jobs:
        if job.status != "done":
            found.lose("jobs", f"job {job.id} ({job.kind}) is {job.status}")


def _emails(found: Account, records: Records, mail: list[tuple[str, float]]) -> None:
    arrivals: dict[int, list[float]] = defaultdict(list)
    for message_id, at in mail:
        if match := JOB_ID.match(message_id):
            arrivals[int(match.group(1))].append(at)
    emails = [job for job in records.jobs if job.kind == "email"]
    found.expected["emails"] = len(emails)
    for job in emails:
        copies = sorted(arrivals.get(job.id, []))
        if job.status == "done" and not copies:
            found.lose("emails", f"job {job.id} is done but its email never arrived")
        history = _history(job)
        found.duplicates += [Duplicate("email", f"job {job.id}", copies[0], again, job.id,
                                       history=history) for again in copies[1:]]  # fmt: skip


def _calls(found: Account, published: Published, by_key: dict[str, JobRow],
           calls: list[Call]) -> None:  # fmt: skip
    seen: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        seen[call.key].append(call)
    wanted = [(key, by_key.get(key)) for key in published.call_jobs]
    wanted += [(f"deploy:{DEPLOY_SERVICE}:{release}", None) for release in published.releases]
    found.expected["calls"] = len(wanted)
    for key, job in wanted:
        effects = [call for call in seen.get(key, []) if call.outcome in EFFECTS]
        repeats = [call for call in seen.get(key, []) if call.outcome == "duplicate"]
        if not effects:
            if job is None or job.status == "done" or key.startswith("deploy:"):
                found.lose("calls", f"{key} never reached the target's effect")
            continue
        job_id = job.id if job is not None else None
        history = _history(job) if job is not None else ""
        found.duplicates += [Duplicate("call", key, effects[0].seen, call.seen, job_id,
                                       history=history) for call in repeats]  # fmt: skip


def _attribute(duplicate: Duplicate, faults: list[Fault]) -> Duplicate:
    """The fault that explains the repeat: the kill of the pod holding the job first, else the
    latest fault whose window overlaps the time from the first copy to the repeat."""
    slack = SLACK[duplicate.what]
    overlapping = [
        fault for fault in faults
        if fault.start <= duplicate.again + slack and fault.end >= duplicate.first - slack
        and _relevant(fault, duplicate)
    ]  # fmt: skip
    holding = [fault for fault in overlapping if fault.kind in CRASHES and fault.held_jobs
               and duplicate.job_id in fault.held_jobs]  # fmt: skip
    chosen = holding or sorted(overlapping, key=lambda fault: fault.start, reverse=True)
    return replace(duplicate, fault=chosen[0] if chosen else None)


def _relevant(fault: Fault, duplicate: Duplicate) -> bool:
    """A sink's spell explains only its own repeats; a kill that knows what the pod held
    explains only those jobs."""
    if fault.kind.startswith("smtp-"):
        return duplicate.what == "email"
    if fault.kind.startswith("target-"):
        return duplicate.what == "call"
    if fault.kind in CRASHES and fault.held_jobs is not None and duplicate.job_id is not None:
        return duplicate.job_id in fault.held_jobs
    return True


def _job(row: Any) -> JobRow:
    finished = _epoch(row.finished_at)
    return JobRow(row.id, row.kind, row.status, row.idempotency_key, finished, row.attempts,
                  _errors(row.errors))  # fmt: skip


def _history(job: JobRow) -> str:
    last = job.errors[-1] if job.errors else "no error recorded"
    return f"{job.attempts} attempts; last error: {last}"


def _errors(history: object) -> tuple[str, ...]:
    if not isinstance(history, list):
        return ()
    return tuple(str(entry.get("error", ""))[:120] for entry in history if isinstance(entry, dict))


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
