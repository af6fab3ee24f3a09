"""Settings come from CONSUMER_* variables and are validated at start with clear messages."""

from __future__ import annotations

import pytest

from consumer.config.parse import names, periods
from consumer.config.settings import Settings, builtin_catalog
from consumer.errors import SettingsError
from consumer.wire.schedule import Every


def test_defaults_need_an_explicit_choice_of_authentication() -> None:
    with pytest.raises(SettingsError, match="push authentication is not configured"):
        Settings.from_env({})
    assert Settings.from_env({"CONSUMER_LOCAL_MODE": "true"}).local_mode is True


def test_values_are_converted() -> None:
    settings = Settings.from_env(
        {
            "CONSUMER_PUSH_TOKEN": "a-long-enough-shared-token",
            "CONSUMER_SMTP_HOST": "smtp.example.com",
            "CONSUMER_SOURCES": "consumer-push=tick",
            "CONSUMER_ACK_DEADLINE_SECONDS": "120",
            "CONSUMER_PLUGINS": "a.b, c.d",
            "CONSUMER_TICK_PERIODS": "sweep=60, cleanup=3600",
            "PATH": "/usr/bin",  # not ours: ignored
        }
    )
    assert settings.inbox.ack_deadline_seconds == 120
    assert settings.plugins == ("a.b", "c.d")
    assert settings.ticks.periods == {"sweep": Every(60), "cleanup": Every(3600)}
    assert settings.handler_budget_seconds == 110
    assert settings.lease_seconds == settings.inbox.lease_seconds == 4  # renewed every second


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONSUMER_ACK_DEADLINE_SECONDS": "soon"}, "expected a whole number"),
        ({"CONSUMER_LOCAL_MODE": "maybe"}, "expected true or false"),
        ({"CONSUMER_TICK_PERIODS": "sweep"}, "task=seconds"),
        ({"CONSUMER_NO_SUCH_THING": "1"}, "unknown setting"),
        ({"CONSUMER_ACK_DEADLINE_SECONDS": "5"}, "10..600"),
        ({"CONSUMER_SAFETY_MARGIN_SECONDS": "60"}, "below the ack deadline"),
        ({"CONSUMER_DATABASE_URL": "mysql://x"}, "sqlite:// or postgresql://"),
        ({"CONSUMER_PUSH_TOKEN": "short"}, "at least 16 characters"),
    ],
)
def test_bad_values_are_reported_by_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as raised:
        Settings.from_env({"CONSUMER_LOCAL_MODE": "true", **env})
    assert next(iter(env)) in str(raised.value) or "CONSUMER_" in str(raised.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"CONSUMER_WORKERS": "x", "CONSUMER_MAX_ATTEMPTS": "y"})
    assert "CONSUMER_WORKERS" in str(raised.value) and "CONSUMER_MAX_ATTEMPTS" in str(raised.value)


def test_secrets_stay_out_of_the_printed_settings() -> None:
    settings = Settings.of(
        local_mode=True,
        push_token="token-that-must-not-leak",
        deploy_hook_secrets=("hook-secret-that-must-not-leak",),
        smtp_password="password-that-must-not-leak",
    )
    assert "must-not-leak" not in repr(settings)


