"""Flow control at run time: each kind's limits as configured, as an operator changed them, and
its running jobs (``consumer jobs limits``); an operator's change, stored in ``job_flow`` and
logged with who made it (``consumer jobs limit``, the dashboard).

A change takes effect at the kind's next claim on every pod (a kind no limit held before: within
``consumer.jobs.throttle.REFRESH_SECONDS``). Lowering a cap below the jobs running stops nothing:
no new job of the kind is claimed until fewer than the new cap run (docs/flow-control.md)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.config.flow import NO_LIMIT, Changes, JobLimit, format_changes, parse_changes
from consumer.config.settings import Settings
from consumer.db.store import Store
from consumer.errors import ConsumerError
from consumer.jobs import flow
from consumer.jobs.limits import configured, effective
from consumer.pipeline.registry import Registry

log = logging.getLogger("consumer.jobs.flow")


class NoSuchKind(ConsumerError):
    """No job kind of that name is registered, limited or changed."""


@dataclass(frozen=True)
class KindFlow:
    """One kind's flow control as ``consumer jobs limits`` shows it."""

    kind: str
    configured: JobLimit
    effective: JobLimit
    override: str | None
    running: int
    updated_by: str | None = None
    updated_at: datetime | None = None
    groups: tuple[dict[str, Any], ...] = ()
    """The kind's busiest groups (``flow.TOP_GROUPS`` at most): group, running, pending."""

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind, **self.effective.describe(), "running": self.running,
            "groups": list(self.groups),
            "configured": self.configured.describe(), "override": self.override,
            "updated_by": self.updated_by,
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
        }  # fmt: skip


class FlowAdmin(Store):
    """Reads and changes the ``job_flow`` table."""

    def show(
        self,
        configured: Mapping[str, JobLimit],
        kinds: Collection[str],
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> list[KindFlow]:
        """Every kind that is registered, limited or changed, by name."""
        with self._read(connection) as conn:
            rows = {str(row.kind): row for row in conn.execute(flow.ROWS)}
            running = {str(k): int(n) for k, n in conn.execute(flow.concurrency_by_kind(now))}
            groups: dict[str, list[dict[str, Any]]] = {}
            for kind, group, live, pending in conn.execute(flow.busiest_groups(now)):
                shown_groups = groups.setdefault(str(kind), [])
                if len(shown_groups) < flow.TOP_GROUPS:
                    load = {"group": group, "running": int(live), "pending": int(pending)}
                    shown_groups.append(load)
        shown = []
        for kind in sorted({*kinds, *configured, *rows}):
            row = rows.get(kind)
            override = None if row is None else row.limits
            limit = configured.get(kind, NO_LIMIT)
            shown.append(
                KindFlow(
                    kind, limit, effective(limit, override), override, running.get(kind, 0),
                    None if row is None else row.updated_by,
                    None if row is None else row.updated_at, tuple(groups.get(kind, ())),
                )
            )  # fmt: skip
        return shown

    def change(
        self,
        kind: str,
        changes: Changes | None,
        by: str,
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> str | None:
        """Apply an operator's ``changes`` to the kind's (over an earlier change of theirs);
        ``None`` resets the kind to its configured limits. Returns the stored change."""
        with self._write(connection) as conn:
            row = conn.execute(flow.PEEK_ROW, {"flow_kind": kind}).first()
            earlier = parse_changes(row.limits) if row is not None and row.limits else {}
            stored = None if changes is None else format_changes({**earlier, **changes})
            conn.execute(flow.set_limits(self.dialect, kind, stored, by, now))
        log.warning(
            "job kind limits changed",
            extra={"kind": kind, "limits": stored or "as configured", "by": by},
        )
        return stored


def kinds_flow(
    admin: FlowAdmin, registry: Registry, settings: Settings, now: datetime
) -> dict[str, KindFlow]:
    """Every kind's flow control with this process's registry and settings, by name: what
    ``consumer jobs limits`` and the dashboard show."""
    limits = configured(registry, settings)
    shown = admin.show(limits, registry.job_kinds.names(), now)
    return {kind.kind: kind for kind in shown}


def known(kinds: Mapping[str, KindFlow], kind: str) -> KindFlow:
    """``kind``'s flow control; ``NoSuchKind`` for a kind not among ``kinds`` (a typo would
    otherwise be stored and shown for ever)."""
    if kind not in kinds:
        raise NoSuchKind(f"no job kind {kind!r} is registered, limited or changed")
    return kinds[kind]
