"""The installed package, then ``dsh-loop-brake replay``: the README's main job.

The example transcripts must come from inside the installed package (package data in the wheel),
not from a source checkout, and the report must show the brake denying the stuck agent's calls.
The venv comes from conftest's ``installed_venv`` (built once per run); nothing is timed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import InstalledVenv


def _replay(venv: InstalledVenv, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        env=venv.env(cwd),
        cwd=cwd,
        timeout=600,
    )


def test_console_script_replays_the_shipped_examples_and_shows_a_denial(
    installed_venv: InstalledVenv, tmp_path: Path
) -> None:
    done = _replay(installed_venv, installed_venv.script, "replay", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "openai-research-stuck.json" in done.stdout
    assert "call 6: web_search (" in done.stdout
    assert "the brake would deny 12 calls in 2 sessions" in done.stdout
    # the examples were read from the installed package
    note = next(line for line in done.stderr.splitlines() if "example transcripts" in line)
    assert str(installed_venv.root) in note


def test_installed_examples_are_package_data(installed_venv: InstalledVenv, tmp_path: Path) -> None:
    done = _replay(
        installed_venv,
        installed_venv.python,
        "-m",
        "dsh_loop_brake",
        "replay",
        "--json",
        "--fail-on-denial",
        cwd=tmp_path,
    )
    assert done.returncode == 1  # --fail-on-denial: the stuck agents would be stopped
    report = json.loads(done.stdout)
    sources = {Path(session["source"]) for session in report["sessions"]}
    assert len(sources) == 5
    assert all(source.is_relative_to(installed_venv.root) for source in sources)
    assert all(source.parent.name == "examples" for source in sources)
    assert report["totals"]["sessionsWithDenials"] == 2
