"""Log output of the ``tickwork`` commands: text for people, or one JSON object per line
(``--log-format json``) for log pipelines. Lines about a message carry its fields
(message id, task, queue, key, attempt, lateness; run time when it finished), which the
worker passes as ``extra`` (``workers.holdings.log_fields``)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

#: the ``extra`` fields a JSON line carries when the record has them
FIELDS = ("message_id", "task", "queue", "key", "attempt", "lateness_ms", "run_ms")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, message, the message
    fields it has, and the traceback of an exception if one is logged."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if name in record.__dict__:
                line[name] = record.__dict__[name]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str, log_format: str = "text") -> None:
    """Send log records of ``level`` and above to stderr, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    logging.basicConfig(level=level.upper(), handlers=[handler])
