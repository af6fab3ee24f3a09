"""Whatever a handler returns or raises, its verdict is recorded on both databases: non-finite
numbers, deep nesting, cycles, NULs and huge results are made storable in one place
(``json_safe_result``), so the finish never fails and the effect is never done again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import Skip
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.pipeline.results import MAX_DEPTH, SCALAR_BOUND, _Storable, json_safe_result
from consumer.plugins import build_registry
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    return value


RESULTS: dict[str, Any] = {
    "nan": {"count": float("nan"), "more": [float("inf"), -float("inf")]},
    "deep": {"tree": nested(20_000)},
    "cycle": cyclic(),
    "nul": {"te\x00xt": "a\x00b\ud800"},
    "huge": {"rows": ["x" * 1000] * 5000},
    "big-int": {"n": 10**5000},
    "not-a-dict": nested(100),
}


@pytest.mark.parametrize("result", list(RESULTS.values()), ids=list(RESULTS))
def test_any_result_is_recorded_done_once(settings: Settings, engine: Engine, result: Any) -> None:
    calls: list[int] = []

    def handler(context: Any, event: Any) -> Any:
        calls.append(1)
        return result

    registry: Registry = build_registry(settings)
    registry.route("message", handler, replace=True)
    dispatcher = Dispatcher(settings, engine, registry)
    message = PushMessage("m1", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    first = dispatcher.dispatch(message)
    assert first.kind is Kind.DONE, first
    json.dumps(first.details, allow_nan=False)
    assert dispatcher.dispatch(message).kind is Kind.DUPLICATE and len(calls) == 1


def test_a_skip_reason_with_a_nul_is_recorded(settings: Settings, engine: Engine) -> None:
    def handler(context: Any, event: Any) -> Any:
        raise Skip("not \x00 for us")

    registry = build_registry(settings)
    registry.route("message", handler, replace=True)
    dispatcher = Dispatcher(settings, engine, registry)
    message = PushMessage("m2", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    assert dispatcher.dispatch(message).kind is Kind.SKIPPED


def test_a_result_too_large_is_kept_as_an_excerpt() -> None:
    details = json_safe_result({"rows": ["x" * 1000] * 5000})
    assert "result_too_large" in details and len(json.dumps(details)) < 10_000


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.text(alphabet='\x01"\\', min_size=200, max_size=400),  # escapes: 6 and 2 chars each
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=40,
)


@given(JSON_VALUES)
def test_the_walk_bounds_the_encoded_length_so_a_small_result_is_not_encoded_to_measure_it(
    value: Any,
) -> None:
    """``json_safe_result`` skips encoding a result its walk proves small; the proof must hold:
    the bound is never below the length of the JSON it keeps (escapes and big integers included)."""
    walk = _Storable()
    converted = walk.convert(value, MAX_DEPTH)
    details = converted if isinstance(converted, dict) else {"result": converted}
    assert len(json.dumps(details, ensure_ascii=False)) <= walk.bound + SCALAR_BOUND
