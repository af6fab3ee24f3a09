"""The route-policy seam: a route gets the policy its feature declared (the tick route: the tick
rules, with the built-ins), every other route the neutral one, and a route has one policy."""

from __future__ import annotations

import pytest

from consumer.config.settings import Settings
from consumer.errors import AlreadyRegistered
from consumer.pipeline.policy import Policy, policies
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.ticks.policy import TickRules
from consumer.ticks.policy import register as register_ticks
from consumer.wire.classify import classify
from consumer.wire.envelopes_out import tick_body, wrapped_body
from consumer.wire.events import Route
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow


def test_the_built_ins_give_the_tick_route_its_rules_and_other_routes_none() -> None:
    settings = Settings.of()
    registry = build_registry(settings)
    policy_of = policies(registry.route_policies, settings, utcnow, rerun=False)
    tick = classify(PushMessage.from_json(tick_body("sweep")["message"]), registry.schedule_of)
    other = classify(PushMessage.from_json(wrapped_body(data=b"x")["message"]), lambda _: 60)
    rules = policy_of(tick)
    assert isinstance(rules, TickRules) and not rules.rerun
    assert type(policy_of(other)) is Policy
    assert policy_of(other).unroutable(other) == "no handler for other"


def test_a_rerun_builds_its_policies_for_a_rerun() -> None:
    settings, registry = Settings.of(), Registry()
    register_ticks(registry)
    tick = classify(PushMessage.from_json(tick_body("sweep")["message"]), registry.schedule_of)
    rules = policies(registry.route_policies, settings, utcnow, rerun=True)(tick)
    assert isinstance(rules, TickRules) and rules.rerun


def test_a_route_has_one_policy() -> None:
    registry = Registry()
    register_ticks(registry)
    with pytest.raises(AlreadyRegistered, match="route 'tick' has a policy already"):
        registry.route_policy(Route.TICK, lambda settings, clock, rerun: Policy())
