"""Rendered overlays, once per session (``kubectl kustomize`` is on the CI image; skipped with the
reason where it is not), and the Terraform module with the values of each overlay's example."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.deploy_artifacts.artifacts import K8S, OVERLAYS, TERRAFORM, Doc, kubectl, render
from tests.deploy_artifacts.terraform import Module

_rendered: dict[str, list[Doc]] = {}


def rendered_overlay(overlay: str) -> list[Doc]:
    """A fresh copy of the overlay's resources: tests may mutate it."""
    if kubectl() is None:
        pytest.skip("kubectl is not installed: cannot render the kustomize overlays")
    if overlay not in _rendered:
        _rendered[overlay] = render(K8S / "overlays" / overlay)
    return copy.deepcopy(_rendered[overlay])


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def docs(overlay: str) -> list[Doc]:
    return rendered_overlay(overlay)


@pytest.fixture(scope="module")
def module() -> Module:
    return Module.load(TERRAFORM)


@pytest.fixture
def values(module: Module, overlay: str) -> dict[str, Any]:
    """The module's variables as the overlay's example ``.tfvars`` sets them."""
    return module.values(TERRAFORM / f"{overlay}.example.tfvars")
