"""Event fields that would break a key or a column are refused up front (400, nothing stored);
fields that are legal stay exactly as sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import DBAPIError

from consumer.config.settings import Settings
from consumer.db.engine import is_unavailable
from consumer.http.app import create_app
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import deploy_body, storage_body, wrapped_body
from consumer.wire.events import StorageEvent


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


def deploy_with(**fields: str) -> dict[str, Any]:
    payload = {"event": "deploy", "service": "web", "release": "r1", **fields}
    return wrapped_body(data=json.dumps(payload).encode(), attributes={"event": "deploy"})


REFUSED = {
    "message id of 3000 characters": wrapped_body(message_id="7" * 3000),
    "subscription of 3000 characters": wrapped_body(subscription="s" * 3000),
    "superscript digit generation": storage_body("b", "f.csv", "²"),
    "generation beyond int64": storage_body("b", "f.csv", "9" * 20),
    "object name over 1024 bytes": storage_body("b", "\U0001d518" * 300, "1"),
    "environment over 200 characters": deploy_with(environment="e" * 300),
    "environment with a lone surrogate": deploy_with(environment="\ud800"),
    "commit with a NUL": deploy_with(commit="abc\x00"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unkeyable_or_unstorable_fields_are_refused(
    case: str, client: FlaskClient, engine: Engine
) -> None:
    body = json.dumps(REFUSED[case]).encode()
    response = client.post("/push", data=body, content_type="application/json")
    assert response.status_code == 400, response.get_data(as_text=True)
    assert stored(engine) == 0


def test_object_names_keep_their_spaces() -> None:
    body = json.dumps(storage_body("b", " dir/a.csv ", "5")).encode()
    event = classify(parse_push({}, body), lambda _: 60)
    assert isinstance(event, StorageEvent) and event.name == " dir/a.csv "


def test_metadata_updates_without_a_payload_do_not_collide() -> None:
    keys = set()
    for message_id in ("1", "2"):
        body = storage_body(
            "b", "f", "5", event_type="OBJECT_METADATA_UPDATE", message_id=message_id
        )
        body["message"]["attributes"]["payloadFormat"] = "NONE"
        del body["message"]["data"]
        keys.add(classify(parse_push({}, json.dumps(body).encode()), lambda _: 60).key)
    assert len(keys) == 2


@pytest.mark.postgres
def test_a_value_over_a_database_limit_is_not_an_outage(postgres_url: str) -> None:
    """PostgreSQL reports an index entry that is too large as an OperationalError; retrying it
    can never succeed, so it must not be treated as the database being down."""
    from consumer.db.engine import make_engine

    engine = make_engine(postgres_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE wide (v text PRIMARY KEY)"))
        with pytest.raises(DBAPIError) as raised, engine.begin() as connection:
            noise = "".join(f"{n:x}" for n in range(2000))  # barely compressible
            connection.execute(text("INSERT INTO wide VALUES (md5(:v) || :v)"), {"v": noise})
        assert not is_unavailable(raised.value)
    finally:
        engine.dispose()


def test_purge_deletes_at_most_the_limit(client: FlaskClient, engine: Engine) -> None:
    from datetime import UTC, datetime, timedelta

    from consumer.inbox.store import Inbox

    for n in range(5):
        client.post("/push", json=wrapped_body(message_id=f"m{n}"))  # unroutable: finished
    later = datetime.now(UTC) + timedelta(seconds=5)
    assert Inbox(engine).purge(finished_before=later, limit=2) == 2
    assert Inbox(engine).purge(finished_before=later, limit=10) == 3
    assert stored(engine) == 0


def test_purge_takes_failed_rows_nobody_retried(settings: Settings, engine: Engine) -> None:
    from datetime import UTC, datetime, timedelta

    from consumer.inbox.store import Inbox

    with_effects = Settings(
        settings.database_url, local_mode=True, plugins=("tests.plugins.effects",)
    )
    failing = create_app(Service.of(with_effects, engine)).test_client()
    body = deploy_body("web", "abandoned")
    body["message"]["attributes"]["fail"] = "always"
    assert failing.post("/push", json=body).status_code == 503
    now = datetime.now(UTC)
    assert Inbox(engine).purge(finished_before=now - timedelta(days=1)) == 0
    assert Inbox(engine).purge(finished_before=now + timedelta(seconds=5)) == 1
