"""The command line's error boundary and the newcomer findings: each mistake ends in one clear
line and a non-zero exit, never a traceback, and never a stray empty database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from consumer.cli.main import main
from consumer.db.migrate import upgrade

CLEAN = {k: None for k in os.environ if k.startswith(("CONSUMER_", "DEPLOY_HOOK_"))}


def invoke(*args: str, **env: str) -> Result:
    return CliRunner(env={**CLEAN, **env}).invoke(main, list(args))


def fails_cleanly(result: Result, *expected: str, code: int = 1) -> str:
    """Exit ``code``, no exception escaped click, the output has every ``expected`` part."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for part in expected:
        assert part in result.output, result.output
    return result.output


def test_inbox_list_refuses_an_unknown_status(sqlite_url: str) -> None:
    result = invoke("inbox", "list", "--status", "bogus", CONSUMER_DATABASE_URL=sqlite_url)
    fails_cleanly(result, "'bogus' is not one of 'running'", code=2)


def test_jobs_retry_without_an_argument_says_what_to_give(sqlite_url: str) -> None:
    output = fails_cleanly(invoke("jobs", "retry", CONSUMER_DATABASE_URL=sqlite_url), code=2)
    assert "give a job ID or --dead (every dead job)" in output and "not both" not in output
    both = invoke("jobs", "retry", "1", "--dead", CONSUMER_DATABASE_URL=sqlite_url)
    fails_cleanly(both, "not both", code=2)


@pytest.mark.parametrize(
    "args", [("jobs", "list", "--limit", "-1"), ("inbox", "list", "--limit", "0")]
)
def test_limits_are_range_checked(sqlite_url: str, args: tuple[str, ...]) -> None:
    fails_cleanly(invoke(*args, CONSUMER_DATABASE_URL=sqlite_url), "x>=1", code=2)


@pytest.mark.parametrize(
    "args", [("jobs", "list"), ("inbox", "list"), ("files", "list"), ("deploy", "runs")]
)
def test_the_default_sqlite_file_is_not_created_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    fails_cleanly(result, "no database at", "relative to the working directory", code=2)
    assert "consumer db upgrade" in result.output
    assert not (tmp_path / "consumer.db").exists()


def test_an_unmigrated_database_suggests_db_upgrade(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for args in (("jobs", "list"), ("inbox", "list"), ("inbox", "show", "k")):
        result = invoke(*args, CONSUMER_DATABASE_URL=f"sqlite:///{empty}")
        fails_cleanly(
            result, "is not migrated", "no such table", "run `consumer db upgrade`", code=2
        )


def test_db_upgrade_then_check(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    fails_cleanly(invoke("db", "check", CONSUMER_DATABASE_URL=url), "no database at", code=2)
    assert invoke("db", "upgrade", CONSUMER_DATABASE_URL=url).exit_code == 0
    checked = invoke("db", "check", CONSUMER_DATABASE_URL=url)
    assert checked.exit_code == 0 and "matches the models" in checked.output


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+nosuch://u@127.0.0.1/x", "no such database driver"),
        ("postgresql+psycopg2://u@127.0.0.1/x", "no such database driver"),
        ("postgresql+psycopg://u:secret@127.0.0.1:1/x", "Connection refused"),
        ("postgresql+psycopg://u@host.invalid/x", "failed to resolve host"),
    ],
)
def test_unusable_databases_are_one_line(url: str, expected: str) -> None:
    output = fails_cleanly(invoke("jobs", "list", CONSUMER_DATABASE_URL=url), expected, code=2)
    assert "secret" not in output and len(output.strip().splitlines()) == 1


@pytest.mark.postgres
def test_a_missing_postgres_database_is_one_line(postgres_admin: str) -> None:
    base = postgres_admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    result = invoke("jobs", "list", CONSUMER_DATABASE_URL=f"{base}/no_such_db_here")
    fails_cleanly(
        result, 'database "no_such_db_here" does not exist', "consumer db upgrade", code=2
    )


