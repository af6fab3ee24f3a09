"""Log lines: one JSON object per line for Cloud Logging, or readable text in a terminal.

Every JSON line has ``time`` (RFC 3339, UTC), ``severity``, ``message`` and ``logger``, the
decision fields passed as ``extra`` (messageId, key, outcome...) as keys, and, inside a request
that named a trace, ``logging.googleapis.com/trace`` and ``logging.googleapis.com/spanId``
(``consumer.observe.tracing``). gunicorn's own lines go through the same formatter
(``gunicorn_logconfig``), its access lines with Cloud Logging's ``httpRequest`` object. A push or
deploy-hook request writes one line, its decision: the access line would only repeat it.

``auto`` (the default) writes text when stderr is a terminal and JSON otherwise, which is always
the case in a container (the image also sets ``CONSUMER_LOG_FORMAT=json``).

The Authorization header and tokens never reach a log record: nothing here logs request headers
(the access line's path has no query). As a second line of defence every line is passed through
``redact`` (bearer tokens, JWTs and ``token=`` query values), in case an exception quotes one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

from consumer.observe import tracing

FORMATS = ("auto", "json", "text")
STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
# gunicorn's default access log writes the request line, query included, so a legacy ?token=
# would be logged. %(U)s is the path without the query.
ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)ss "%(a)s"'
SECRETS = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}"), r"\1[redacted]"),
    (re.compile(r"\b(Basic\s+)[A-Za-z0-9+/=]{8,}"), r"\1[redacted]"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), "[redacted-jwt]"),
    (re.compile(r"(?i)([?&]token=)[^&\s\"']+"), r"\1[redacted]"),
)
MAY_HOLD_SECRET = re.compile(r"(?i)bearer|basic|eyJ|token=")
"""What every pattern of ``SECRETS`` starts with (case aside): a line without any of these, as
nearly every decision line is, needs one scan instead of one per pattern."""


def redact(text: str) -> str:
    """Blank out credentials that may be quoted in a message or an exception."""
    if MAY_HOLD_SECRET.search(text) is None:
        return text
    for pattern, replacement in SECRETS:
        text = pattern.sub(replacement, text)
    return text


def rfc3339(created: float) -> str:
    stamp = datetime.fromtimestamp(created, UTC).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per record; ``project`` names the traces (``projects/P/traces/T``)."""

    def __init__(self, project: str = "") -> None:
        super().__init__()
        self.project = project

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": rfc3339(record.created),
            "severity": record.levelname,
            "message": record.getMessage(),
            "logger": record.name,
        }
        access = access_atoms(record)
        if access is not None:
            entry["httpRequest"] = http_request(access)
        entry.update({k: v for k, v in vars(record).items() if k not in STANDARD})
        entry.update(tracing.log_fields(record_trace(record, access), self.project))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    """For a person at a terminal: time, level, logger, message, then the extras as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        extras = {k: v for k, v in vars(record).items() if k not in STANDARD and v is not None}
        line = f"{stamp} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if extras:
            line += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


class SkipDecidedRequests(logging.Filter):
    """Drops gunicorn's access line of a delivery (a POST whose path is one of ``decided``: its
    decision line was written) and of a successful GET of a ``routine`` path (a probe or scrape,
    every few seconds per pod). The paths are regular expressions the transport passes in from
    its route table (``consumer.http.routes.access_patterns``)."""

    def __init__(self, decided: Iterable[str] = (), routine: Iterable[str] = ()) -> None:
        super().__init__()
        self.decided = _any_of(decided)
        self.routine = _any_of(routine)

    def filter(self, record: logging.LogRecord) -> bool:
        atoms = access_atoms(record)
        if atoms is None:
            return True
        method, path = str(atoms.get("m", "")).upper(), str(atoms.get("U", ""))
        if method == "POST" and self.decided.fullmatch(path):
            return False
        ok = str(atoms.get("s", "")).startswith("2")
        return not (ok and method == "GET" and self.routine.fullmatch(path))


def _any_of(patterns: Iterable[str]) -> re.Pattern[str]:
    joined = "|".join(f"(?:{pattern})" for pattern in patterns)
    return re.compile(joined or "(?!)")


def access_atoms(record: logging.LogRecord) -> dict[str, Any] | None:
    """gunicorn's access atoms (``h``, ``m``, ``U``, ``s``..., ``{header}i``), if an access line."""
    if record.name == "gunicorn.access" and isinstance(record.args, dict):
        return record.args
    return None


