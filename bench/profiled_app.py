"""The service's WSGI app with each delivery run under cProfile (``storage_bench.py --profile``).

gunicorn serves ``bench.profiled_app:app()`` the way the benchmark serves
``consumer.http.wsgi:app()``: the production worker puts the Flask app behind its bridge, and the
app's front door (``consumer.http.door.GatedWsgi``) answers the pushes itself, without entering
Flask. So the door's ``deliveries.answer`` is what is wrapped (wrapping ``flask_app.wsgi_app``
saw no push at all, and the bench found no profile). Every delivery's profile is dumped to
``$BENCH_PROFILE_DIR/PID-N.prof``. cProfile sees the delivery's own thread only (not the
import's background writer, which waits on the database).
"""

from __future__ import annotations

import cProfile
import itertools
import os
from collections.abc import Callable
from typing import Any

from flask import Flask

from consumer.http.app import built_with
from consumer.http.wsgi import app as consumer_app

_count = itertools.count()


def app() -> Flask:
    flask_app = consumer_app()
    built = built_with(flask_app)
    deliveries = built.gated.deliveries if built is not None else None
    if deliveries is None:
        raise RuntimeError("the app answers no deliveries: nothing to profile")
    deliveries.answer = _profiled(deliveries.answer, os.environ["BENCH_PROFILE_DIR"])  # type: ignore[method-assign]
    return flask_app


def _profiled(answer: Callable[..., Any], directory: str) -> Callable[..., Any]:
    def profiled(*args: Any, **kwargs: Any) -> Any:
        profiler = cProfile.Profile()
        try:
            return profiler.runcall(answer, *args, **kwargs)
        finally:
            profiler.dump_stats(os.path.join(directory, f"{os.getpid()}-{next(_count)}.prof"))

    return profiled
