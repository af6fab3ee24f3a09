"""Mount the consumer in another team's Flask app (docs/embedding.md)::

    app = Flask(__name__)                      # their app: their routes, auth and error pages
    service = Service.of(settings)             # or consumer.service.compose(os.environ)
    Consumer(app, service, url_prefix="/consumer")
    # POST /consumer/push, /consumer/hooks/deploy, /consumer/ticks/<task>, /consumer/jobs...

The mounted routes are the front door's (``consumer.http.door``), the same handlers on the same
route table as ``create_app``'s, so the pipeline, the inbox keys and the outcome table are the
same. The door goes around the host's WSGI callable and owns the paths under the prefix: it
matches them against the delivery rows (404 and 405 otherwise, JSON), authenticates and refuses
before a body is read, and answers them itself. Every other request is the host's, passed
through untouched, so the host's error handlers and ``MAX_CONTENT_LENGTH`` stay theirs.
``consumer.http.wsgi.bridged(app)`` serves the host app behind the buffering bridge with this
door.
"""

from __future__ import annotations

from flask import Flask

from consumer.auth.push import Authenticator, authenticator_for
from consumer.http.app import BuiltWith, limits_of
from consumer.http.deliveries import Deliveries
from consumer.http.door import GatedWsgi
from consumer.http.gate import Gate
from consumer.http.job_reports import Reports
from consumer.http.jobs_api import JobAnswers
from consumer.http.report_gate import report_gate
from consumer.http.routes import delivery_rows
from consumer.pipeline import admission
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.targets.install import specs_of
from consumer.wire.timeutil import Clock, utcnow

EXTENSION = "consumer"


class Consumer:
    """The Flask extension: ``Consumer(app, service)``, or ``Consumer(...).init_app(app, service)``
    for an app factory. ``hook``, ``tick`` and ``jobs``: mount ``/hooks/deploy``,
    ``/ticks/<task>`` and the job API (``/jobs``...) too (``/push`` is always mounted)."""

    def __init__(
        self,
        app: Flask | None = None,
        service: Service | None = None,
        *,
        url_prefix: str = "/consumer",
        hook: bool = True,
        tick: bool = True,
        jobs: bool = True,
        clock: Clock = utcnow,
        authenticate: Authenticator | None = None,
    ) -> None:
        self.url_prefix = url_prefix.rstrip("/")
        self.hook, self.tick, self.jobs, self.clock = hook, tick, jobs, clock
        self._authenticate = authenticate
        self.dispatcher: Dispatcher | None = None
        if app is not None and service is not None:
            self.init_app(app, service)

    def init_app(self, app: Flask, service: Service) -> None:
        """Install the front door for the routes; the settings are validated first, as
        ``create_app`` does, so a misconfigured service stops the host's start."""
        if EXTENSION in app.extensions:
            raise RuntimeError("the consumer is already mounted in this app")
        settings = service.settings
        settings.validate()
        self.dispatcher = Dispatcher(settings, service.engine, service.registry, self.clock)
        authenticate = self._authenticate or authenticator_for(settings)
        admission.announce(settings)  # permissive routing is said at start
        rows = delivery_rows(hook=self.hook, tick=self.tick, jobs=self.jobs)
        reports = report_gate(settings, service.engine, specs_of(service.registry, settings))
        gate = Gate(settings, authenticate, routes=rows, prefix=self.url_prefix, embedded=True,
                    reports=reports)  # fmt: skip
        deliveries = Deliveries(self.dispatcher, limits_of(settings))
        answers = JobAnswers(settings, service.engine, service.registry, self.clock)
        own = Reports(settings, service.engine, self.clock)
        gated = GatedWsgi(gate, app.wsgi_app, deliveries, answers if self.jobs else None, own)
        app.wsgi_app = gated  # type: ignore[method-assign]
        app.extensions[EXTENSION] = BuiltWith(settings, authenticate, gated)