def http_request(atoms: dict[str, Any]) -> dict[str, Any]:
    """Cloud Logging's ``httpRequest`` from gunicorn's atoms (the path only: no query)."""
    size = atoms.get("B")
    return {
        "requestMethod": atoms.get("m"),
        "requestUrl": atoms.get("U"),
        "status": int(atoms.get("s") or 0),
        "responseSize": str(size) if size not in (None, "-") else "0",
        "userAgent": atoms.get("a"),
        "remoteIp": atoms.get("h"),
        "protocol": atoms.get("H"),
        "latency": f"{float(atoms.get('L') or 0):.6f}s",
    }


def record_trace(record: logging.LogRecord, access: dict[str, Any] | None) -> tracing.Trace | None:
    """The request's trace: from the access line's own headers, else the current request's."""
    if access is not None:
        return tracing.from_headers(lambda name: access.get(f"{{{name}}}i"))
    return tracing.current.get()


_ENVIRON_KEYS = {
    name: "HTTP_" + name.upper().replace("-", "_")
    for name in (tracing.W3C_HEADER, tracing.CLOUD_HEADER)
}


def bind_environ(environ: Mapping[str, Any]) -> None:
    """The trace a WSGI request names, for every line logged until ``unbind_request`` (the
    transport binds it: ``consumer.http.door``)."""
    tracing.current.set(tracing.from_headers(lambda name: environ.get(_ENVIRON_KEYS[name])))


@contextmanager
def trace_of_environ(environ: Mapping[str, Any]) -> Iterator[None]:
    """Lines logged inside carry the request's trace: for what answers a request before Flask
    does (the header gate's refusals)."""
    bind_environ(environ)
    try:
        yield
    finally:
        unbind_request()


def unbind_request(_error: BaseException | None = None) -> None:
    """Later lines of this thread belong to no request."""
    tracing.current.set(None)


def resolve_format(fmt: str, stream: TextIO | None = None) -> str:
    """``json`` or ``text``; ``auto`` is text only when ``stream`` (stderr) is a terminal."""
    if fmt != "auto":
        return fmt
    stream = stream or sys.stderr
    return "text" if stream.isatty() else "json"


def formatter(fmt: str, project: str = "") -> logging.Formatter:
    return TextFormatter() if resolve_format(fmt) == "text" else JsonFormatter(project)


def configure_logging(level: str = "INFO", fmt: str = "auto", project: str = "") -> None:
    """Our loggers (``consumer.*``) write to stderr in ``fmt``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt, project))
    root = logging.getLogger("consumer")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def gunicorn_logconfig(
    level: str, fmt: str, project: str, routes: Mapping[str, list[str]] | None = None
) -> dict[str, Any]:
    """gunicorn's ``logconfig_dict``: its error and access lines, and any library's, in ``fmt``
    on stderr (gunicorn applies it after its own set-up, replacing its handlers). ``routes``:
    the ``decided`` and ``routine`` path patterns of ``SkipDecidedRequests``."""
    chosen = resolve_format(fmt)
    factory = (
        "consumer.observe.logs.JsonFormatter"
        if chosen == "json"
        else "consumer.observe.logs.TextFormatter"
    )
    options = {"project": project} if chosen == "json" else {}
    stderr = {"class": "logging.StreamHandler", "formatter": "line", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": {"()": factory, **options}},
        "filters": {
            "decided": {"()": "consumer.observe.logs.SkipDecidedRequests", **(routes or {})}
        },
        "handlers": {
            "stderr": stderr,
            "access": {**stderr, "filters": ["decided"]},
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["access"], "propagate": False},
        },
    }
