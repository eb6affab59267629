"""mkdocs hooks for the docs site (``make docs``): the pages link to the repository's
examples and benchmark notes (``../examples/chains.py``, ``../bench/NOTES.md``), which
live beside ``docs/``; the site carries copies of them and the links are pointed there,
so that strict mode still fails a link to a file that does not exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
#: the folders beside docs/ whose files the pages link to, and the files carried
_CARRIED = ("examples/*.py", "examples/node/*.mjs", "bench/NOTES.md", "bench/results/*.json")
_OUTSIDE = re.compile(r"\]\(\.\./(examples|bench)/")
_BACK_TO_DOCS = re.compile(r"\]\(\.\./docs/")


def on_files(files: Files, config: Any) -> Files:
    for pattern in _CARRIED:
        for path in sorted(ROOT.glob(pattern)):
            relative = path.relative_to(ROOT).as_posix()
            files.append(
                File(relative, str(ROOT), config["site_dir"], config["use_directory_urls"])
            )
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    if page.file.src_uri.startswith("bench/"):  # a carried page: docs/ is one level up
        return _BACK_TO_DOCS.sub("](../", markdown)
    return _OUTSIDE.sub(r"](\1/", markdown)
