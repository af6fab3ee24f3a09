"""The job API through the plain WSGI app (Flask's test client), on SQLite and PostgreSQL:
enqueue idempotent by key in the SQL function's namespace, the kind's rules, read, cancel, retry,
and every refusal a clear 4xx that stores nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, func, select, update

from consumer import enqueue
from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.jobs import api_request
from consumer.jobs.schema import jobs
from consumer.pipeline.registry import Registry
from consumer.service import Service
from consumer.wire.timeutil import utcnow
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey, claims
from tests.conftest import Clock
from tests.http.job_api_client import OTHER_SECRET, SECRET, call, headers_for, path_of

EMAIL = {"to": "ann@example.com", "subject": "Hi", "text": "hello"}
LATER = (utcnow() + timedelta(days=1)).isoformat()


@pytest.fixture
def api(database_url: str, engine: Engine, clock: Clock, tmp_path: Path) -> Iterator[FlaskClient]:
    settings = Settings(database_url=database_url).with_values(
        push_token="push-token-0123456789", job_api_secrets=(SECRET,),
        plugins=("tests.jobs.stamp_plugin",), maildir_path=str(tmp_path / "md"),
    )  # fmt: skip
    yield create_app(Service.of(settings, engine), clock=clock).test_client()


def count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(jobs)).scalar_one())


def set_status(engine: Engine, key: str, status: str) -> None:
    with engine.begin() as connection:
        connection.execute(update(jobs).where(jobs.c.idempotency_key == key).values(status=status))


def test_enqueue_is_idempotent_by_key_and_a_key_of_another_kind_conflicts(
    api: FlaskClient, engine: Engine
) -> None:
    body = {"kind": "email", "payload": EMAIL, "key": "welcome-ann", "priority": 5,
            "max_attempts": 3, "run_at": LATER, "lock_key": "ann"}  # fmt: skip
    status, created = call(api, "POST", "/jobs", body)
    assert status == 201 and created["outcome"] == "created" and created["key"] == "welcome-ann"
    job = created["job"]
    assert (job["kind"], job["status"], job["priority"], job["max_attempts"]) == (
        "email", "pending", 5, 3)  # fmt: skip
    assert job["run_at"].startswith(LATER[:19]) and job["attempts"] == 0
    status, again = call(api, "POST", "/jobs", {**body, "payload": {"to": "bob@example.com"}})
    assert (status, again["outcome"], again["job"]["id"]) == (200, "existing", job["id"])
    status, other = call(api, "POST", "/jobs", {"kind": "stamp", "key": "welcome-ann"})
    assert status == 409 and other["status"] == "kind" and "'email'" in other["error"]
    assert count(engine) == 1


def test_a_key_enqueued_by_python_or_sql_is_the_same_job(api: FlaskClient, engine: Engine) -> None:
    """No prefix: the namespace of ``enqueue(key=)`` and ``consumer_enqueue(key =>)``."""
    first = enqueue(engine, "email", EMAIL, key="order-42:welcome")
    status, answer = call(api, "POST", "/jobs", {"kind": "email", "key": "order-42:welcome"})
    assert (status, answer["job"]["id"]) == (200, first.job_id)
    assert count(engine) == 1


def test_the_kind_s_producer_fields_apply(api: FlaskClient, engine: Engine) -> None:
    payload = {**EMAIL, "bcc": "spy@example.com", "from": "ceo@example.com"}
    status, answer = call(api, "POST", "/jobs", {"kind": "email", "payload": payload, "key": "p"})
    assert status == 201 and answer["ignored_fields"] == ["bcc", "from"]
    with engine.connect() as connection:
        stored = connection.execute(select(jobs.c.payload)).scalar_one()
    assert stored == EMAIL


def test_a_job_s_group_is_named_by_the_request_and_a_bad_one_stores_nothing(
    api: FlaskClient, engine: Engine
) -> None:
    body = {"kind": "email", "payload": EMAIL, "key": "g", "group": "tenant-a"}
    status, answer = call(api, "POST", "/jobs", body)
    assert (status, answer["job"]["group"]) == (201, "tenant-a")
    with engine.connect() as connection:
        assert connection.execute(select(jobs.c.group_key)).scalar_one() == "tenant-a"
    for bad in ("", "x" * 201, 7, ["a"]):
        status, refused = call(api, "POST", "/jobs", {**body, "key": "bad", "group": bad})
        assert status == 400 and "'group' must be a string of 1..200" in refused["error"]
    assert count(engine) == 1


def test_without_a_group_a_job_takes_the_one_its_kind_groups_by() -> None:
    limits = api_request.Limits(1000, 100, 10)
    body = json.dumps({"kind": "email", "payload": EMAIL}).encode()
    kinds = Registry().job_kinds
    kinds.add("email", lambda context, job: None)
    assert api_request.parse(body, kinds, limits, {"email": "to"}).job.group == EMAIL["to"]
    assert api_request.parse(body, kinds, limits, {}).job.group is None


def test_without_a_key_one_is_made_and_the_job_is_readable_by_it(api: FlaskClient) -> None:
    status, answer = call(api, "POST", "/jobs", {"kind": "email", "payload": EMAIL})
    assert status == 201 and len(answer["key"]) == 32
    status, read = call(api, "GET", path_of(answer["key"]))
    assert status == 200 and read["job"]["id"] == answer["job"]["id"]


def test_read_gives_the_state_and_an_unknown_key_is_404(api: FlaskClient) -> None:
    call(api, "POST", "/jobs", {"kind": "email", "payload": EMAIL, "key": "ключ é"})
    status, read = call(api, "GET", path_of("ключ é"))
    assert status == 200 and read["outcome"] == "found" and read["key"] == "ключ é"
    assert set(read["job"]) == {
        "key", "id", "kind", "status", "attempts", "max_attempts", "priority", "group", "run_at",
        "result", "last_error", "created_at", "updated_at", "finished_at", "cancel_requested",
    }  # fmt: skip
    assert read["job"]["max_attempts"] == 10  # CONSUMER_JOB_MAX_ATTEMPTS, as the job will run
    status, missing = call(api, "GET", path_of("nobody"))
    assert status == 404 and missing["error"] == "no job has the key 'nobody'"


def test_cancel_a_pending_job_request_a_running_one_s_and_409_for_finished_ones(
    api: FlaskClient, engine: Engine
) -> None:
    for key in ("later", "now", "running", "done"):
        run_at = LATER if key == "later" else None
        call(
            api, "POST", "/jobs", {"kind": "email", "payload": EMAIL, "key": key, "run_at": run_at}
        )
    for key in ("later", "now"):
        status, answer = call(api, "DELETE", path_of(key))
        assert (status, answer["outcome"], answer["job"]["status"]) == (
            200,
            "cancelled",
            "cancelled",
        )
        assert answer["job"]["finished_at"] is not None
    status, again = call(api, "DELETE", path_of("later"))
    assert (status, again["status"]) == (409, "cancelled") and again["error"].startswith(
        "cancelled:"
    )
    with engine.begin() as connection:  # claimed, its lease live
        connection.execute(
            update(jobs).where(jobs.c.idempotency_key == "running").values(
                status="running", claimed_by="c", lease_until=utcnow() + timedelta(minutes=5))
        )  # fmt: skip
    status, running = call(api, "DELETE", path_of("running"))
    assert (status, running["outcome"], running["job"]["status"]) == (
        202, "cancel-requested", "running")  # fmt: skip
    assert running["job"]["cancel_requested"] is True
    set_status(engine, "done", "done")
    assert call(api, "DELETE", path_of("done"))[1]["status"] == "done"
    assert call(api, "DELETE", path_of("nobody"))[0] == 404


def test_retry_runs_a_dead_or_cancelled_job_again_and_refuses_others(
    api: FlaskClient, engine: Engine
) -> None:
    for key in ("dead", "cancelled", "pending"):
        call(api, "POST", "/jobs", {"kind": "email", "payload": EMAIL, "key": key, "run_at": LATER})
    set_status(engine, "dead", "dead")
    call(api, "DELETE", path_of("cancelled"))
    for key in ("dead", "cancelled"):
        status, answer = call(api, "POST", path_of(key, retry=True))
        assert (status, answer["outcome"], answer["job"]["status"]) == (200, "retried", "pending")
        assert answer["job"]["finished_at"] is None
    status, refused = call(api, "POST", path_of("pending", retry=True))
    assert (status, refused["status"]) == (409, "pending")
    assert call(api, "POST", path_of("nobody", retry=True))[0] == 404


BAD = [
    ({"kind": "no-such-kind"}, 400, "unknown job kind 'no-such-kind'"),
    ({"payload": {}}, 400, "'kind' is required"),
    ({"kind": "email", "payload": [1]}, 400, "'payload' must be a JSON object, not array"),
    ({"kind": "email", "payload": "x"}, 400, "'payload' must be a JSON object, not string"),
    ({"kind": "email", "payload": {"text": "x" * 70_000}}, 413, "over the 65536-byte limit"),
    ({"kind": "email", "run_at": "tomorrow"}, 400, "'run_at' is not an RFC 3339 time"),
    ({"kind": "email", "run_at": "2030-01-01T09:00:00"}, 400, "has no time zone"),
    ({"kind": "email", "key": "k" * 201}, 400, "'key' is longer than 200 characters"),
    ({"kind": "email", "key": ""}, 400, "'key' must be a non-empty string"),
    ({"kind": "email", "key": "a/b"}, 400, "'key' must not contain '/'"),
    ({"kind": "email", "key": "a\x00b"}, 400, "contains a NUL"),
    ({"kind": "email", "priority": "5"}, 400, "'priority' must be a whole number, not string"),
    ({"kind": "email", "priority": True}, 400, "'priority' must be a whole number, not boolean"),
    ({"kind": "email", "priority": 2**31}, 400, "'priority' must be in"),
    ({"kind": "email", "max_attempts": 0}, 400, "'max_attempts' must be in 1.."),
    ({"kind": "email", "max_attempts": 1.5}, 400, "'max_attempts' must be a whole number"),
    ({"kind": "email", "runAt": LATER}, 400, "unknown field(s) runAt"),
    (b'{"kind": "email",', 400, "the body is not valid JSON"),
    (b'{"kind": NaN}', 400, "the body is not valid JSON"),
    (b"[]", 400, "the body must be a JSON object, not array"),
    (b"", 400, "empty body"),
]


@pytest.mark.parametrize(("body", "status", "error"), BAD, ids=[e for _, _, e in BAD])
def test_bad_input_is_a_clear_4xx_and_stores_nothing(
    api: FlaskClient, engine: Engine, body: object, status: int, error: str
) -> None:
    answered, answer = call(api, "POST", "/jobs", body)
    assert (answered, answer["outcome"]) == (status, "rejected")
    assert error in answer["error"]
    assert count(engine) == 0


def test_unsigned_forged_stale_and_replayed_requests_are_refused(
    api: FlaskClient, engine: Engine
) -> None:
    body = {"kind": "email", "payload": EMAIL, "key": "k"}
    assert api.post("/jobs", json=body).status_code == 401
    status, answer = call(api, "POST", "/jobs", body, secret=OTHER_SECRET)
    assert (status, answer["error"]) == (401, "signature does not match")
    stale = call(api, "POST", "/jobs", body, at=utcnow().timestamp() - 301)
    assert stale == (401, {"outcome": "rejected", "key": "", "error":
                           "timestamp is outside the allowed tolerance"})  # fmt: skip
    assert count(engine) == 0
    call(api, "POST", "/jobs", body)
    # A signature made for one key, sent for another (or as another operation): refused.
    signed_for_k = headers_for("DELETE", path_of("k"), b"")
    assert api.delete(path_of("other"), headers=signed_for_k).status_code == 401
    assert api.post(path_of("k", retry=True), headers=signed_for_k).status_code == 401
    assert api.delete(path_of("k"), headers=signed_for_k).status_code == 200
    doubled = {**headers_for("GET", path_of("k"), b""), "Authorization": "Bearer a, Bearer b"}
    assert api.get(path_of("k"), headers=doubled).status_code == 400


def test_outside_local_mode_without_credentials_every_request_is_refused(
    database_url: str, engine: Engine
) -> None:
    settings = Settings(database_url=database_url).with_values(push_token="push-token-0123456789")
    client = create_app(Service.of(settings, engine)).test_client()
    for method, path in (("POST", "/jobs"), ("GET", "/jobs/k"), ("DELETE", "/jobs/k"),
                         ("POST", "/jobs/k/retry")):  # fmt: skip
        status, answer = call(client, method, path, {"kind": "email"} if path == "/jobs" else None)
        assert status == 401 and answer["error"].startswith("job API is disabled")
    assert count(engine) == 0


def test_local_mode_without_credentials_lets_every_caller_in(
    database_url: str, engine: Engine
) -> None:
    client = create_app(Service.of(Settings(database_url=database_url, local_mode=True), engine))
    response = client.test_client().post("/jobs", json={"kind": "email", "key": "local"})
    assert response.status_code == 201 and count(engine) == 1


JOB_AUDIENCE = "https://consumer.example.com/jobs"
CALLER = "orders@project.iam.gserviceaccount.com"


def test_an_oidc_token_of_the_job_api_s_own_audience_and_account_is_let_in(
    database_url: str, engine: Engine, google_key: SigningKey, certs_server: CertsServer
) -> None:
    settings = Settings(database_url=database_url).with_values(
        push_audience=AUDIENCE, push_service_accounts=(ACCOUNT,), oidc_certs_url=certs_server.url,
        job_api_audience=JOB_AUDIENCE, job_api_service_accounts=(CALLER,),
    )  # fmt: skip
    client = create_app(Service.of(settings, engine)).test_client()

    def post(**token: object) -> int:
        bearer = {"Authorization": f"Bearer {google_key.sign(claims(**token))}"}
        return client.post("/jobs", json={"kind": "email", "key": "o"}, headers=bearer).status_code

    assert post() == 401  # Pub/Sub's push token: another audience
    assert post(aud=JOB_AUDIENCE, email="mallory@evil.example") == 403
    assert count(engine) == 0
    assert post(aud=JOB_AUDIENCE, email=CALLER) == 201
    status, answer = call(client, "GET", "/jobs/o")  # HMAC is not configured here
    assert status == 401 and "signed requests to the job API are not enabled" in answer["error"]
