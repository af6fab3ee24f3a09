"""The image as its Dockerfile describes it (it is linted and read here, not built: base images
cannot be pulled on these machines), and the lint gate that CI runs on it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy_artifacts.artifacts import (
    DOCKERFILE,
    ROOT,
    Doc,
    config_env,
    dockerfile,
    final_stage,
    find,
    image_command,
    one,
    pod_spec,
)

PINNED_BASE = re.compile(r"^python:\$\{PYTHON_VERSION\}-(slim-)?[a-z]+ AS \w+$")
COMPILERS = ("gcc", "g++", "clang", "build-essential", "make ")


def _args(keyword: str, stage: bool = True) -> list[str]:
    instructions = final_stage(dockerfile()) if stage else dockerfile()
    return [args for key, args in instructions if key == keyword]


def test_multi_stage_on_a_pinned_python() -> None:
    bases = _args("FROM", stage=False)
    assert len(bases) >= 2
    assert all(PINNED_BASE.match(base) for base in bases), bases
    (version,) = [a for a in _args("ARG", stage=False) if a.startswith("PYTHON_VERSION=")]
    pinned = version.split("=", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "pin a full x.y.z version"
    assert pinned.rsplit(".", 1)[0] == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_final_stage_is_slim_and_installs_no_build_tools() -> None:
    (base,) = _args("FROM")
    assert "-slim-" in base
    for command in _args("RUN"):
        assert "apt-get install" not in command and "apk add" not in command, command
        assert not any(tool in command for tool in COMPILERS), command
    copies = _args("COPY")
    assert copies and all(c.startswith("--from=build /opt/venv") for c in copies), copies


def test_runs_as_the_non_root_user_the_manifests_expect(docs: list[Doc]) -> None:
    user = _args("USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root user lets runAsNonRoot verify it"
    for workload in (*find(docs, "Deployment"), one(docs, "Job")):
        context = pod_spec(workload)["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid or uid))


def test_entrypoint_is_gunicorn_configured_from_the_settings() -> None:
    command = image_command(dockerfile())
    assert command == [
        "gunicorn",
        "--config",
        "python:consumer.http.gunicorn_conf",
        "consumer.http.wsgi:asgi()",  # gunicorn's asyncio worker (consumer.http.worker) serves it
    ]
    assert not any(word in " ".join(command) for word in ("upgrade", "alembic", "migrate"))


def test_exposed_port_is_the_bound_and_declared_one(docs: list[Doc]) -> None:
    (exposed,) = _args("EXPOSE")
    web = pod_spec(one(docs, "Deployment", "consumer"))
    port = web["containers"][0]["ports"][0]["containerPort"]
    assert int(exposed) == port
    assert config_env(docs)["CONSUMER_BIND"] == f"0.0.0.0:{port}"


def test_dockerignore_admits_only_what_the_build_copies() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "an allow-list: nothing enters the build context by accident"
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set()
    for args in _args("COPY", stage=False):
        if not args.startswith("--from"):
            copied |= {source.rstrip("/").removeprefix("./") for source in args.split()[:-1]}
    assert copied == admitted


def lint(**paths: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **paths}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(ROOT / "scripts" / "lint-deploy")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lint_gate_passes_on_the_committed_artefacts() -> None:
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_gate_fails_on_a_dockerfile_warning(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    text = DOCKERFILE.read_text()
    assert "WORKDIR /src" in text
    broken.write_text(text.replace("WORKDIR /src", "RUN mkdir /src && cd /src"))
    result = lint(DOCKERFILE=str(broken))
    assert result.returncode != 0
    assert "DL3003" in result.stdout, result.stdout


def test_lint_gate_fails_on_unformatted_terraform(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text('variable "x" {\ndefault="y"\n}\n')
    result = lint(TERRAFORM_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "main.tf" in result.stdout + result.stderr


@pytest.mark.parametrize("overlay_name", ["dev", "prod"])
def test_gunicorn_in_the_container_takes_its_timeouts_from_the_configmap(overlay_name: str) -> None:
    from tests.deploy_artifacts.conftest import rendered_overlay
    from tests.deploy_artifacts.timing import container_gunicorn

    docs = rendered_overlay(overlay_name)
    settings = container_gunicorn(docs)
    ack = int(config_env(docs)["CONSUMER_ACK_DEADLINE_SECONDS"])
    assert (settings["timeout"], settings["graceful_timeout"]) == (ack, ack)
    assert settings["bind"] == [config_env(docs)["CONSUMER_BIND"]]
    assert settings["worker_tmp_dir"] == "/dev/shm" and settings["control_socket_disable"] is True


@pytest.mark.slow
def test_the_build_context_installs_every_package_file(tmp_path: Path) -> None:
    """The build stage's install (an isolated build, as in the image) from exactly the files
    .dockerignore admits: a data file missing from package-data (a migration, openapi.yaml)
    would be missing in the image."""
    import shutil
    import zipfile

    context = tmp_path / "context"
    context.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, context / name)
    shutil.copytree(
        ROOT / "consumer", context / "consumer", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = tmp_path / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(wheels), str(context)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("consumer-*.whl")
    packaged = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        str(path.relative_to(context))
        for path in (context / "consumer").rglob("*")
        if path.is_file() and path.suffix in {".py", ".yaml", ".mako", ".json", ".sql"}
    }
    assert sources - packaged == set()
