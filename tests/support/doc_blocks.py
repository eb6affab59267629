"""The Python blocks of the docs, with the notes the docs' source gives them.

A block runs as it is shown, in the page's order, unless the HTML comment right above
its fence (invisible on the site and on GitHub) says otherwise:

- ``<!-- fragment: REASON -->``: not run (only parsed), for the reason given; a block
  that needs a Spark session, a Django project or a user's own package.
- ``<!-- setup:`` Python lines ``-->``: run first, unseen; the stand-ins a block names
  without defining (the tasks of an earlier section, a metrics client).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: a note right above a fence (its text holds no ``-->``, so it is the last comment)
_NOTE = re.compile(r"<!-- (fragment|setup):((?:(?!-->).)*)-->\s*\Z", re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    where: str  # page:line
    source: str
    fragment: str | None = None  # why it is not run
    setup: str = ""  # what runs, unseen, before it


def blocks(page: Path, language: str = "python") -> Iterator[Block]:
    """The blocks of ``page`` in ``language``, in order, with their notes."""
    text = page.read_text()
    for match in _FENCE.finditer(text):
        if match.group(1) != language:
            continue
        line = text.count("\n", 0, match.start()) + 1
        where = f"{page.relative_to(ROOT)}:{line}"
        note = _NOTE.search(text, 0, match.start())
        if note is None:
            yield Block(where, match.group(2))
        elif note.group(1) == "fragment":
            yield Block(where, match.group(2), fragment=note.group(2).strip())
        else:
            yield Block(where, match.group(2), setup=note.group(2).strip("\n"))


def all_blocks(language: str = "python") -> list[Block]:
    """Every page's blocks in ``language``."""
    return [block for page in PAGES for block in blocks(page, language)]
