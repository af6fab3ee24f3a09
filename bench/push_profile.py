"""Where a push's CPU goes, in process (``python -m bench.push_bench --profile`` or
``--phases``): the push path through Flask's test client, under cProfile or with each phase
timed by the thread's CPU clock."""

from __future__ import annotations

import cProfile
import functools
import importlib
import os
import pstats
import time
from typing import Any

from bench.push_load import deploy_body
from bench.push_serving import consumer_app


def profile(conninfo: str, requests_count: int = 1500) -> None:
    """The push path in process under cProfile (Flask's test client, no HTTP)."""
    client = consumer_app(conninfo).test_client()
    bodies = [deploy_body(f"profile-{n}") for n in range(requests_count)]
    profiler = cProfile.Profile()
    profiler.enable()
    for body in bodies:
        client.post("/push", data=body, content_type="application/json")
    profiler.disable()
    pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(30)


PHASES = (
    ("consumer.db.prepared", "Prepared.first", "the claim statement"),
    ("consumer.db.prepared", "Prepared.rowcount", "the finish statement"),
    ("consumer.pipeline.dispatch", "Dispatcher._handle", "claim, handler, finish"),
    ("consumer.pipeline.dispatch", "Dispatcher.dispatch", "the whole decision"),
    ("consumer.http.door", "GatedWsgi.__call__", "the request in the door"),
    ("consumer.http.door", "answer", "the JSON answer"),
)
"""(module, attribute, label) of what ``--phases`` times."""


def phases(conninfo: str, requests_count: int = 4000) -> None:
    """Thread CPU per request of each phase of the push path, in process (each timed function
    wrapped; nested phases include their children): where a push's CPU goes, without cProfile's
    per-call overhead. The request itself is timed through Flask's test client."""
    spent = dict.fromkeys((label for *_, label in PHASES), 0.0)

    def timed(function: Any, label: str) -> Any:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - started

        return wrapper

    for module_name, attribute, label in PHASES:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, timed(getattr(owner, name), label))
    client = consumer_app(conninfo).test_client()
    bodies = [deploy_body(f"phases-{n}") for n in range(requests_count + 300)]
    for body in bodies[:300]:  # warm-up: connections, prepared statements
        client.post("/push", data=body, content_type="application/json")
    spent = dict.fromkeys(spent, 0.0)
    started = time.thread_time()
    for body in bodies[300:]:
        client.post("/push", data=body, content_type="application/json")
    total = time.thread_time() - started
    print(f"thread CPU per request, in process, {requests_count} pushes (nested phases overlap):")
    print(f"  {'the request through Flask':<26} {total / requests_count * 1e6:7.1f} us")
    for label, seconds in spent.items():
        print(f"  {label:<26} {seconds / requests_count * 1e6:7.1f} us")
