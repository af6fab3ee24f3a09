"""The exceptions that carry meaning across layers.

Each family maps to one row of the outcome table (docs/architecture.md §3) in
``consumer.wire.outcomes``;
nothing else decides an HTTP status.
"""

from __future__ import annotations


class ConsumerError(Exception):
    """Base of every error this package raises on purpose."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self)


class SettingsError(ConsumerError):
    """The configuration is invalid."""


class AlreadyRegistered(SettingsError):
    """A plugin registered a name that is already taken; pass ``replace=True`` to mean it."""


class NotReplayable(ConsumerError):
    """The inbox row does not exist or is not dead, unroutable or failed."""


class Skip(Exception):
    """Raised by a handler to record the event as ``skipped`` (acknowledged, not an error)."""


# --- Input the client sent: the request is refused, nothing is stored. ---------------------------


class BadRequest(ConsumerError):
    """The request is malformed."""

    status = 400


class InvalidEnvelope(BadRequest):
    """The push envelope is malformed."""


class InvalidEvent(BadRequest):
    """The message does not describe a valid event."""


class BodyTooLarge(BadRequest):
    """The request body is over the limit."""

    status = 413


class BodyTimeout(BadRequest):
    """The request body did not arrive in time."""

    status = 408  # not an ack: Pub/Sub sends the message again


class Unauthorized(ConsumerError):
    """Missing or invalid credentials."""

    status = 401


class Forbidden(ConsumerError):
    """The caller is not allowed to push here."""

    status = 403


# --- Raised by handlers: decide whether Pub/Sub should redeliver. ---------------------------------


class HandlerError(ConsumerError):
    """A handler failed."""


class Retryable(HandlerError):
    """A transient failure: the event is nacked and redelivered with backoff."""


class Incomplete(Retryable):
    """Progress was committed but the work is not finished (the time budget ran out): redeliver
    to continue. Unlike other retryable failures it spends no attempt, so a long job that keeps
    advancing is never recorded dead for being long."""


class LeaseLost(Retryable):
    """Another delivery took this event over; stop before doing more work."""


class Permanent(HandlerError):
    """A failure that a retry cannot fix: the event is recorded dead and acknowledged."""


class Unavailable(ConsumerError):
    """A dependency (the database) is unreachable; Pub/Sub should retry later."""

    status = 503


class DatabaseFault(ConsumerError):
    """The database cannot be used as configured (missing, unreachable, wrong driver, or not
    migrated). Raised by the command line, where the fix is up to the person typing."""


class NotMigrated(DatabaseFault, Unavailable):
    """The database schema is not at the head revision: run `consumer db upgrade`."""
