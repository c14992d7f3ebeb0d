"""Shared fixtures: every test runs with a clean environment and a temporary home."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

REPO_ROOT = Path(__file__).resolve().parent.parent

# A real redis-server for the store tests (fixtures redis_server, redis_url, make_redis_server).
pytest_plugins = ["_redis_server"]

# No timed tests: hypothesis's per-example deadline is a timing assertion, and on a shared
# machine a busy spell made examples of the reader fuzz tests overrun it (and fail as flaky).
settings.register_profile("dsh", deadline=None)
settings.load_profile("dsh")

# Variables that change what the brake or the harness does; never inherited from the developer.
_CONTROLLED = ("DSH_LOOP_BRAKE_MAX_REPEATS", "DSH_HOME")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No DSH_* variables from the developer's shell, and ``~`` is a fresh temporary directory."""
    for name in _CONTROLLED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """Threads for a host that runs tool bodies (or whole calls) off the event loop."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


@pytest.fixture
def dsh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$DSH_HOME`` (set in the environment) with no profiles yet."""
    home = tmp_path / "dsh-home"
    home.mkdir()
    monkeypatch.setenv("DSH_HOME", str(home))
    return home


@pytest.fixture
def cli_env() -> dict[str, str]:
    """The environment for a CLI subprocess: the test's own (already cleaned), repo importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["PYTHONIOENCODING"] = "utf-8"
    return env


RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def run_cli(cli_env: dict[str, str], tmp_path: Path) -> Iterator[RunCli]:
    """Run ``python -m dsh_loop_brake ARGS`` as a subprocess; returns the completed process."""

    def run(
        *args: str, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        merged = dict(cli_env)
        if env:
            merged.update(env)
        return subprocess.run(
            [sys.executable, "-m", "dsh_loop_brake", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=merged,
            cwd=tmp_path,
            input=stdin,
            timeout=120,
        )

    yield run
