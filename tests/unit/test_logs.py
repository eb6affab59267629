"""The CLI's log lines: the text formatter writes what logging's own writes."""

from __future__ import annotations

import logging

from tickwork.logs import TEXT_FORMAT, TextFormatter


def test_text_lines_are_logging_s_own_whatever_the_second() -> None:
    """The formatter keeps each second's text: lines within a second, across seconds,
    and back to an earlier second (another thread's older record) read as logging's."""
    ours, theirs = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    for created in (1_800_000_000.0, 1_800_000_000.999, 1_800_000_001.5, 1_799_999_999.25, 5.0):
        record = logging.LogRecord("tickwork", logging.INFO, __file__, 1, "done %s", ("x",), None)
        record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
        assert ours.format(record) == theirs.format(record), created
