"""A prototype of the jobs table partitioned by epoch, beside today's table in the same database
(``bench.jobs_epochs``; the design: docs/retention.md, "The jobs table: epochs, designed").

``jobs`` is renamed ``jobs_plain`` (today's table, its indexes and triggers); ``jobs_epochs`` is
the same columns plus ``epoch``, partitioned by list on it, one partition per epoch, every unique
index carrying the epoch. The current epoch is ``job_epoch``'s one row; writers name it.
"""

from __future__ import annotations

import time

import psycopg

PLAIN_REVISION = "0015_inbox_partitions"
"""The last schema with the jobs table in one piece: the prototype renames it ``jobs_plain``."""
LAYOUT = """
ALTER TABLE jobs RENAME TO jobs_plain;
CREATE TABLE job_epoch (current integer NOT NULL);
INSERT INTO job_epoch VALUES (0);
CREATE TABLE jobs_epochs (LIKE jobs_plain INCLUDING DEFAULTS, epoch integer NOT NULL)
    PARTITION BY LIST (epoch);
ALTER TABLE jobs_epochs ADD PRIMARY KEY (id, epoch);
CREATE UNIQUE INDEX ON jobs_epochs (idempotency_key, epoch);
CREATE UNIQUE INDEX ON jobs_epochs (debounce_key, epoch)
    WHERE debounce_key IS NOT NULL AND status = 'pending';
CREATE UNIQUE INDEX ON jobs_epochs (lock_key, epoch)
    WHERE lock_key IS NOT NULL AND status = 'running';
CREATE INDEX ON jobs_epochs (priority DESC, COALESCE(fair_at, run_at), id)
    WHERE status = 'pending';
CREATE INDEX ON jobs_epochs (group_key, fair_at)
    WHERE group_key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX ON jobs_epochs (fair_at) WHERE group_key IS NOT NULL AND status = 'pending';
CREATE INDEX ON jobs_epochs (lease_until) WHERE status = 'running';
CREATE INDEX ON jobs_epochs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX ON jobs_epochs (lock_key, id)
    WHERE lock_key IS NOT NULL AND status IN ('pending', 'running');
CREATE TRIGGER jobs_epochs_notify_due AFTER INSERT ON jobs_epochs
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify_due();
"""

COLUMNS = (
    "kind, payload, status, priority, run_at, attempts, idempotency_key, created_at, updated_at"
)
VALUES = "'noop', '{}', 'pending', 0, now(), 0, %(key)s, now(), now()"
PLAIN_ENQUEUE = (
    f"INSERT INTO jobs_plain ({COLUMNS}) VALUES ({VALUES}) ON CONFLICT DO NOTHING RETURNING id"
)
"""Today's keyed enqueue: the one unique index on the key decides."""


def epoch_enqueue(epoch: int) -> str:
    """The epochs' keyed enqueue, for the epoch the client last read: the current epoch's unique
    index decides among new rows, and the earlier epochs, which no transaction inserts into any
    more, are looked into (one probe each, pruned when planned: the epoch is a literal, so each
    epoch is one prepared statement). Inserts nothing if ``epoch`` is no longer the current one
    (the client reads it again and retries: ``enqueue``)."""
    return (
        f"INSERT INTO jobs_epochs ({COLUMNS}, epoch) SELECT {VALUES}, {epoch} "
        f"WHERE (SELECT current FROM job_epoch) = {epoch} AND NOT EXISTS (SELECT 1 FROM "
        f"jobs_epochs WHERE idempotency_key = %(key)s AND epoch < {epoch}) "
        "ON CONFLICT DO NOTHING RETURNING id"
    )


def current_epoch(connection: psycopg.Connection) -> int:
    row = connection.execute("SELECT current FROM job_epoch").fetchone()
    assert row is not None
    return int(row[0])


def enqueue(connection: psycopg.Connection, key: str, epoch: int) -> tuple[bool, int]:
    """One keyed job in the caller's transaction: ``(inserted, the epoch it was checked in)``.
    An insert that found nothing to do under a switched epoch runs again under the new one; from
    then on the transaction holds its lock on the table, so the epoch cannot change under it."""
    while True:
        statement = epoch_enqueue(epoch)
        if connection.execute(statement, {"key": key}, prepare=True).fetchone() is not None:
            return True, epoch
        now = current_epoch(connection)
        if now == epoch:
            return False, epoch
        epoch = now


STAGE = "CREATE TEMPORARY TABLE IF NOT EXISTS stage (key text) ON COMMIT DELETE ROWS"
PLAIN_MOVE = (
    f"INSERT INTO jobs_plain ({COLUMNS}) SELECT {VALUES.replace('%(key)s', 's.key')} "
    "FROM stage s ON CONFLICT DO NOTHING"
)


def epoch_move(epoch: int) -> str:
    """The stage into the current epoch, each key looked up in the earlier ones: one index probe
    per row and epoch (``OFFSET 0`` keeps the lookup a subplan; as a join the planner hashed
    every earlier epoch's keys, a cost that grows with the rows retained)."""
    return (
        f"INSERT INTO jobs_epochs ({COLUMNS}, epoch) SELECT {VALUES.replace('%(key)s', 's.key')}, "
        f"{epoch} FROM stage s WHERE (SELECT current FROM job_epoch) = {epoch} AND NOT EXISTS ("
        f"SELECT 1 FROM jobs_epochs j WHERE j.idempotency_key = s.key AND j.epoch < {epoch} "
        "OFFSET 0) ON CONFLICT DO NOTHING"
    )


