"""Mount the consumer in another team's Flask app (docs/embedding.md)::

    app = Flask(__name__)                      # their app: their routes, auth and error pages
    service = Service.of(settings)             # or consumer.service.compose(os.environ)
    Consumer(app, service, url_prefix="/consumer")
    # POST /consumer/push, /consumer/hooks/deploy, /consumer/ticks/<task>

The mounted routes are ``create_app``'s own views on the same dispatcher, so the pipeline, the
inbox keys and the outcome table are the same. The header gate (``consumer.http.gate``) goes
around the host's WSGI callable, as in ``create_app``, but checks only the mounted deliveries:
it still authenticates and refuses them before their body is read; every other request passes
through untouched. The JSON error answers and the body limit are the blueprint's, so the host's
error handlers and ``MAX_CONTENT_LENGTH`` stay theirs. ``consumer.http.wsgi.bridged(app)`` serves
the host app behind the buffering bridge with this gate.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Flask, request
from werkzeug.exceptions import HTTPException

from consumer.auth.push import Authenticator, authenticator_for
from consumer.config.settings import Settings
from consumer.http.app import BuiltWith, add_deliveries, json_http_error
from consumer.http.gate import Gate, GatedWsgi
from consumer.observe import logs
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.wire.envelope import Limits
from consumer.wire.timeutil import Clock, utcnow

EXTENSION = "consumer"


class Consumer:
    """The Flask extension: ``Consumer(app, service)``, or ``Consumer(...).init_app(app, service)``
    for an app factory. ``hook`` and ``tick``: mount ``/hooks/deploy`` and ``/ticks/<task>``
    too (``/push`` is always mounted)."""

    def __init__(
        self,
        app: Flask | None = None,
        service: Service | None = None,
        *,
        url_prefix: str = "/consumer",
        hook: bool = True,
        tick: bool = True,
        clock: Clock = utcnow,
        authenticate: Authenticator | None = None,
    ) -> None:
        self.url_prefix = url_prefix.rstrip("/")
        self.hook, self.tick, self.clock = hook, tick, clock
        self._authenticate = authenticate
        self.dispatcher: Dispatcher | None = None
        if app is not None and service is not None:
            self.init_app(app, service)

    def init_app(self, app: Flask, service: Service) -> None:
        """Register the routes and install the gate; the settings are validated first, as
        ``create_app`` does, so a misconfigured service stops the host's start."""
        if EXTENSION in app.extensions:
            raise RuntimeError("the consumer is already mounted in this app")
        settings = service.settings
        settings.validate()
        self.dispatcher = Dispatcher(settings, service.engine, service.registry, self.clock)
        authenticate = self._authenticate or authenticator_for(settings)
        app.register_blueprint(self._blueprint(self.dispatcher))
        gate = Gate(settings, authenticate, prefix=self.url_prefix, embedded=True)
        gated = GatedWsgi(gate, app.wsgi_app)
        app.wsgi_app = gated  # type: ignore[method-assign]
        app.extensions[EXTENSION] = BuiltWith(settings, authenticate, gated)

    def _blueprint(self, dispatcher: Dispatcher) -> Blueprint:
        settings = dispatcher.settings
        blueprint = Blueprint("consumer", __name__, url_prefix=self.url_prefix or None)
        add_deliveries(blueprint, dispatcher, _limits(settings), hook=self.hook, tick=self.tick)
        blueprint.before_request(_body_limit(settings.server.max_body_bytes))
        blueprint.before_request(logs.bind_request)
        blueprint.teardown_request(logs.unbind_request)
        blueprint.register_error_handler(HTTPException, json_http_error)
        return blueprint


def _limits(settings: Settings) -> Limits:
    inbox = settings.inbox
    return Limits(inbox.max_attributes, inbox.max_json_depth, inbox.max_json_nodes)


def _body_limit(limit: int) -> Callable[[], None]:
    """The body limit of the mounted routes only (the host's ``MAX_CONTENT_LENGTH`` is its own):
    one byte over, as ``create_app`` sets it, so a chunked body at the limit is told from one
    over it."""

    def limit_body() -> None:
        request.max_content_length = limit + 1

    return limit_body
