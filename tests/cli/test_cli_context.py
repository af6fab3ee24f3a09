"""The one context every command shares: each piece built on first use, once; the engine
disposed once, at the end of the command."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner

from consumer.cli.context import CliContext, current_cli, local_url, pass_cli
from consumer.cli.errors import ConsumerGroup
from consumer.config.settings import Settings
from consumer.errors import Permanent


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    for name in [k for k in os.environ if k.startswith("CONSUMER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CONSUMER_DATABASE_URL", sqlite_url)


def test_each_piece_is_built_lazily_and_once() -> None:
    cli = CliContext()
    assert not cli.has_engine and cli.composed is None
    assert cli.settings is cli.settings and cli.engine is cli.engine
    assert cli.composed is cli.service and cli.service.registry is cli.registry
    assert cli.registry is cli.registry and "sweep" in cli.registry.tasks
    cli.close()
    assert not cli.has_engine
    cli.close()  # idempotent


def test_one_context_per_command_closed_when_it_ends() -> None:
    seen: list[CliContext] = []

    @click.group(cls=ConsumerGroup)
    @click.pass_context
    def root(ctx: click.Context) -> None:
        ctx.ensure_object(CliContext)
        ctx.call_on_close(ctx.obj.close)

    @root.command()
    @pass_cli
    def first(cli: CliContext) -> None:
        assert current_cli() is cli  # helpers see the same context as the command
        cli.require_database()
        seen.append(cli)

    @root.command()
    def fails() -> None:
        raise Permanent("the cause\nand a second line nobody needs")

    assert CliRunner().invoke(root, ["first"]).exit_code == 0
    assert len(seen) == 1 and not seen[0].has_engine  # disposed when the command ended
    failed = CliRunner().invoke(root, ["fails"])
    assert failed.exit_code == 1 and failed.output == "Error: the cause\n"


@pytest.mark.parametrize(
    ("bind", "expected"),
    [
        ("127.0.0.1:8080", "http://127.0.0.1:8080/push"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000/push"),
        ("[::]:9001", "http://127.0.0.1:9001/push"),
        ("10.1.2.3:80", "http://10.1.2.3:80/push"),
    ],
)
def test_local_url_follows_the_bind(bind: str, expected: str) -> None:
    assert local_url(Settings.of(bind=bind), "/push", configured="send_to") == expected
    chosen = Settings.of(bind=bind, send_to="http://elsewhere/push")
    assert local_url(chosen, "/push", configured="send_to") == "http://elsewhere/push"
