"""The deploy and warmer settings: read from CONSUMER_* variables, refused when unusable."""

from __future__ import annotations

import pytest

from consumer.config.settings import Settings
from consumer.deploy.http_fetch import HttpPolicy
from consumer.errors import SettingsError

BASE = {"CONSUMER_LOCAL_MODE": "true"}


def test_the_variables_are_read() -> None:
    settings = Settings.from_env(
        {
            **BASE,
            "CONSUMER_DEPLOY_HOOK_SECRETS": "new-secret-0123456789, old-secret-0123456789",
            "CONSUMER_DEPLOY_HOOK_TOLERANCE_SECONDS": "120",
            "CONSUMER_WARM_TARGETS": "https://example.test/,https://example.test/pricing",
            "CONSUMER_WARM_SITEMAP_URL": "https://example.test/sitemap.xml",
            "CONSUMER_WARM_CONCURRENCY": "16",
            "CONSUMER_WARM_TIMEOUT_MS": "2500",
            "CONSUMER_WARM_RETRIES": "3",
            "CONSUMER_WARM_BACKOFF_MS": "100",
            "CONSUMER_WARM_HEADERS": '{"Authorization": "Bearer x, y", "X-Warm": "1"}',
        }
    )
    assert settings.deploy_hook.secrets == ("new-secret-0123456789", "old-secret-0123456789")
    assert settings.warming.targets == ("https://example.test/", "https://example.test/pricing")
    policy = HttpPolicy.from_settings(settings)
    assert (policy.timeout_seconds, policy.retries, policy.backoff_seconds) == (2.5, 3, 0.1)
    assert policy.concurrency == 16 and policy.headers["Authorization"] == "Bearer x, y"
    assert policy.headers["User-Agent"].startswith("consumer-cache-warmer")


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("CONSUMER_DEPLOY_HOOK_SECRETS", "short", "at least 16 characters"),
        ("CONSUMER_DEPLOY_HOOK_TOLERANCE_SECONDS", "0", "TOLERANCE_SECONDS must be 1..86400"),
        ("CONSUMER_WARM_TARGETS", "https://ok.test/,ftp://files.test/", "http(s) URL"),
        ("CONSUMER_WARM_SITEMAP_URL", "sitemap.xml", "http(s) URL"),
        ("CONSUMER_WARM_CONCURRENCY", "0", "WARM_CONCURRENCY must be 1..256"),
        ("CONSUMER_WARM_CONCURRENCY", "1000", "WARM_CONCURRENCY must be 1..256"),
        ("CONSUMER_WARM_TIMEOUT_MS", "0", "WARM_TIMEOUT_MS must be 1..600000"),
        ("CONSUMER_WARM_RETRIES", "-1", "WARM_RETRIES must be 0..10"),
        ("CONSUMER_WARM_BACKOFF_MS", "-5", "WARM_BACKOFF_MS must be 0..600000"),
        ("CONSUMER_WARM_MAX_TARGETS", "0", "WARM_MAX_TARGETS must be 1..1000000"),
        ("CONSUMER_WARM_HEADERS", "Authorization: x", "WARM_HEADERS: is not JSON"),
        ("CONSUMER_WARM_HEADERS", '{"X-Count": 3}', "JSON object"),
        ("CONSUMER_WARM_HEADERS", '["X-A"]', "JSON object"),
        ("CONSUMER_WARM_HEADERS", '{"X:A": "1"}', "not a valid field name"),
        ("CONSUMER_WARM_HEADERS", '{"X-A": "1\\u0000"}', "line break or NUL"),
        ("CONSUMER_WARM_HEADERS", '{"X-A": "1\\r\\nX-Injected: 1"}', "line break"),
    ],
)
def test_unusable_values_are_refused_at_start(name: str, value: str, fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Settings.from_env({**BASE, name: value})