FINISHED_ROWS = (
    "INSERT INTO {table} (kind, payload, status, priority, run_at, attempts, idempotency_key, "
    "created_at, updated_at, finished_at{epoch_column}) SELECT 'noop', "
    "'{{\"to\": \"someone@example.com\"}}', 'done', 0, now(), 1, 'old-' || {epoch} || '-' || n, "
    "now(), now(), now() - interval '30 days'{epoch_value} FROM generate_series(1, {rows}) n"
)


def partition(conninfo: str, epoch: int) -> None:
    """The partition for ``epoch`` (made ahead of the switch, as the inbox's weeks are)."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            f"CREATE TABLE jobs_epochs_e{epoch} PARTITION OF jobs_epochs FOR VALUES IN ({epoch})"
        )


def lay_out(conninfo: str, old_epochs: int, rows: int) -> None:
    """Both tables, each holding ``old_epochs`` x ``rows`` finished keyed rows (in the earlier
    epochs for ``jobs_epochs``); the current epoch is ``old_epochs``, empty."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(LAYOUT)
    for epoch in range(old_epochs + 1):
        partition(conninfo, epoch)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for epoch in range(old_epochs):
            for table, column, value in (
                ("jobs_plain", "", ""),
                ("jobs_epochs", ", epoch", f", {epoch}"),
            ):
                connection.execute(
                    FINISHED_ROWS.format(
                        table=table, epoch_column=column, epoch_value=value, epoch=epoch, rows=rows
                    )
                )
        connection.execute("UPDATE job_epoch SET current = %s", (old_epochs,))
        connection.execute("VACUUM ANALYZE jobs_plain")
        connection.execute("VACUUM ANALYZE jobs_epochs")


def switch(connection: psycopg.Connection, epoch: int, locked: bool) -> float:
    """Make ``epoch`` the current one; ``locked``: first wait, under ``SHARE`` on the table, for
    every transaction that wrote to it (and hold off new ones), so none that took the old epoch
    is still open when a transaction reads the new one. Returns the seconds the lock took."""
    started = time.perf_counter()
    with connection.transaction():
        if locked:
            connection.execute("SET LOCAL lock_timeout = '10s'")
            connection.execute("LOCK TABLE jobs_epochs IN SHARE MODE")
        waited = time.perf_counter() - started
        connection.execute("UPDATE job_epoch SET current = %s", (epoch,))
    return waited


PENDING_ROWS = (
    "INSERT INTO {table} (kind, payload, status, priority, run_at, attempts, created_at, "
    "updated_at{epoch_column}) SELECT 'noop', '[]', 'pending', 0, now(), 0, now(), now()"
    "{epoch_value} FROM generate_series(1, {rows})"
)
CLAIM = (
    "WITH due AS MATERIALIZED (SELECT id{epoch} FROM {table} WHERE status = 'pending' "
    "AND run_at <= now() ORDER BY priority DESC, COALESCE(fair_at, run_at), id LIMIT 100 "
    "FOR UPDATE SKIP LOCKED) UPDATE {table} j SET status = 'running', attempts = attempts + 1, "
    "claimed_by = 'bench', lease_until = now() + interval '1 minute', updated_at = now() "
    "FROM due WHERE j.id = due.id{same_epoch} RETURNING j.id{returned}"
)
"""The sweep's claim in its PostgreSQL form (materialized, ``SKIP LOCKED``), in claim order."""
DONE = (
    "UPDATE {table} SET status = 'done', lease_until = NULL, updated_at = now(), "
    "finished_at = now() WHERE id = ANY(%(ids)s){epochs} AND claimed_by = 'bench' "
    "AND status = 'running'"
)
"""The claimed jobs done, by id (and, on the epochs, their epochs: pruned to the partitions)."""


def sweep_statements(table: str, epoch: int | None) -> tuple[str, str]:
    """Claiming 100 of ``table``'s pending jobs, and finishing them."""
    keyed = epoch is not None
    claim = CLAIM.format(
        table=table,
        epoch=", epoch" if keyed else "",
        same_epoch=" AND j.epoch = due.epoch" if keyed else "",
        returned=", j.epoch" if keyed else "",
    )
    done = DONE.format(table=table, epochs=" AND epoch = ANY(%(epochs)s)" if keyed else "")
    return claim, done


def fill(connection: psycopg.Connection, table: str, epoch: int | None, jobs: int) -> None:
    """``jobs`` pending jobs, due now, and the table analyzed. Unanalyzed, a young epoch's
    partition was planned as if few of its rows were pending: the claim sorted all of them
    (a bitmap scan and a sort, 133 us a job against 23 on the one table) instead of merging the
    partitions' ordered indexes."""
    keyed = epoch is not None
    connection.execute(
        PENDING_ROWS.format(
            table=table,
            epoch_column=", epoch" if keyed else "",
            epoch_value=f", {epoch}" if keyed else "",
            rows=jobs,
        )
    )
    connection.execute(f"ANALYZE {table}")


def drain(connection: psycopg.Connection, table: str, epoch: int | None) -> int:
    """Claim and finish until nothing is due; the number of jobs."""
    claim, done = sweep_statements(table, epoch)
    total = 0
    while rows := connection.execute(claim, prepare=True).fetchall():
        ids, epochs = [row[0] for row in rows], sorted({row[-1] for row in rows})
        connection.execute(done, {"ids": ids, "epochs": epochs}, prepare=True)
        total += len(rows)
    return total
