"""The service's WSGI app with each request run under cProfile (``storage_bench.py --profile``).

gunicorn serves ``bench.profiled_app:app()`` the way the benchmark serves
``consumer.http.wsgi:app()``:
a Flask app, which the production worker puts behind its bridge; only the app's ``wsgi_app`` (the
request inside Flask) is wrapped. Every request's profile is dumped to
``$BENCH_PROFILE_DIR/PID-N.prof``. cProfile sees the request's own thread only (not the import's
background writer, which waits on the database).
"""

from __future__ import annotations

import cProfile
import itertools
import os
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask

from consumer.http.wsgi import app as consumer_app

_count = itertools.count()


def app() -> Flask:
    flask_app = consumer_app()
    directory = os.environ["BENCH_PROFILE_DIR"]
    inner = flask_app.wsgi_app

    def profiled(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        profiler = cProfile.Profile()
        try:
            return list(profiler.runcall(inner, environ, start_response))
        finally:
            profiler.dump_stats(os.path.join(directory, f"{os.getpid()}-{next(_count)}.prof"))

    flask_app.wsgi_app = profiled  # type: ignore[method-assign]
    return flask_app
