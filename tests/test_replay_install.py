"""``pip install .`` into a fresh virtualenv, then ``dsh-loop-brake replay``: the README's main job.

The example transcripts must come from inside the installed package (package data in the wheel),
not from a source checkout, and the report must show the brake denying the stuck agent's calls.
Installing takes a while; nothing is timed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
_IGNORE = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", ".venv", ".*_cache", ".hypothesis", "build", "dist"
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DSH_")}
    env["HOME"] = str(home)
    return env


def _bin(environment: Path, name: str) -> Path:
    return environment / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv into which the project was installed with ``pip install <dir>``."""
    work = tmp_path_factory.mktemp("replay-install")
    env = _env(work)
    source = work / "source"  # a copy: the install may leave build artefacts behind
    shutil.copytree(REPO_ROOT, source, ignore=_IGNORE)
    environment = work / "venv"
    # --system-site-packages: pluggy, ruamel.yaml and hatchling come from the machine, so no
    # registry is needed; the package itself is only in the venv.
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", environment],
        check=True,
        env=env,
        timeout=600,
    )
    python = _bin(environment, "python")
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "--ignore-installed", "--disable-pip-version-check", "--quiet", str(source)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    shutil.rmtree(source)
    return environment


def test_console_script_replays_the_shipped_examples_and_shows_a_denial(
    installed: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(_bin(installed, "dsh-loop-brake")), "replay"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "openai-research-stuck.json" in done.stdout
    assert "call 6: web_search (" in done.stdout
    assert "the brake would deny 12 calls in 2 sessions" in done.stdout
    # the examples were read from the installed package
    note = next(line for line in done.stderr.splitlines() if "example transcripts" in line)
    assert str(installed) in note


def test_installed_examples_are_package_data(installed: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            str(_bin(installed, "python")),
            "-m",
            "dsh_loop_brake",
            "replay",
            "--json",
            "--fail-on-denial",
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 1  # --fail-on-denial: the stuck agents would be stopped
    report = json.loads(done.stdout)
    sources = {Path(session["source"]) for session in report["sessions"]}
    assert len(sources) == 5
    assert all(source.is_relative_to(installed) for source in sources)
    assert all(source.parent.name == "examples" for source in sources)
    assert report["totals"]["sessionsWithDenials"] == 2
