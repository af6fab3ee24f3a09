"""Settings come from CONSUMER_* variables and are validated at start with clear messages."""

from __future__ import annotations

import pytest

from consumer.errors import SettingsError
from consumer.schedule import Every
from consumer.settings import Settings


def test_defaults_need_an_explicit_choice_of_authentication() -> None:
    with pytest.raises(SettingsError, match="push authentication is not configured"):
        Settings.from_env({})
    assert Settings.from_env({"CONSUMER_LOCAL_MODE": "true"}).local_mode is True


def test_values_are_converted() -> None:
    settings = Settings.from_env(
        {
            "CONSUMER_PUSH_TOKEN": "a-long-enough-shared-token",
            "CONSUMER_SMTP_HOST": "smtp.example.com",
            "CONSUMER_ACK_DEADLINE_SECONDS": "120",
            "CONSUMER_PLUGINS": "a.b, c.d",
            "CONSUMER_TICK_PERIODS": "sweep=60, cleanup=3600",
            "PATH": "/usr/bin",  # not ours: ignored
        }
    )
    assert settings.ack_deadline_seconds == 120
    assert settings.plugins == ("a.b", "c.d")
    assert settings.tick_periods == {"sweep": Every(60), "cleanup": Every(3600)}
    assert settings.handler_budget_seconds == 110
    assert settings.lease_seconds > settings.gunicorn_timeout_seconds


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
    settings = Settings(
        local_mode=True,
        push_token="token-that-must-not-leak",
        deploy_hook_secrets=("hook-secret-that-must-not-leak",),
        smtp_password="password-that-must-not-leak",
    )
    assert "must-not-leak" not in repr(settings)
