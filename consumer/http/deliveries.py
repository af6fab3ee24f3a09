"""The delivery handlers: ``POST /push``, ``POST /hooks/deploy`` and ``POST /ticks/<task>``, one
implementation each, answered from the WSGI environ by the front door (``consumer.http.door``)
however the app is served (the bridge, the plain app, the embedded extension).

They run once the door has admitted the request (``consumer.http.gate``): its credentials are in
the admission, so a handler reads the body (at most the route's limit, plus one byte to tell "at"
from "over"), checks a signature over it with the verifier the door chose, parses, and lets the
dispatcher decide. No Flask: a push is the hot path, and Flask's request machinery cost about a
tenth of a push's CPU (``bench/push_bench.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wsgi import get_input_stream

from consumer.deploy.hook import parse_hook
from consumer.errors import BodyTooLarge, ConsumerError
from consumer.http.credentials import Scheme
from consumer.http.gate import Admission
from consumer.http.routes import Handler
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.ticks.hook import tick_message
from consumer.wire.envelope import Limits, parse_push
from consumer.wire.outcomes import Outcome


def decide_push(
    dispatcher: Dispatcher,
    limits: Limits,
    headers: Mapping[str, str],
    read: Callable[[], bytes],
    started: float,
) -> Outcome:
    """A push's decision: parsed, then dispatched; refused (and recorded as refused) if its body
    cannot be read or parsed."""
    try:
        message = parse_push(headers, read(), limits)
    except ConsumerError as error:
        return dispatcher.refuse(Source.PUSH, error, started)
    return dispatcher.dispatch(message, Source.PUSH, started)


def read_body(environ: dict[str, Any], limit: int) -> bytes:
    """The body from a WSGI environ: at most ``limit`` + 1 bytes are read, and over ``limit`` it
    is refused (413); a chunked body is read only if the server marks its end
    (``wsgi.input_terminated``; the door refuses one it does not, 411)."""
    chunks: list[bytes] = []
    size = 0
    try:
        stream = get_input_stream(environ, max_content_length=limit + 1)
        while size <= limit and (chunk := stream.read(limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except RequestEntityTooLarge:
        raise BodyTooLarge(f"the body is over {limit} bytes") from None
    if size > limit:
        raise BodyTooLarge(f"the body is over {limit} bytes")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class Deliveries:
    """The handlers of one app, on its dispatcher."""

    def __init__(self, dispatcher: Dispatcher, limits: Limits) -> None:
        self.dispatcher, self.limits = dispatcher, limits
        self._handlers = {Handler.PUSH: self._push, Handler.HOOK: self._hook,
                          Handler.TICK: self._tick}  # fmt: skip

    def answer(self, admission: Admission, environ: dict[str, Any]) -> Outcome:
        """The outcome of an admitted delivery."""
        assert admission.route is not None  # the door hands only its own rows here
        return self._handlers[admission.route.handler](admission, environ, time.monotonic())

    def _push(self, admission: Admission, environ: dict[str, Any], started: float) -> Outcome:
        read = lambda: read_body(environ, admission.limit)  # noqa: E731
        return decide_push(self.dispatcher, self.limits, admission.view.headers, read, started)

    def _hook(self, admission: Admission, environ: dict[str, Any], started: float) -> Outcome:
        """The signature covers the body: checked once the body is in, then parsed."""
        clock = self.dispatcher.clock
        try:
            body = read_body(environ, admission.limit)
            admission.credentials.verify_body(body, clock())
            event = parse_hook(body, clock(), self.dispatcher.registry.schedule_of)
        except ConsumerError as error:
            return self.dispatcher.refuse(Source.HOOK, error, started)
        return self.dispatcher.handle(event, Source.HOOK, started)

    def _tick(self, admission: Admission, environ: dict[str, Any], started: float) -> Outcome:
        """A signed tick's signature is checked over its body; its slot clock is the signed
        time, or the schedule time a verified token vouches for."""
        credentials = admission.credentials
        try:
            body = read_body(environ, admission.limit)
            scheduled = credentials.verify_body(body, self.dispatcher.clock())
            signed = credentials.scheme is Scheme.HMAC
            message = tick_message(
                admission.params["task"], body, scheduled, admission.view.headers, signed
            )
        except ConsumerError as error:
            return self.dispatcher.refuse(Source.TICKS, error, started)
        return self.dispatcher.dispatch(message, Source.TICKS, started)
