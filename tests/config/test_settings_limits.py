"""Every number has a range, every URL is parsed for real, and no secret shows in a repr or an
error: the settings refuse what would otherwise fail later, far from its cause."""

from __future__ import annotations

import pytest

from consumer.config.parse import whole
from consumer.config.settings import Settings, builtin_catalog
from consumer.errors import SettingsError

RANGES = {
    name: s.metadata["within"] for name, (_, s) in builtin_catalog().items() if s.metadata["within"]
}

BASE = {"CONSUMER_LOCAL_MODE": "true"}


def refusal(**env: str) -> str:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({**BASE, **env})
    return str(refused.value)


def test_every_whole_number_setting_has_a_range() -> None:
    numbers = {
        name for name, (_, spec) in builtin_catalog().items() if spec.metadata["convert"] is whole
    }
    # new: TRACES_SAMPLE_PERCENT, INBOX_LEASE_SECONDS, SWEEP_FLUSH_MS, INBOX_REDRIVE_AFTER_SECONDS,
    # PRODUCER_MAX_DELAY_SECONDS, the 5 DATABASE_ waits, JOB_API_TOLERANCE_SECONDS,
    # JOB_HELD_LEASE_SECONDS
    assert numbers == set(RANGES) and len(RANGES) == 46


@pytest.mark.parametrize("name", sorted(RANGES))
def test_values_just_outside_the_range_are_refused_by_name(name: str) -> None:
    low, high = RANGES[name]
    for value in (low - 1, high + 1, 10**20):
        assert f"{name} must be {low}..{high}" in refusal(**{name: str(value)}), value


@pytest.mark.parametrize("name", sorted(RANGES))
def test_the_range_ends_are_accepted_where_the_other_rules_allow(name: str) -> None:
    low, high = RANGES[name]
    for value in (low, high):
        try:
            Settings.from_env({**BASE, name: str(value)})
        except SettingsError as error:  # a cross-field rule (e.g. margin < deadline) may apply
            assert f"{name} must be {low}..{high}" not in str(error)


@pytest.mark.parametrize("period", ["99999999999999999999", "0", "31622401"])
def test_tick_periods_out_of_range_are_refused(period: str) -> None:
    message = refusal(CONSUMER_TICK_PERIODS=f"sweep={period}")
    assert "CONSUMER_TICK_PERIODS" in message and "sweep" in message


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1@evil.example/certs",
        "http://localhost@evil.example/certs",
        "http://user:pw@127.0.0.1:8080/certs",
        "http://evil.example/certs",
        "http://127.0.0.1.evil.example/certs",
        "http://[::1]:99999/certs",
        "ftp://127.0.0.1/certs",
        "https:///certs",
        "http://[::1/certs",
    ],
)
def test_plain_http_certs_only_to_a_real_loopback_host(url: str) -> None:
    assert "CONSUMER_OIDC_CERTS_URL" in refusal(CONSUMER_OIDC_CERTS_URL=url)


@pytest.mark.parametrize(
    "url",
    [
        "https://www.googleapis.com/oauth2/v1/certs",
        "http://127.0.0.1:8080/certs",
        "http://127.8.9.10/certs",
        "http://[::1]:8080/certs",
        "http://localhost:9000/certs",
    ],
)
def test_loopback_and_https_certs_urls_are_accepted(url: str) -> None:
    assert Settings.from_env({**BASE, "CONSUMER_OIDC_CERTS_URL": url}).auth.oidc_certs_url == url


@pytest.mark.parametrize(
    "bind", ["0.0.0.0:99999", "127.0.0.1", "127.0.0.1:0", "a@b:80", "[::1", "x:80/path"]
)
def test_bind_needs_host_and_a_real_port(bind: str) -> None:
    assert "CONSUMER_BIND" in refusal(CONSUMER_BIND=bind)


@pytest.mark.parametrize("bind", ["0.0.0.0:8080", "[::1]:8080", "localhost:1"])
def test_good_binds_are_accepted(bind: str) -> None:
    assert Settings.from_env({**BASE, "CONSUMER_BIND": bind}).server.bind == bind


@pytest.mark.parametrize("target", ["https://ok.test:70000/", "http://u:p@ok.test/", "//x"])
def test_warm_targets_are_parsed(target: str) -> None:
    assert "CONSUMER_WARM_TARGETS" in refusal(CONSUMER_WARM_TARGETS=target)


SECRETS = {
    "CONSUMER_DATABASE_URL": "postgresql+psycopg://app:db-pass-7f3a9@db.internal/app",
    "CONSUMER_PUSH_TOKEN": "push-token-5be1c0ffee",
    "CONSUMER_SMTP_PASSWORD": "smtp-pass-a1b2c3d4",
    "CONSUMER_DEPLOY_HOOK_SECRETS": "hook-secret-0123456789",
    "CONSUMER_WARM_HEADERS": '{"Authorization": "Bearer warm-header-9z8y7x6w"}',
    "CONSUMER_DASHBOARD_TOKEN": "dashboard-token-31415926",
    "CONSUMER_SMTP_HOST": "smtp.example.com",
    "CONSUMER_SOURCES": "consumer-push=tick",
}
SECRET_VALUES = ("db-pass-7f3a9", "push-token-5be1c0ffee", "smtp-pass-a1b2c3d4",
                 "hook-secret-0123456789", "warm-header-9z8y7x6w",
                 "dashboard-token-31415926")  # fmt: skip


def test_repr_and_str_show_no_secret() -> None:
    settings = Settings.from_env(SECRETS)
    for text in (repr(settings), str(settings)):
        assert not [secret for secret in SECRET_VALUES if secret in text], text
    assert "db.internal" in repr(settings)  # the rest of the URL is still useful


def test_settings_errors_quote_no_secret() -> None:
    """Each secret next to an invalid setting (and a bad URL around a password)."""
    broken = {**SECRETS, "CONSUMER_WORKERS": "0", "CONSUMER_WARM_HEADERS": '{"A B": "warm-x"}'}
    broken["CONSUMER_DATABASE_URL"] = "mysql://app:db-pass-7f3a9@db.internal/app"
    message = refusal(**broken)
    assert "CONSUMER_DATABASE_URL" in message and "CONSUMER_WARM_HEADERS" in message
    assert not [secret for secret in (*SECRET_VALUES, "warm-x") if secret in message]
