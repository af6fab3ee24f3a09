"""Every database wait ends below the ack deadline, as a 503 that Pub/Sub redelivers: a lock that
is never released, a statement that never ends, a session left idle in its transaction and a pool
with no free connection (PostgreSQL's timeouts are set on every connection of a server's engine).
Before, each of them waited until the watchdog ended the whole worker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Late
from typing import Any

import pytest
from sqlalchemy import Engine, text

from consumer.config.database import DatabaseWaits
from consumer.config.settings import Settings
from consumer.db.engine import make_engine, unavailable_on_db_fault
from consumer.errors import SettingsError, Unavailable
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.service import Service
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent
from consumer.wire.outcomes import Kind, Outcome

pytestmark = pytest.mark.postgres
BOUND_SECONDS = 10
"""Far above every bound set here (1 s), far below the 20 s the blocked statements would take."""
SLOW_CLAIM = """
CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_sleep(20); RETURN NEW; END $$;
CREATE TRIGGER slow_claim BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION slow_claim();
"""


def release() -> DeployEvent:
    message = parse_wrapped(deploy_body("web", "v1"), Limits())
    return DeployEvent(service="web", release="v1", message=message)


@pytest.fixture
def serve(postgres_url: str) -> Iterator[Callable[..., Dispatcher]]:
    """A dispatcher on the engine a server opens (``Service.engine``), with ``values`` set."""
    services: list[Service] = []

    def build(handler: Callable[..., Any] = lambda context, event: {}, **values: Any) -> Dispatcher:
        settings = Settings.of(database_url=postgres_url, local_mode=True, **values)
        registry = Registry()
        registry.deploy(handler)
        services.append(Service(settings, registry))
        return Dispatcher(settings, services[-1].engine, registry)

    yield build
    for service in services:
        service.engine.dispose()


def decided(run: Callable[[], Outcome]) -> Outcome:
    """``run()``'s outcome, which must come within ``BOUND_SECONDS``."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(run).result(timeout=BOUND_SECONDS)
    except Late:
        pytest.fail(f"still waiting on the database after {BOUND_SECONDS} s")
    finally:
        pool.shutdown(wait=False)  # a wait that hangs ends when the test lets its lock go


def test_a_blocked_lock_wait_ends_unavailable(
    serve: Callable[..., Dispatcher], pg_engine: Engine
) -> None:
    dispatcher = serve(database_lock_timeout_seconds=1)
    with pg_engine.connect() as blocker, blocker.begin():
        blocker.execute(text("LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE"))
        started = time.monotonic()
        outcome = decided(lambda: dispatcher.handle(release()))
    assert (outcome.kind, outcome.http_status, outcome.acked) == (Kind.UNAVAILABLE, 503, False)
    assert time.monotonic() - started < 3
    assert dispatcher.handle(release()).kind is Kind.DONE  # the redelivery, once it is free


def test_a_long_statement_ends_unavailable(
    serve: Callable[..., Dispatcher], pg_engine: Engine
) -> None:
    dispatcher = serve(database_statement_timeout_seconds=1)
    with pg_engine.begin() as connection:
        connection.exec_driver_sql(SLOW_CLAIM)
    outcome = decided(lambda: dispatcher.handle(release()))
    assert (outcome.kind, outcome.http_status, outcome.acked) == (Kind.UNAVAILABLE, 503, False)


def test_a_handler_s_long_statement_is_retried(serve: Callable[..., Dispatcher]) -> None:
    def sleeper(context: HandlerContext, event: DeployEvent) -> None:
        with context.engine.connect() as connection:
            connection.execute(text("SELECT pg_sleep(20)"))

    dispatcher = serve(sleeper, database_statement_timeout_seconds=1)
    outcome = decided(lambda: dispatcher.handle(release()))
    assert (outcome.kind, outcome.http_status) == (Kind.RETRY, 503)
    assert "QueryCanceled" in outcome.details["error"]


def waits(**seconds: float) -> DatabaseWaits:
    unbounded = {"statement": 0, "lock": 0, "idle_in_transaction": 0, "pool": 30, "lease_join": 1}
    return DatabaseWaits(**{**unbounded, **seconds})


def test_a_session_idle_in_its_transaction_is_ended(postgres_url: str) -> None:
    engine = make_engine(postgres_url, waits(idle_in_transaction=1))
    try:
        with pytest.raises(Unavailable), unavailable_on_db_fault(), engine.connect() as connection:
            connection.execute(text("SELECT 1"))  # begins the transaction
            time.sleep(1.5)
            connection.execute(text("SELECT 1"))
    finally:
        engine.dispose()


def test_a_checkout_from_a_busy_pool_ends_unavailable(postgres_url: str) -> None:
    engine = make_engine(postgres_url, waits(pool=1), pool_size=1, max_overflow=0)
    try:
        with engine.connect():
            started = time.monotonic()
            with pytest.raises(Unavailable), unavailable_on_db_fault(), engine.connect():
                pass
            assert time.monotonic() - started < 3
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "variable",
    [
        "CONSUMER_DATABASE_STATEMENT_TIMEOUT_SECONDS", "CONSUMER_DATABASE_LOCK_TIMEOUT_SECONDS",
        "CONSUMER_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
        "CONSUMER_DATABASE_POOL_TIMEOUT_SECONDS", "CONSUMER_DATABASE_LEASE_JOIN_SECONDS",
    ],
)  # fmt: skip
def test_a_wait_at_or_above_the_ack_deadline_is_refused(variable: str) -> None:
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_ACK_DEADLINE_SECONDS": "20"}
    for seconds in ("20", "21"):
        with pytest.raises(SettingsError, match=f"{variable} must be below the ack deadline"):
            Settings.from_env({**env, variable: seconds})
    Settings.from_env({**env, variable: "19"})


@pytest.mark.parametrize(("deadline", "margin"), [(10, 1), (10, 9), (60, 10), (600, 599)])
def test_the_derived_waits_end_before_the_ack_deadline(deadline: int, margin: int) -> None:
    settings = Settings.of(ack_deadline_seconds=deadline, safety_margin_seconds=margin)
    derived = settings.database_waits
    bounds = (derived.statement, derived.lock, derived.idle_in_transaction, derived.pool)
    assert all(0 < seconds < deadline for seconds in (*bounds, derived.lease_join))
    assert derived.statement == derived.idle_in_transaction == deadline - margin
