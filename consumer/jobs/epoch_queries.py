"""The statements of the retirement of PostgreSQL's jobs epochs, each named once;
``consumer.jobs.epoch_retire`` runs them.

What retention keeps of a partition is the complement of ``operator_queries.purged``'s rule,
written as one probe per partial index (migration ``0016_jobs_epochs``): ``jobs_eN_claimable``
for pending jobs, ``jobs_eN_leases`` for running ones, ``jobs_eN_finished`` for jobs finished
since the cutoff. A finished job without ``finished_at``, which no writer leaves, is the one the
chunked purge keeps forever and the epoch's retirement drops.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from consumer.db import locked
from consumer.jobs.model import FINISHED, Status

RETIRED = "_retired"
LOCK_TIMEOUT = "100ms"
"""The retirement locks ``jobs`` in ``ACCESS EXCLUSIVE`` mode, which holds off the claims too:
they queue behind its request this long at most, as behind the inbox's."""
KEPT_ARRIVED = "55006"
"""``object_in_use``: under the jobs' lock, the partition turned out to hold a job retention
keeps (an operator's retry revived one, a job finished late)."""
UNFINISHED = [status.value for status in Status if status not in FINISHED]
SURVEY_CAP = 1000
"""The survey counts at most this many jobs of each kind: a reason, not an inventory."""

LISTED = text("""
SELECT c.relname AS name, e.epoch, e.ended_at
FROM pg_inherits AS i
JOIN pg_class AS c ON c.oid = i.inhrelid
JOIN job_epochs AS e ON c.relname = 'jobs_e' || e.epoch
WHERE i.inhparent = 'jobs'::regclass
  AND e.epoch < (SELECT epoch FROM job_epochs WHERE ended_at IS NULL)
ORDER BY e.epoch
""")
"""The partitions of the epochs before the current one, oldest first, with when each ended."""

LEFTOVERS = text(
    "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition"
    " AND relname ~ '^jobs_e[0-9]+_retired$' AND pg_table_is_visible(oid)"
)
"""Partitions detached by a retirement whose ``DROP`` did not get its lock."""


def _kept(name: str, cutoff: str) -> list[str]:
    """One ``SELECT`` per kind of job retention keeps in partition ``name``, each read through
    its partial index; ``cutoff``: a SQL expression."""
    unfinished = [f"SELECT FROM {name} WHERE status = '{status}'" for status in UNFINISHED]
    return [*unfinished, f"SELECT FROM {name} WHERE finished_at >= {cutoff}"]


def surveyed(name: str) -> str:
    """Partition ``name``'s unfinished jobs, its jobs finished since ``:cutoff`` (each count
    capped at ``SURVEY_CAP``), and its size as ``pg_class.reltuples`` estimates it (``-1``:
    never vacuumed nor analyzed). Run under ``locked.NO_SEQSCAN``."""
    *unfinished, recent = (
        f"(SELECT count(*) FROM ({probe} LIMIT {SURVEY_CAP}) AS kept)"
        for probe in _kept(name, ":cutoff")
    )
    return (
        f"SELECT {' + '.join(unfinished)} AS unfinished, {recent} AS recent, "
        f"(SELECT reltuples FROM pg_class WHERE oid = to_regclass('{name}')) AS estimate"
    )


def counted(name: str) -> str:
    """The jobs of a partition ``pg_class`` has no estimate for (one young enough to be small)."""
    return f"SELECT count(*) FROM {name}"


def detached(name: str, cutoff: datetime) -> str:
    """Under the jobs' lock, checked again for jobs retention keeps (``KEPT_ARRIVED``), out of
    ``jobs`` and renamed ``<name>_retired`` (its ``DROP``, a step of its own, locks only it)."""
    literal = f"'{cutoff.isoformat()}'::timestamptz"
    kept = " OR ".join(f"EXISTS ({probe})" for probe in _kept(name, literal))
    return locked.block(
        LOCK_TIMEOUT,
        "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE",
        "PERFORM set_config('enable_seqscan', 'off', true)",
        f"IF {kept} THEN RAISE EXCEPTION 'jobs partition {name} holds jobs retention keeps' "
        f"USING ERRCODE = '{KEPT_ARRIVED}'; END IF",
        f"ALTER TABLE jobs DETACH PARTITION {name}",
        f"ALTER TABLE {name} RENAME TO {name}{RETIRED}",
    )
