"""Shell completion, as a user turns it on: ``eval "$(tickwork completion bash)"`` in a real
bash, then the completion function bash calls on <Tab>, through the installed command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.served import console_script, run_tickwork


def _complete(tmp_path: Path, env: dict[str, str], *words: str) -> list[str]:
    script = (
        'eval "$(tickwork completion bash)"\n'
        f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
        "_tickwork_completion tickwork\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_and_options(tmp_path: Path, clean_env: dict[str, str]) -> None:
    bin_dir = str(Path(console_script()).parent)
    env = {**clean_env, "PATH": f"{bin_dir}{os.pathsep}{clean_env.get('PATH', '')}"}
    assert _complete(tmp_path, env, "tickwork", "wor") == ["worker", "workers", "workflow"]
    assert "--pool" in _complete(tmp_path, env, "tickwork", "worker", "--po")
    assert _complete(tmp_path, env, "tickwork", "worker", "--pool", "") == ["process", "thread"]
    assert "pause" in _complete(tmp_path, env, "tickwork", "queues", "")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_each_shell_gets_its_script(shell: str, tmp_path: Path, clean_env: dict[str, str]) -> None:
    done = run_tickwork(tmp_path, clean_env, "completion", shell)
    assert done.returncode == 0, done.stderr
    assert "_TICKWORK_COMPLETE" in done.stdout and f"{shell}_complete" in done.stdout
