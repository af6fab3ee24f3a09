"""The Python side of ``bench/peers.py``: the consumer, procrastinate and pgqueuer, each set up,
fed and drained the same way. Run as a script (procrastinate and pgqueuer from the bench's
scratch virtualenv, the consumer from the project's), one step per process:

    python peer_python.py PEER setup|enqueue|work CONNINFO JOBS

``enqueue`` adds JOBS no-op jobs in one batch (payload ``{"n": i}``) and prints ``enqueued
SECONDS``. ``work`` starts one worker, prints ``ready`` when it is connected, drains the queue,
prints ``done RUN DISTINCT`` (jobs run, distinct ``n`` among them), then waits for its standard
input to close, so the bench reads its CPU and its backends' before it exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

RAN: list[int] = []
"""The ``n`` of every job run, in the order run."""


def ready() -> None:
    print("ready", flush=True)


def finish(jobs: int) -> None:
    print(f"done {len(RAN)} {len(set(RAN))}", flush=True)
    sys.stdin.read()


# --- the consumer ---------------------------------------------------------------------------------


def consumer_setup(conninfo: str, jobs: int) -> None:
    from bench.support.aged_epochs import age
    from consumer.db.migrate import upgrade

    upgrade(_url(conninfo))
    age(_url(conninfo))  # earlier epochs, as production's table has them


def consumer_enqueue(conninfo: str, jobs: int) -> float:
    from consumer import NewJob, enqueue_many
    from consumer.db.engine import make_engine

    engine = make_engine(_url(conninfo))
    new_jobs = [NewJob("noop", {"n": n}) for n in range(jobs)]
    with engine.connect() as connection:  # connected before the clock starts, as the others
        connection.exec_driver_sql("SELECT 1")
    started = time.perf_counter()
    with engine.begin() as connection:
        enqueue_many(connection, new_jobs, allow_unknown=True)
    return time.perf_counter() - started


def consumer_work(conninfo: str, jobs: int) -> None:
    from consumer.config.settings import Settings
    from consumer.db.engine import make_engine
    from consumer.jobs.sweep import Sweeper
    from consumer.pipeline.extensions import JobKinds

    settings = Settings.of(database_url=_url(conninfo), local_mode=True)
    engine = make_engine(settings.database_url, pool_size=1)
    kinds = JobKinds()
    kinds.add("noop", lambda context, job: RAN.append(job.payload["n"]))
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")
    ready()
    Sweeper(settings, engine, kinds).run(time.monotonic() + 600)
    finish(jobs)


def _url(conninfo: str) -> str:
    return conninfo.replace("postgresql://", "postgresql+psycopg://")


# --- procrastinate --------------------------------------------------------------------------------


def _procrastinate(conninfo: str, sync: bool = False) -> Any:
    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    connector_type = procrastinate.SyncPsycopgConnector if sync else procrastinate.PsycopgConnector
    app = procrastinate.App(connector=connector_type(conninfo=conninfo))

    @app.task(name="noop")
    def noop(n: int) -> None:
        RAN.append(n)

    return app


def procrastinate_setup(conninfo: str, jobs: int) -> None:
    app = _procrastinate(conninfo, sync=True)
    with app.open():
        app.schema_manager.apply_schema()


def procrastinate_enqueue(conninfo: str, jobs: int) -> float:
    app = _procrastinate(conninfo, sync=True)
    with app.open():
        arguments = [{"n": n} for n in range(jobs)]
        started = time.perf_counter()
        app.tasks["noop"].batch_defer(*arguments)
        return time.perf_counter() - started


def procrastinate_work(conninfo: str, jobs: int) -> None:
    app = _procrastinate(conninfo)
    ready()
    app.run_worker(
        wait=False, concurrency=1, install_signal_handlers=False, listen_notify=False,
        delete_jobs="never",
    )  # fmt: skip
    finish(jobs)


# --- pgqueuer -------------------------------------------------------------------------------------


async def _pgqueuer_driver(conninfo: str) -> Any:
    import psycopg
    from pgqueuer import PsycopgDriver

    return PsycopgDriver(await psycopg.AsyncConnection.connect(conninfo, autocommit=True))


def pgqueuer_setup(conninfo: str, jobs: int) -> None:
    from pgqueuer import Queries

    async def setup() -> None:
        await Queries(await _pgqueuer_driver(conninfo)).install()

    asyncio.run(setup())


def pgqueuer_enqueue(conninfo: str, jobs: int) -> float:
    from pgqueuer import Queries

    async def enqueue() -> float:
        queries = Queries(await _pgqueuer_driver(conninfo))
        payloads: list[bytes | None] = [json.dumps({"n": n}).encode() for n in range(jobs)]
        started = time.perf_counter()
        await queries.enqueue(["noop"] * jobs, payloads, [0] * jobs)
        return time.perf_counter() - started

    return asyncio.run(enqueue())


def pgqueuer_work(conninfo: str, jobs: int) -> None:
    from pgqueuer import PgQueuer
    from pgqueuer.domain.types import QueueExecutionMode

    logging.getLogger("pgqueuer").setLevel(logging.ERROR)

    async def work() -> None:
        queuer = PgQueuer(await _pgqueuer_driver(conninfo))

        @queuer.entrypoint("noop")
        async def noop(job: Any) -> None:
            RAN.append(json.loads(job.payload)["n"])

        ready()
        await queuer.run(mode=QueueExecutionMode.drain, batch_size=100)  # the sweep's batch

    asyncio.run(work())
    finish(jobs)


STEPS: dict[str, dict[str, Callable[[str, int], Any]]] = {
    "consumer": {"setup": consumer_setup, "enqueue": consumer_enqueue, "work": consumer_work},
    "procrastinate": {
        "setup": procrastinate_setup,
        "enqueue": procrastinate_enqueue,
        "work": procrastinate_work,
    },
    "pgqueuer": {"setup": pgqueuer_setup, "enqueue": pgqueuer_enqueue, "work": pgqueuer_work},
}


def main() -> None:
    peer, step, conninfo, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    result = STEPS[peer][step](conninfo, jobs)
    if step == "enqueue":
        print(f"enqueued {result}", flush=True)


if __name__ == "__main__":
    main()
