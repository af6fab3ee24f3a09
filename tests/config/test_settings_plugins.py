"""A plugin may declare a settings section: its CONSUMER_<PREFIX>* variables are read, converted
and validated with the built-in ones (one error for every problem), and its handlers read the
section from their context. Any other CONSUMER_* variable is still refused."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from consumer.cli.main import main
from consumer.config.fields import setting
from consumer.config.settings import Section, Settings
from consumer.errors import AlreadyRegistered, SettingsError
from consumer.http.app import create_app
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import Service, compose
from consumer.wire.envelopes_out import tick_body
from tests.plugins.billing import BillingSettings

PLUGIN = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_PLUGINS": "tests.plugins.billing"}


def refusal(env: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as refused:
        compose(env)
    return str(refused.value)


def test_a_plugins_variables_are_read_with_its_own_converters() -> None:
    env = {**PLUGIN, "CONSUMER_BILLING_BATCH": "20", "CONSUMER_BILLING_REGIONS": "EU, us,eu"}
    billing = compose(env).settings.section(BillingSettings)
    assert (billing.batch, billing.regions) == (20, frozenset({"eu", "us"}))
    assert billing.api_url == "https://billing.example.com/v1"  # the default


def test_bad_plugin_values_are_reported_with_the_built_in_ones() -> None:
    message = refusal(
        {**PLUGIN, "CONSUMER_BILLING_BATCH": "lots", "CONSUMER_WORKERS": "x", "CONSUMER_NOPE": "1"}
    )
    assert "CONSUMER_BILLING_BATCH: expected a whole number" in message
    assert "CONSUMER_WORKERS" in message and "CONSUMER_NOPE: unknown setting" in message
    ranges = refusal(
        {**PLUGIN, "CONSUMER_BILLING_BATCH": "501", "CONSUMER_BILLING_API_URL": "http://x",
         "CONSUMER_ACK_DEADLINE_SECONDS": "5"}
    )  # fmt: skip
    for part in ("CONSUMER_BILLING_BATCH must be 1..500", "CONSUMER_BILLING_API_URL must be",
                 "CONSUMER_ACK_DEADLINE_SECONDS must be 10..600"):  # fmt: skip
        assert part in ranges


def test_unknown_variables_under_the_prefix_or_without_the_plugin_are_refused() -> None:
    assert "CONSUMER_BILLING_TYPO: unknown setting" in refusal(
        {**PLUGIN, "CONSUMER_BILLING_TYPO": "1"}
    )
    alone = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_BILLING_BATCH": "20"}
    assert "CONSUMER_BILLING_BATCH: unknown setting" in refusal(alone)


def test_a_plugin_secret_stays_out_of_the_printed_settings() -> None:
    settings = compose({**PLUGIN, "CONSUMER_BILLING_API_KEY": "billing-key-must-not-leak"}).settings
    assert settings.section(BillingSettings).api_key == "billing-key-must-not-leak"
    assert "must-not-leak" not in repr(settings) and "BillingSettings(" in repr(settings)


def test_the_handler_reads_its_section_from_the_context(database_url: str, engine: Engine) -> None:
    env = {**PLUGIN, "CONSUMER_DATABASE_URL": database_url, "CONSUMER_BILLING_BATCH": "7"}
    service = compose(env)
    client = create_app(Service(service.settings, service.registry, engine)).test_client()
    response = client.post("/push", json=tick_body("billing"))
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.json is not None
    assert (response.json["batch"], response.json["regions"]) == (7, ["eu"])


def test_settings_built_without_the_section_get_its_defaults_checked() -> None:
    settings = Settings.of(local_mode=True, plugins=("tests.plugins.billing",))
    assert build_registry(settings).tasks["billing"]
    assert settings.section(BillingSettings).batch == 50
    custom = settings.with_values(BillingSettings(batch=3))
    assert custom.section(BillingSettings).batch == 3


def test_the_command_line_loads_the_plugin_before_reading_the_settings(sqlite_url: str) -> None:
    env = {**PLUGIN, "CONSUMER_DATABASE_URL": sqlite_url}
    good = CliRunner().invoke(main, ["inbox", "list"], env={**env, "CONSUMER_BILLING_BATCH": "9"})
    assert good.exit_code == 0, good.output
    bad = CliRunner().invoke(main, ["inbox", "list"], env={**env, "CONSUMER_BILLING_BATCH": "0"})
    assert bad.exit_code == 2 and "CONSUMER_BILLING_BATCH must be 1..500" in bad.output


@dataclass(frozen=True, repr=False)
class Clashing(Section):
    prefix: ClassVar[str] = "SMTP_"
    relay: str = setting("")


@dataclass(frozen=True, repr=False)
class Overlapping(Section):
    prefix: ClassVar[str] = "BILLING_EU_"
    vat: str = setting("")


@dataclass(frozen=True, repr=False)
class Unprefixed(Section):
    prefix: ClassVar[str] = "billing"
    vat: str = setting("")


@pytest.mark.parametrize(
    ("section", "error", "message"),
    [
        (Clashing, SettingsError, "taken by the built-in CONSUMER_SMTP_"),
        (Overlapping, AlreadyRegistered, "overlaps BillingSettings"),
        (Unprefixed, SettingsError, "capitals, digits and _ ending in '_'"),
        (dict, SettingsError, "not a dataclass subclassing"),
    ],
)
def test_a_section_whose_variables_could_be_someone_elses_is_refused(
    section: Any, error: type[Exception], message: str
) -> None:
    registry = Registry()
    registry.settings(BillingSettings)
    with pytest.raises(error, match=message):
        registry.settings(section)


def test_the_documented_plugin_section_works_as_written(tmp_path: Path) -> None:
    """docs/plugins.md's settings example, executed as written."""
    doc = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    blocks = [block.split("```", 1)[0] for block in doc.split("```python\n")[1:]]
    code = next(block for block in blocks if "registry.settings(" in block)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/plugins.md", "exec"), namespace)
    registry = Registry()
    namespace["register"](registry)
    (section,) = registry.setting_sections.values()
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_CRM_API_TOKEN": "0123456789abcdef"}
    assert Settings.from_env(env, sections=[section]).section(section).timeout_seconds == 10
    with pytest.raises(SettingsError, match=r"CONSUMER_CRM_TIMEOUT_SECONDS must be 1\.\.120"):
        Settings.from_env({**env, "CONSUMER_CRM_TIMEOUT_SECONDS": "0"}, sections=[section])


