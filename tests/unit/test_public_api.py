"""One documented namespace: ``tickwork`` holds what users import most, its documented
sub-namespaces the rest, and the installed distribution has no other import package."""

from __future__ import annotations

import ast
import importlib
import re

import tickwork
from tests.conftest import ROOT

#: where users import from: the front door and its documented sub-namespaces
DOCUMENTED = (
    "tickwork",
    "tickwork.triggers",
    "tickwork.workflows",
    "tickwork.events",
    "tickwork.errors",
    "tickwork.encryption",
    "tickwork.settings",
    "tickwork.testing",
    "tickwork.spark",
    "tickwork.fastapi",
    "tickwork.django",
    "tickwork.dashboard",
    "tickwork.exporter",
)
_CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_every_public_name_is_there_and_the_front_door_stays_small() -> None:
    missing = [name for name in tickwork.__all__ if not hasattr(tickwork, name)]
    assert missing == []
    assert len(tickwork.__all__) <= 30, "keep the front door small: add to a sub-namespace"
    assert len(set(tickwork.__all__)) == len(tickwork.__all__)


def test_each_documented_namespace_lists_names_it_has() -> None:
    for name in DOCUMENTED:
        module = importlib.import_module(name)
        listed = getattr(module, "__all__", [])
        assert [n for n in listed if not hasattr(module, n)] == [], name


def _user_code() -> list[tuple[str, str]]:
    """The README's, the docs' and the examples' Python, as (where, source)."""
    found = [(str(p.relative_to(ROOT)), p.read_text()) for p in (ROOT / "examples").rglob("*.py")]
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for index, block in enumerate(_CODE_BLOCK.findall(page.read_text())):
            found.append((f"{page.relative_to(ROOT)} block {index}", block))
    return found


def test_the_readme_the_docs_and_the_examples_import_only_documented_names() -> None:
    """What users copy imports from ``tickwork`` or a documented sub-namespace, never
    from the core's modules (``tickwork.scheduler...``, ``tickwork.workers...``)."""
    offenders = []
    for where, source in _user_code():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # a fragment (``...``) shown for reading
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            ours = module.split(".")[0] in ("tickwork", "scheduler", "workers", "triggers")
            documented = module in DOCUMENTED or any(
                module.startswith(f"{d}.") for d in DOCUMENTED if d != "tickwork"
            )
            if ours and not documented:
                offenders.append(f"{where}: {module}")
    assert offenders == []
