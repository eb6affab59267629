"""The one documented namespace: ``tickwork`` holds what users import, and no more."""

from __future__ import annotations

import re

import tickwork
from tests.conftest import ROOT


def test_every_public_name_is_there_and_the_list_stays_short() -> None:
    missing = [name for name in tickwork.__all__ if not hasattr(tickwork, name)]
    assert missing == []
    # 34: every workflow verb (chain, group, batch, graph, after) and what a handler may
    # return (Snooze) are at the front door; anything else goes to a sub-package
    assert len(tickwork.__all__) <= 34, "keep the front door small: add to a sub-package"


def test_the_readme_and_examples_import_from_tickwork() -> None:
    """User-facing code imports the core's public names from ``tickwork`` only."""
    texts = [ROOT / "README.md", *sorted((ROOT / "examples").rglob("*.py"))]
    old = re.compile(r"^from (scheduler|triggers|workers) import ", re.M)
    offenders = [
        str(path.relative_to(ROOT))
        for path in texts
        for match in old.finditer(path.read_text())
        if all(
            name.strip() in tickwork.__all__
            for name in path.read_text()[match.end() :].split("\n", 1)[0].split(",")
        )
    ]
    assert offenders == []
