"""The statements of group caps and rates (``consumer.jobs.groups`` runs them in the claim's
transaction): the groups to leave out of a kind's claim, the rows a claim locks for the groups it
took, their running jobs counted once locked, and each group's rate state."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Integer, String, Text, bindparam, func, select, update

from consumer.db import dialect as sql
from consumer.db.store import Store
from consumer.db.types import UTCDateTime
from consumer.jobs.model import Status
from consumer.jobs.schema import job_group_flow, jobs

KIND = bindparam("flow_kind", type_=String())
NOW = bindparam("now", type_=UTCDateTime())
LIVE_GROUPED = (
    jobs.c.kind == KIND,
    jobs.c.status == Status.RUNNING.value,
    jobs.c.lease_until >= NOW,
    jobs.c.group_key.is_not(None),
)


def _groups(dialect: str) -> Any:
    return sql.among(job_group_flow.c.group_key, "groups", dialect, Text())


FULL = (
    select(jobs.c.group_key)
    .where(*LIVE_GROUPED)
    .group_by(jobs.c.group_key)
    .having(func.count() >= bindparam("group_cap", type_=Integer()))
)
"""The kind's groups at their cap now (a glance, no lock: the claim leaves them out)."""
AHEAD = select(job_group_flow.c.group_key, job_group_flow.c.tat).where(
    job_group_flow.c.kind == KIND, job_group_flow.c.tat > bindparam("horizon", type_=UTCDateTime())
)
"""The kind's groups whose rate allows no start within the claim's horizon."""


@cache
def ensure_rows(dialect: str) -> Any:
    return sql.insert_ignore(job_group_flow, dialect).values(
        kind=KIND, group_key=bindparam("group", type_=Text())
    )


@cache
def lock_rows(dialect: str) -> Any:
    """The claimed groups' rows, locked in one order (two claims never wait in a circle)."""
    return (
        select(job_group_flow.c.group_key, job_group_flow.c.tat)
        .where(job_group_flow.c.kind == KIND, _groups(dialect))
        .order_by(job_group_flow.c.group_key)
        .with_for_update()
    )


@cache
def running(dialect: str) -> Any:
    """Each claimed group's running jobs, this claim's included: a statement of its own after
    the lock, so its snapshot holds what the claims that held the rows before committed."""
    among = sql.among(jobs.c.group_key, "groups", dialect, Text())
    return (
        select(jobs.c.group_key, func.count())
        .where(*LIVE_GROUPED, among)
        .group_by(jobs.c.group_key)
    )


SET_TAT = (
    update(job_group_flow)
    .where(job_group_flow.c.kind == KIND, job_group_flow.c.group_key == bindparam("group"))
    .values(tat=bindparam("new_tat", type_=UTCDateTime()))
)


class GroupFlowStore(Store):
    """Runs the group statements on the claim's connection, in its transaction."""

    def full(self, connection: Connection, kind: str, now: datetime, cap: int) -> set[str]:
        rows = connection.execute(FULL, {"flow_kind": kind, "now": now, "group_cap": cap})
        return {str(group) for (group,) in rows}

    def ahead(self, connection: Connection, kind: str, horizon: datetime) -> dict[str, datetime]:
        """The groups whose rate allows no start before ``horizon``, and their TAT."""
        rows = connection.execute(AHEAD, {"flow_kind": kind, "horizon": horizon})
        return {str(group): tat for group, tat in rows}

    def lock(
        self, connection: Connection, kind: str, now: datetime, groups: list[str]
    ) -> tuple[dict[str, Any], dict[str, int]]:
        """Lock the ``groups``' rows (made if missing: locked after the others, which breaks the
        one order only for rows no claim held yet), then count their running jobs: each group's
        rate state and running count."""
        params = {"flow_kind": kind, "groups": groups, "now": now}
        tats = {str(g): tat for g, tat in connection.execute(lock_rows(self.dialect), params)}
        if missing := [group for group in groups if group not in tats]:  # their first claim
            rows = [{"flow_kind": kind, "group": group} for group in missing]
            connection.execute(ensure_rows(self.dialect), rows)
            again = {**params, "groups": missing}
            tats.update({str(g): t for g, t in connection.execute(lock_rows(self.dialect), again)})
        counted = {str(g): int(n) for g, n in connection.execute(running(self.dialect), params)}
        return tats, counted

    def any_due(self, connection: Connection, kind: str, now: datetime, groups: list[str]) -> bool:
        params = {"flow_kind": kind, "now": now, "groups": groups}
        return connection.execute(any_due_in(self.dialect), params).first() is not None

    def set_tats(self, connection: Connection, kind: str, tats: dict[str, datetime]) -> None:
        rows = [{"flow_kind": kind, "group": g, "new_tat": tat} for g, tat in tats.items()]
        if rows:
            connection.execute(SET_TAT, rows)


@cache
def any_due_in(dialect: str) -> Any:
    """One due job of the kind among ``groups`` (the groups a claim left out), if any."""
    among = sql.among(jobs.c.group_key, "groups", dialect, Text())
    due = (jobs.c.status == Status.PENDING.value, jobs.c.run_at <= NOW)
    return select(jobs.c.id).where(jobs.c.kind == KIND, *due, among).limit(1)
