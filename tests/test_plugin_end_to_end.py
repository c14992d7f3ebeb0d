"""End to end: install into a profile with the real command line, boot it, watch the brake deny."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake
from dsh_loop_brake.harness import Agent, Harness, ToolDefinition, ToolExecution

_ids = itertools.count(1)


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    return subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def first_denied_call(harness: Harness, limit: int = 12) -> int:
    """Make the same search call until the harness denies it; the 1-based index of that call."""
    ran: list[Any] = []
    harness.ctx.tools.register(ToolDefinition("search", lambda args, execution: ran.append(args)))
    agent = Agent("agent-e2e")

    async def loop() -> int:
        for index in range(1, limit + 1):
            result = await harness.execute(
                ToolExecution(f"call_{next(_ids)}", "search", {"q": "weather"}, agent)
            )
            if result.is_error:
                assert result.error is not None and result.error["code"] == "LOOP_BRAKE"
                assert len(ran) == index - 1  # the denied body never ran
                return index
        raise AssertionError("never denied")

    return asyncio.run(loop())


@pytest.fixture
def installed_home(tmp_path: Path) -> Path:
    home = tmp_path / "dsh-home"
    done = cli("install", "--profile", "default", home=home)
    assert done.returncode == 0, done.stderr
    return home


def test_installed_profile_denies_the_third_identical_call(installed_home: Path) -> None:
    harness = Harness.boot("default", home=installed_home)
    try:
        brake = harness.handle("loop-brake")
        assert isinstance(brake, LoopBrake)
        assert first_denied_call(harness) == 3
        assert brake.streak("agent-e2e") is not None
    finally:
        harness.dispose()


def test_a_patch_row_retunes_and_the_env_var_fills_in_when_it_is_gone(
    installed_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_patch = installed_home / "cordis.patch.yml"
    home_patch.write_text("- id: loop-brake\n  config:\n    maxRepeats: 5\n", encoding="utf-8")
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "4")  # the row wins while it is there

    harness = Harness.boot("default", home=installed_home)
    try:
        assert harness.handle("loop-brake").max_repeats == 5
        assert first_denied_call(harness) == 5
    finally:
        harness.dispose()

    home_patch.unlink()
    harness = Harness.boot("default", home=installed_home)
    try:
        assert harness.handle("loop-brake").max_repeats == 4
        assert first_denied_call(harness) == 4
    finally:
        harness.dispose()


def test_config_command_agrees_with_what_boot_applies(installed_home: Path) -> None:
    (installed_home / "cordis.patch.yml").write_text(
        "- id: loop-brake\n  config: {maxRepeats: 6}\n", encoding="utf-8"
    )
    shown = cli("config", "--profile", "default", "--json", home=installed_home)
    assert shown.returncode == 0, shown.stderr
    assert '"maxRepeats": 6' in shown.stdout

    harness = Harness.boot("default", home=installed_home)
    try:
        assert harness.handle("loop-brake").max_repeats == 6
    finally:
        harness.dispose()


def test_uninstall_removes_the_brake(installed_home: Path) -> None:
    done = cli("uninstall", "--profile", "default", home=installed_home)
    assert done.returncode == 0, done.stderr
    harness = Harness.boot("default", home=installed_home)
    try:
        with pytest.raises(KeyError):
            harness.handle("loop-brake")
    finally:
        harness.dispose()
