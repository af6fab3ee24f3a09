"""Pull mode: the same core fed by a streaming pull, for clusters with no public HTTPS endpoint.

Each received message goes through the same dispatcher as a push; the outcome's HTTP status
decides ack (2xx) or nack, exactly as Pub/Sub would read it from a push response. Flow control
bounds how many messages one process holds at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.cloud import pubsub_v1
from google.cloud.pubsub_v1.subscriber.scheduler import ThreadScheduler

from consumer.errors import ConsumerError, SettingsError
from consumer.observe.logs import configure_logging
from consumer.pipeline import admission
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.wire.message import Format, PushMessage
from consumer.wire.outcomes import Outcome

log = logging.getLogger("consumer.pull")


def to_message(received: Any, subscription: str) -> PushMessage:
    """A pulled ``pubsub_v1`` message as the typed message a push would have produced."""
    return PushMessage(
        message_id=received.message_id,
        publish_time=received.publish_time,
        data=bytes(received.data),
        attributes=dict(received.attributes),
        subscription=subscription,
        ordering_key=received.ordering_key or "",
        delivery_attempt=received.delivery_attempt,
        format=Format.PULL,
    )


class PullConsumer:
    """Streams ``subscription`` into ``dispatcher`` with at most ``max_messages`` in flight."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        subscription: str,
        max_messages: int = 4,
        client: pubsub_v1.SubscriberClient | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.subscription = subscription
        self.max_messages = max_messages
        self.client = client or pubsub_v1.SubscriberClient()

    def handle(self, received: Any) -> None:
        """The subscriber's callback: the dispatcher decides, then ack or nack. Never raises
        into the library."""
        try:
            outcome = self._decide(received)
        except Exception:
            log.exception("unexpected failure on message %s", received.message_id)
            received.nack()
            return
        # Unlike a push endpoint, a 400 here is acked: redelivery can never fix the message,
        # and a nack without a retry policy comes straight back (the log keeps the evidence).
        if outcome.acked or outcome.http_status == 400:
            received.ack()
        else:
            received.nack()

    def _decide(self, received: Any) -> Outcome:
        started = time.monotonic()
        try:
            message = to_message(received, self.subscription)
        except ConsumerError as error:
            return self.dispatcher.refuse(Source.PULL, error, started)
        return self.dispatcher.dispatch(message, Source.PULL, started)

    def run(self, stop: threading.Event) -> None:
        """Pull until ``stop`` is set, then finish the messages in hand and return."""
        self._require_declared()
        executor = ThreadPoolExecutor(max_workers=self.max_messages, thread_name_prefix="pull")
        future = self.client.subscribe(
            self.subscription,
            callback=self.handle,
            flow_control=pubsub_v1.types.FlowControl(max_messages=self.max_messages),
            scheduler=ThreadScheduler(executor),
            await_callbacks_on_shutdown=True,  # finish (and ack) what is in hand before exit
        )
        self._warn_without_retry_policy()
        log.info("pulling", extra={"subscription": self.subscription})
        stop.wait()
        future.cancel()
        future.result()

    def _require_declared(self) -> None:
        """Outside local mode the pulled subscription must be declared (``CONSUMER_SOURCES``),
        and a process that publishes continuations or wake-ups must sign them: refused before
        the first message is pulled, in one line."""
        settings = self.dispatcher.settings
        settings.require_admission()
        if not admission.permissive(settings) and (
            settings.admission.routes_of(self.subscription) is None
        ):
            raise SettingsError(
                f"CONSUMER_SOURCES does not declare {self.subscription!r}: every message pulled "
                "from it would be refused; declare the routes it may start (docs/sources.md)"
            )

    def _warn_without_retry_policy(self) -> None:
        """Without a retry policy a nack is redelivered at once: a 503 (a blip) would burn
        every inbox attempt in milliseconds."""
        try:
            subscription = self.client.get_subscription(subscription=self.subscription)
        except Exception as exc:
            log.warning("cannot read subscription %s: %s", self.subscription, exc)
            return
        if not subscription.retry_policy.minimum_backoff:
            log.warning(
                "subscription %s has no retry policy: nacked messages come back immediately; "
                "set one (e.g. 10s..600s backoff)",
                self.subscription,
            )


def run_pull(service: Service, subscription: str, max_messages: int) -> None:
    """``consumer pull``: run until SIGTERM or SIGINT, then drain and exit. A database that is
    missing or not migrated is refused first, in one line; an unreachable one is logged, and the
    deliveries are nacked until it answers."""
    settings = service.settings
    settings.require_mail_transport()  # pulled ticks run the sweep, and so the email kind
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    service.require_database(serving=True)
    dispatcher = Dispatcher(settings, service.engine, service.registry)
    admission.announce(settings)  # permissive routing is said at start
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    PullConsumer(dispatcher, subscription, max_messages).run(stop)
