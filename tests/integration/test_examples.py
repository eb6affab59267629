"""Every example runs (its enqueue side) against a fresh database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__")
APP_OF = {"spark_invoices": "examples.billing.tasks"}  # examples whose app lives elsewhere


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name: str, tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = {
        **clean_env,
        "TICKWORK_BACKEND": f"sqlite:///{tmp_path / 'ex.db'}",
        "PYSPARK_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [sys.executable, "-m", f"examples.{name}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "worker",
            "-A",
            APP_OF.get(name, f"examples.{name}"),
            "--duration",
            "2",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
