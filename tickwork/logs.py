"""Log output of the ``tickwork`` commands: text for people, or one JSON object per line
(``--log-format json``) for log pipelines. Lines about a message carry its fields
(message id, task, queue, key, attempt, lateness; run time when it finished), which the
worker passes as ``extra`` (``workers.holdings.log_fields``)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import TextIO

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


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``, with each second's date and time formatted once (a worker at
    ``info`` logs two lines a run, and ``strftime`` of the local time was a fifth of
    formatting one)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")  # the second last formatted, and its text

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return f"{text},{int(record.msecs):03d}"  # as logging.Formatter writes it


class BufferedHandler(logging.StreamHandler[TextIO]):
    """Writes records to a buffered stream and flushes it every ``FLUSH_S``, and at once
    for a warning or worse (a worker logs two lines a run at ``info``: a flush, so a
    write to stderr, for each cost a tenth of a one-``INCR`` task's rate). A process
    killed with SIGKILL may lose its last ``FLUSH_S`` of lines below warning."""

    FLUSH_S = 0.1

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
            if record.levelno >= logging.WARNING:
                self.flush()
        except Exception:
            self.handleError(record)

    def start(self) -> None:
        """Flush every ``FLUSH_S`` from now on (a daemon thread)."""
        threading.Thread(target=self._flush_often, name="tickwork-logs", daemon=True).start()

    def _flush_often(self) -> None:
        while True:
            time.sleep(self.FLUSH_S)
            self.flush()


def configure(level: str, log_format: str = "text") -> None:
    """Send log records of ``level`` and above to stderr, as text or JSON lines, through
    a buffer flushed every 0.1 s (at once for warnings and worse)."""
    root = logging.getLogger()
    try:  # a buffered writer of its own on stderr's file (stderr flushes every line)
        stream: TextIO = open(  # noqa: SIM115 - it lives as long as the process
            sys.stderr.fileno(),
            "w",
            buffering=1 << 16,
            encoding=sys.stderr.encoding,
            errors="backslashreplace",
            closefd=False,
        )
        handler: logging.StreamHandler[TextIO] = BufferedHandler(stream)
    except (AttributeError, OSError, ValueError):  # stderr replaced by one with no file
        handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else TextFormatter()
    handler.setFormatter(formatter)
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if isinstance(handler, BufferedHandler) and handler in root.handlers:
        handler.start()
