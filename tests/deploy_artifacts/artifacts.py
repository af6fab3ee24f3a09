"""Read the deployment artefacts as data: rendered kustomize overlays, the Dockerfile, and the
container's environment. Pure helpers; the tests and the policies work on their results."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = ("dev", "prod")
DOCKERFILE = ROOT / "Dockerfile"
TERRAFORM = ROOT / "triggers" / "terraform"
POD_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
SERVING_KINDS = ("Deployment", "StatefulSet", "DaemonSet")

Doc = dict[str, Any]


def kubectl() -> str | None:
    return shutil.which("kubectl")


def render(path: Path) -> list[Doc]:
    """``kubectl kustomize PATH`` as a list of resources."""
    binary = kubectl()
    if binary is None:
        raise RuntimeError("kubectl is not installed")
    result = subprocess.run(
        [binary, "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {path} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: list[Doc], kind: str, name: str | None = None) -> list[Doc]:
    return [
        doc
        for doc in docs
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name)
    ]


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec(doc: Doc) -> Doc:
    spec: Doc = doc["spec"]["template"]["spec"]
    return spec


def containers(doc: Doc, init: bool = True) -> Iterator[Doc]:
    spec = pod_spec(doc)
    yield from spec.get("containers", [])
    if init:
        yield from spec.get("initContainers", [])


def workloads(docs: list[Doc], kinds: tuple[str, ...] = POD_TEMPLATE_KINDS) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] in kinds]


POD_SECRETS = {"CONSUMER_SIGNING_SECRETS": "from-the-consumer-secrets-secret"}
"""What a pod also gets from the ``consumer-secrets`` Secret, which is never committed: the
overlays publish wake-ups, so they sign them (docs/sources.md)."""


def config_env(docs: list[Doc]) -> dict[str, str]:
    """The data of the service's ConfigMap (generated with a hash suffix)."""
    maps = [m for m in find(docs, "ConfigMap") if m["metadata"]["name"].startswith("consumer-")]
    assert len(maps) == 1, f"expected one consumer ConfigMap, found {len(maps)}"
    return dict(maps[0].get("data", {}))


def prestop_seconds(container: Doc) -> int:
    """The preStop pause, whether a native sleep action or an exec of ``sleep N``."""
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in pre_stop:
        return int(pre_stop["sleep"]["seconds"])
    command = pre_stop.get("exec", {}).get("command", [])
    if command[:1] == ["sleep"] and len(command) == 2:
        return int(command[1])
    return 0


# --- Dockerfile ---------------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical = re.sub(r"\\\n", " ", text)
    pairs = []
    for line in logical.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    return instructions[starts[-1] :]


def exec_form(arguments: str) -> list[str]:
    """The JSON array of an ENTRYPOINT or CMD (shell form is refused: no signal forwarding)."""
    value = json.loads(arguments)
    assert isinstance(value, list), f"not exec form: {arguments}"
    return [str(part) for part in value]


def image_command(instructions: list[tuple[str, str]]) -> list[str]:
    stage = final_stage(instructions)
    entrypoint = [exec_form(args) for keyword, args in stage if keyword == "ENTRYPOINT"]
    cmd = [exec_form(args) for keyword, args in stage if keyword == "CMD"]
    return (entrypoint[-1] if entrypoint else []) + (cmd[-1] if cmd else [])


def image_env(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """The ENV of the final stage (``KEY=value`` form; ``$PATH``-style values kept verbatim)."""
    env: dict[str, str] = {}
    for keyword, args in final_stage(instructions):
        if keyword == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text())


# --- gunicorn -----------------------------------------------------------------------------------

GUNICORN_SETTINGS = (
    "bind", "workers", "timeout", "graceful_timeout", "worker_tmp_dir", "control_socket_disable",
    "worker_class",
)  # fmt: skip
_GUNICORN_PROBE = f"""
import json, sys
from gunicorn.app.wsgiapp import WSGIApplication
sys.argv = json.loads(sys.argv[1])
cfg = WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]", prog="gunicorn").cfg
print(json.dumps({{name: cfg.settings[name].get() for name in {list(GUNICORN_SETTINGS)!r}}}))
"""


def gunicorn_config(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What gunicorn itself resolves from ``argv`` (the image's command) in ``env``: the config
    module, the command line and the environment, in gunicorn's own precedence."""
    result = subprocess.run(
        [sys.executable, "-c", _GUNICORN_PROBE, json.dumps(argv)],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded
