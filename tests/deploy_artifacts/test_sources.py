"""Each overlay declares what every push subscription Terraform makes may start, the same routes
Terraform declares (``local.routes``), and Terraform hands the value on in ``consumer_config``
(docs/sources.md)."""

from __future__ import annotations

from typing import Any

import hcl2

from consumer.config.admission import sources
from tests.deploy_artifacts.artifacts import TERRAFORM, Doc, config_env
from tests.deploy_artifacts.terraform import Module, evaluate, unquote


def pubsub_locals() -> dict[str, Any]:
    with (TERRAFORM / "pubsub.tf").open() as handle:
        parsed = unquote(hcl2.load(handle))
    [block] = [block for block in parsed["locals"] if "topics" in block]
    return dict(block)


def test_each_overlay_declares_every_subscription_as_terraform_does(
    docs: list[Doc], overlay: str
) -> None:
    module = Module.load(TERRAFORM)
    values = module.values(TERRAFORM / f"{overlay}.example.tfvars")
    declared = pubsub_locals()
    expected = {
        f"{evaluate(topic, values)}-push": frozenset(declared["routes"][kind].split("+"))
        for kind, topic in declared["topics"].items()
    }
    assert sources(config_env(docs)["CONSUMER_SOURCES"]) == expected
    assert expected["consumer-jobs-push"] == {"job"}  # a producer starts jobs only


def test_terraform_outputs_the_declaration() -> None:
    with (TERRAFORM / "outputs.tf").open() as handle:
        outputs = unquote(hcl2.load(handle))["output"]
    [config] = [block["consumer_config"] for block in outputs if "consumer_config" in block]
    assert "CONSUMER_SOURCES" in str(config["value"]) and "local.sources" in str(config["value"])
