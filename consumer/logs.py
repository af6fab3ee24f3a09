"""One JSON object per log line, with the decision fields (messageId, key, outcome...) as keys.

The Authorization header and tokens never reach a log record: nothing here logs request headers.
As a second line of defence every line is passed through ``redact`` (bearer tokens, JWTs and
``token=`` query values), in case an exception message quotes one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# gunicorn's default access log writes the request line, query included, so a legacy ?token=
# would be logged. %(U)s is the path without the query.
ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)ss "%(a)s"'
SECRETS = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}"), r"\1[redacted]"),
    (re.compile(r"\b(Basic\s+)[A-Za-z0-9+/=]{8,}"), r"\1[redacted]"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), "[redacted-jwt]"),
    (re.compile(r"(?i)([?&]token=)[^&\s\"']+"), r"\1[redacted]"),
)


def redact(text: str) -> str:
    """Blank out credentials that may be quoted in a message or an exception."""
    for pattern, replacement in SECRETS:
        text = pattern.sub(replacement, text)
    return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str))


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("consumer")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