# Every variable operators may have set before the settings were split into sections.
VARIABLES = """ACK_DEADLINE_SECONDS BIND BODY_TIMEOUT_SECONDS CONTINUATION_FANOUT CONTINUATION_TOPIC
DASHBOARD_BIND DASHBOARD_IAP_AUDIENCE DASHBOARD_IAP_KEYS_URL DASHBOARD_TOKEN DATABASE_URL
DEPLOY_HOOK_SECRETS DEPLOY_HOOK_TOLERANCE_SECONDS HEADER_TIMEOUT_SECONDS HTTP_TARGETS
INBOX_RETENTION_SECONDS
JOB_HELD_LEASE_SECONDS JOB_LEASE_SECONDS JOB_MAX_ATTEMPTS JOB_MAX_SECONDS JOB_RETENTION_SECONDS
JOB_RETRY_BASE_SECONDS
JOB_RETRY_MAX_SECONDS LOCAL_MODE LOCAL_TICK_SECONDS LOG_FORMAT LOG_LEVEL MAILDIR_PATH MAIL_FROM
MAX_ATTEMPTS MAX_ATTRIBUTES MAX_BODY_BYTES MAX_JSON_DEPTH MAX_JSON_NODES OIDC_CERTS_URL
OIDC_CLOCK_SKEW_SECONDS PLUGINS PROJECT_ID PUSH_AUDIENCE PUSH_SERVICE_ACCOUNTS PUSH_TOKEN
SAFETY_MARGIN_SECONDS SEND_TO SMTP_HOST SMTP_PASSWORD SMTP_PORT SMTP_SECURITY
SMTP_TIMEOUT_SECONDS SMTP_USERNAME STORAGE_RULES SWEEP_BATCH_SIZE THREADS
TICK_FUTURE_TOLERANCE_SECONDS TICK_MAX_AGE_PERIODS TICK_PERIODS WARM_BACKOFF_MS
WARM_CONCURRENCY WARM_HEADERS WARM_MAX_TARGETS WARM_RETRIES WARM_SITEMAP_URL WARM_TARGETS
WARM_TIMEOUT_MS WORKERS
JOB_MAX_PAYLOAD_BYTES WAKE_TOPIC WAKE_URL WAKE_WINDOW_MS""".split()  # noqa: SIM905 (a list literal would be 60 lines)
VARIABLES += ["TICK_HOOK_AUDIENCE", "TICK_HOOK_SECRETS", "TICK_HOOK_SERVICE_ACCOUNTS"]
VARIABLES += ["TICK_HOOK_TOLERANCE_SECONDS"]  # new with POST /ticks: no older name to keep
VARIABLES += ["TRACES_EXPORTER", "TRACES_ENDPOINT", "TRACES_SAMPLE_PERCENT"]  # OpenTelemetry
VARIABLES += ["TRACES_PROJECT"]  # new with the Cloud Trace exporter
VARIABLES += ["TICK_POLICIES"]  # new with the tick tasks' overlap and catch-up policies
VARIABLES += ["INBOX_REDRIVE_AFTER_SECONDS"]  # new with the re-drive of rows nobody redelivered
VARIABLES += ["SWEEP_FLUSH_MS", "INBOX_LEASE_SECONDS"]  # new with the one-effect crash bound
VARIABLES += ["JOB_LIMITS"]  # new with flow control (docs/flow-control.md)
VARIABLES += ["SOURCES", "SIGNING_SECRETS", "PRODUCER_MAX_DELAY_SECONDS"]  # docs/sources.md
VARIABLES += ["JOB_API_AUDIENCE", "JOB_API_SERVICE_ACCOUNTS", "JOB_API_SECRETS"]  # job-api.md
VARIABLES += ["JOB_API_TOLERANCE_SECONDS"]
VARIABLES += [  # new with the bounds on every database wait
    "DATABASE_STATEMENT_TIMEOUT_SECONDS", "DATABASE_LOCK_TIMEOUT_SECONDS",
    "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", "DATABASE_POOL_TIMEOUT_SECONDS",
    "DATABASE_LEASE_JOIN_SECONDS",
]  # fmt: skip


def test_the_sections_read_exactly_the_variables_operators_have_always_set() -> None:
    assert set(builtin_catalog()) == {f"CONSUMER_{name}" for name in VARIABLES}


def test_each_variable_lands_in_its_section() -> None:
    settings = Settings.from_env(
        {
            "CONSUMER_LOCAL_MODE": "true",
            "CONSUMER_SMTP_HOST": "smtp.example.com",
            "CONSUMER_MAIL_FROM": "ops@example.com",
            "CONSUMER_SWEEP_BATCH_SIZE": "7",
            "CONSUMER_JOB_LEASE_SECONDS": "20",
            "CONSUMER_INBOX_RETENTION_SECONDS": "3600",
            "CONSUMER_WARM_TARGETS": "https://a.example/,https://b.example/",
            "CONSUMER_DASHBOARD_BIND": "127.0.0.1:9000",
            "CONSUMER_PROJECT_ID": "acme",
        }
    )
    assert (settings.smtp.host, settings.smtp.mail_from) == ("smtp.example.com", "ops@example.com")
    assert (settings.jobs.sweep_batch_size, settings.jobs.lease_seconds) == (7, 20)
    assert settings.inbox.retention_seconds == 3600 and settings.logging.project_id == "acme"
    assert settings.warming.targets == ("https://a.example/", "https://b.example/")
    assert settings.dashboard.bind == "127.0.0.1:9000" and settings.server.bind == "127.0.0.1:8080"


def test_tests_and_tools_set_values_by_their_variable_names() -> None:
    settings = Settings.of(local_mode=True, smtp_host="smtp.example.com", job_lease_seconds=3)
    assert (settings.smtp.host, settings.jobs.lease_seconds, settings.local_mode) == (
        "smtp.example.com", 3, True)  # fmt: skip
    changed = settings.with_values(job_lease_seconds=4, storage_rules="[]")
    assert (changed.jobs.lease_seconds, changed.storage.rules, changed.smtp.host) == (
        4, "[]", "smtp.example.com")  # fmt: skip
    assert settings.jobs.lease_seconds == 3 and changed.value("send_to") == ""
    with pytest.raises(TypeError, match="no setting named 'smtp_hots'"):
        settings.with_values(smtp_hots="x")


def test_a_converter_belongs_to_its_field_not_to_a_type_name() -> None:
    for _variable, (_owner, spec) in builtin_catalog().items():
        assert callable(spec.metadata["convert"]), spec.name
    assert builtin_catalog()["CONSUMER_PUSH_SERVICE_ACCOUNTS"][1].metadata["convert"] is names
    assert builtin_catalog()["CONSUMER_TICK_PERIODS"][1].metadata["convert"] is periods
