"""One JSON object per log line, with the decision fields (messageId, key, outcome...) as keys.

The Authorization header and tokens never reach a log record: nothing here logs request headers.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


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
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("consumer")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