def test_a_plugin_that_fails_to_load_stops_the_composition_before_its_variables_are_read() -> None:
    """Settings load no plugin (they only read what they are handed); the composition root loads
    the plugins first, so a broken one is the fault it names, not the variables it would read."""
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_PLUGINS": "no.such.plugin"}
    assert Settings.from_env(env).plugins == ("no.such.plugin",)
    message = refusal({**env, "CONSUMER_BILLING_BATCH": "20"})
    assert "CONSUMER_PLUGINS: cannot import 'no.such.plugin'" in message
    assert "CONSUMER_BILLING_BATCH" not in message


def test_the_settings_reference_lists_the_configured_plugins_sections() -> None:
    runner = CliRunner()
    plain = runner.invoke(main, ["settings"], env={"CONSUMER_PLUGINS": ""})
    assert plain.exit_code == 0 and "CONSUMER_BILLING_" not in plain.output
    with_plugin = runner.invoke(
        main, ["settings"], env={"CONSUMER_PLUGINS": "tests.plugins.billing"}
    )
    assert with_plugin.exit_code == 0, with_plugin.output
    assert "### plugin BillingSettings (`settings.section(BillingSettings)`" in with_plugin.output
    assert "| `CONSUMER_BILLING_BATCH` |" in with_plugin.output
    broken = runner.invoke(main, ["settings"], env={"CONSUMER_PLUGINS": "no.such.plugin"})
    assert broken.exit_code == 2 and "no.such.plugin" in broken.output
