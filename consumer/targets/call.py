"""One target's calls: POST a delivery within the handler's budget, and no more than its
concurrency limit at once in this process.

The call's timeout is the budget left (less the reserve that records the outcome) capped by the
target's own, and it is a wall-clock deadline for the whole exchange, headers and body
(``consumer.outbound.deadline``, as the warmer's): a target that drips its answer is cut
off at it. No more than ``MAX_ANSWER_BYTES`` of the body is read. Redirects are not
followed: the signed request would go somewhere the settings never named. A ``Retry-After`` is
honoured here only while the budget covers the wait and one more call; otherwise the failure
goes back to Pub/Sub's backoff (or the job's). Every repeat carries the same Idempotency-Key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import requests

from consumer.config.targets import TargetSpec
from consumer.errors import Retryable
from consumer.jobs.model import JobCancelled
from consumer.observe import spans
from consumer.outbound.budget import MIN_REQUEST_SECONDS, Budget
from consumer.outbound.deadline import Deadline, deadline_session
from consumer.targets.answer import MAX_ANSWER_BYTES, Answer, result, retry_after
from consumer.targets.auth import TokenSource, auth_headers
from consumer.targets.cloudevent import Delivery

USER_AGENT = "consumer-http-target/1"
CHUNK_BYTES = 16 * 1024
MAX_WAITS = 3
"""At most this many ``Retry-After`` waits inside one handler run."""
OnCancel = Callable[[Callable[[], None]], AbstractContextManager[None]]
"""``JobContext.on_cancel``: runs a callback (from the lease heartbeat's thread) if the job is
cancelled while the block runs."""


def _never(callback: Callable[[], None]) -> AbstractContextManager[None]:
    return nullcontext()


class Caller:
    """Calls one target. Built once per process (the composition root's step), so its
    semaphore is the per-process concurrency limit and its session is shared by threads."""

    def __init__(self, spec: TargetSpec, tokens: TokenSource) -> None:
        self.spec = spec
        self.tokens = tokens
        self._slots = threading.BoundedSemaphore(spec.concurrency)
        self._local = threading.local()

    def call(
        self, delivery: Delivery, remaining: Callable[[], float], on_cancel: OnCancel = _never
    ) -> dict[str, object]:
        """POST ``delivery``; its answer as a handler result, or what a failure means raised.
        ``on_cancel``: a cancelled job's call is abandoned (its connection shut), and
        ``JobCancelled`` raised."""
        budget = Budget(remaining)
        for _ in range(MAX_WAITS):
            answer = self._post(delivery, budget, on_cancel)
            wait = retry_after(answer) if answer.retryable else None
            if wait is None or not budget.allows(wait + MIN_REQUEST_SECONDS):
                break
            time.sleep(wait)
        return result(self.spec.name, answer)

    def _post(self, delivery: Delivery, budget: Budget, on_cancel: OnCancel) -> Answer:
        timeout = min(self.spec.timeout_seconds, budget.left())
        if timeout < MIN_REQUEST_SECONDS:
            raise Retryable(f"target {self.spec.name!r}: no time left in the handler's budget")
        if not self._slots.acquire(timeout=timeout):
            raise Retryable(f"target {self.spec.name!r}: {self.spec.concurrency} calls in flight")
        try:
            return self._send(delivery, time.monotonic() + timeout, on_cancel)
        finally:
            self._slots.release()

    def _send(self, delivery: Delivery, deadline: float, on_cancel: OnCancel) -> Answer:
        """One POST under its client span, whose ``traceparent`` the target receives; transport
        failures are retryable (the target may have acted: the repeat carries the same key)."""
        with spans.client_call("POST", self.spec.url) as span:
            answer = self._post_once(delivery, deadline, on_cancel)
            spans.answered(span, answer.status)
        return answer

    def _post_once(self, delivery: Delivery, deadline: float, on_cancel: OnCancel) -> Answer:
        headers = {"User-Agent": USER_AGENT, **delivery.headers()}
        headers |= auth_headers(self.spec.auth, delivery.body, self.tokens, deadline)
        spans.inject(headers)  # the call's own span as the target's parent
        timeout = max(MIN_REQUEST_SECONDS, deadline - time.monotonic())
        ends = Deadline(time.monotonic() + timeout)
        try:
            with ends, on_cancel(ends.abandon), self._session().post(
                self.spec.url, data=delivery.body, headers=headers, timeout=timeout,
                stream=True, allow_redirects=False,
            ) as response:  # fmt: skip
                return _read(response, ends)
        except requests.RequestException as exc:
            if ends.abandoned:
                cancelled = f"target {self.spec.name!r}: call abandoned, the job was cancelled"
                raise JobCancelled(cancelled) from None
            if ends.expired or isinstance(exc, requests.Timeout):
                failure = f"target {self.spec.name!r} timed out after {timeout:.2f}s"
            else:
                failure = f"target {self.spec.name!r}: {type(exc).__name__}: {exc}"
            raise Retryable(failure) from exc

    def _session(self) -> requests.Session:
        """One session per thread: requests' sessions are not documented as thread-safe."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = deadline_session()
            session.trust_env = False  # the target's URL is the settings', not a proxy's
        return session


def _read(response: requests.Response, deadline: Deadline) -> Answer:
    """The status, headers and at most ``MAX_ANSWER_BYTES`` of the body, read by the deadline.
    Once the status is in, a body that stalls (or that the deadline cuts) only makes the answer
    incomplete."""
    kept = bytearray()
    complete, truncated = True, False
    try:
        for chunk in response.iter_content(CHUNK_BYTES):
            kept += chunk
            if len(kept) > MAX_ANSWER_BYTES:
                truncated = True
                break
            if deadline.left() < 0:
                complete = False
                break
    except requests.RequestException:
        complete = False
    complete = complete and not deadline.expired
    body = bytes(kept[:MAX_ANSWER_BYTES])
    return Answer(response.status_code, response.headers, body, truncated, complete)