@pytest.mark.postgres
def test_an_out_of_range_priority_is_refused_before_sql(postgres_url: str) -> None:
    args = ("jobs", "enqueue", "email", "--priority", "99999999999")
    output = fails_cleanly(invoke(*args, CONSUMER_DATABASE_URL=postgres_url), code=2)
    assert "priority must be -2147483648..2147483647" in output and "INSERT" not in output


def test_a_bad_plugin_is_one_line(sqlite_url: str) -> None:
    for args in (("files", "rules"), ("sweep", "--once"), ("inbox", "replay", "k")):
        result = invoke(*args, CONSUMER_DATABASE_URL=sqlite_url, CONSUMER_PLUGINS="no.such.mod")
        fails_cleanly(result, "CONSUMER_PLUGINS: cannot import 'no.such.mod'", code=2)


def test_files_rules_fails_on_an_unregistered_processor(sqlite_url: str) -> None:
    rules = '[{"processor": "import-jobs"}, {"processor": "nope"}]'
    result = invoke(
        "files", "rules", CONSUMER_DATABASE_URL=sqlite_url, CONSUMER_STORAGE_RULES=rules
    )
    fails_cleanly(result, "NOT REGISTERED", "not registered: nope")


def test_pull_without_google_credentials_is_one_line(tmp_path: Path, sqlite_url: str) -> None:
    env = {
        "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "absent.json"),
        "PUBSUB_EMULATOR_HOST": None,
        "CONSUMER_DATABASE_URL": sqlite_url,
        "CONSUMER_SMTP_HOST": "smtp.example.com",  # pull mode runs the email kind
    }
    result = CliRunner(env={**CLEAN, **env}).invoke(main, ["pull", "projects/p/subscriptions/s"])
    fails_cleanly(result, "no Google credentials", code=2)


def test_version_and_help_without_restructured_text_markup() -> None:
    version = invoke("--version")
    assert version.exit_code == 0 and version.output.startswith("consumer, version ")
    for path in command_paths(main):
        result = invoke(*path, "--help")
        assert result.exit_code == 0, path
        assert "``" not in result.output, (path, result.output)


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            paths += command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


@pytest.mark.slow
def test_a_real_process_prints_one_line_and_leaves_no_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    result = subprocess.run(
        [sys.executable, "-m", "consumer", "jobs", "list"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: no database at ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "consumer.db").exists()


def test_readiness_waits_for_the_head_revision(tmp_path: Path) -> None:
    from consumer.config.settings import Settings
    from consumer.db.engine import make_engine
    from consumer.http.app import create_app
    from consumer.service import Service

    url = f"sqlite:///{tmp_path / 'ready.db'}"
    engine = make_engine(url)
    client = create_app(
        Service.of(Settings(database_url=url, local_mode=True), engine)
    ).test_client()
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503 and "consumer db upgrade" in not_ready.json["error"]
    upgrade(url)
    assert client.get("/readyz").status_code == 200
    with engine.begin() as connection:  # once at head, readiness no longer reads the revision
        connection.exec_driver_sql("DROP TABLE alembic_version")
    assert client.get("/readyz").status_code == 200
    engine.dispose()


def test_readiness_reports_a_database_behind_the_code(tmp_path: Path) -> None:
    from consumer.config.settings import Settings
    from consumer.db.engine import make_engine
    from consumer.http.app import create_app
    from consumer.service import Service

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0001_inbox")
    engine = make_engine(url)
    client = create_app(
        Service.of(Settings(database_url=url, local_mode=True), engine)
    ).test_client()
    assert client.get("/readyz").status_code == 503
    engine.dispose()


@pytest.mark.parametrize(
    "fields",
    [{"priority": 1 << 31}, {"priority": -(1 << 31) - 1}, {"max_attempts": 1 << 31}],
)
def test_new_job_range_checks_its_32_bit_columns(fields: dict[str, int]) -> None:
    """The same check for every path in (the CLI, imports, code), on either database."""
    from consumer.jobs.model import InvalidJob, NewJob

    with pytest.raises(InvalidJob, match=r"must be .*2147483647"):
        NewJob("email", {}, **fields)  # type: ignore[arg-type]
    NewJob("email", {}, priority=(1 << 31) - 1, max_attempts=(1 << 31) - 1)
