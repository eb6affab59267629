"""The pytest plugin as a user gets it: a fresh virtual environment that only
``pip install``s tickwork (and pytest), a project with no ``conftest.py``, and a test
that asks for the ``tickwork_isolated`` fixture and the ``tickwork`` marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

TASKS = """
from tickwork import App

app = App("sqlite:////nonexistent/never-opened.db")
sent: list[str] = []


@app.task
def welcome(email: str) -> None:
    sent.append(email)
"""

TEST = """
import pytest

from tasks import app, sent, welcome


def test_manual(tickwork_isolated):
    tw = tickwork_isolated(app)
    welcome.delay("ada@example.com")
    tw.assert_enqueued(welcome, args=["ada@example.com"])
    assert tw.drain().succeeded == 1 and sent == ["ada@example.com"]


@pytest.mark.tickwork(mode="inline")
def test_inline(tickwork_isolated):
    tickwork_isolated(app)
    welcome.delay("bob@example.com")
    assert sent[-1] == "bob@example.com"
"""


def test_a_fresh_environment_finds_the_fixture(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin/pip"), "install", "--quiet", str(ROOT), "pytest"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    project = tmp_path / "project"
    project.mkdir()
    (project / "tasks.py").write_text(TASKS)
    (project / "test_tasks.py").write_text(TEST)
    ran = subprocess.run(
        [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "2 passed" in ran.stdout
