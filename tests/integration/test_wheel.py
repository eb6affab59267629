"""The distribution as users get it: a wheel built from this checkout installs one import
package, ``tickwork``, and, installed (not editable) in a fresh virtual environment, runs
the README's quickstart and ``tickwork --version`` from a directory of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quickstart() -> str:
    """The README's quickstart, ``app.py``, as a reader copies it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the README has a quickstart"
    return found.group(1)


@pytest.mark.slow
def test_the_wheel_installs_one_package_that_runs_the_quickstart(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # no stale file of an earlier build
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = dist.glob("tickwork-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert tops == {"tickwork"}, "one top-level import package"
    assert "tickwork/scheduler/backends/redis/lua/claim.lua" in names, "package data too"

    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    # nothing of this checkout's environment: no PYTHONPATH, no editable install in sight
    clean = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path))}
    installed = subprocess.run(
        [str(bin_dir / "pip"), "install", str(wheel)],
        cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (bin_dir / "tickwork").exists(), installed.stdout + installed.stderr
    where = tmp_path / "project"
    where.mkdir()
    (where / "app.py").write_text(_quickstart())

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(bin_dir / command[0]), *command[1:]],
            cwd=where, env=clean, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        return done

    assert run("tickwork", "--version").stdout.startswith("tickwork, version ")
    run("python", "app.py")
    ran = run("tickwork", "worker", "-A", "app", "--duration", "3", "--log-level", "warning")
    assert "report for 42 pdf" in ran.stdout
    assert "report:42" in run("tickwork", "schedules", "-A", "app").stdout
    probe = "import importlib.util as u; print([u.find_spec(n) for n in ('scheduler', 'workers')])"
    assert run("python", "-c", probe).stdout.strip() == "[None, None]"
