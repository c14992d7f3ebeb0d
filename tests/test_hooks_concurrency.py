"""Parallel tool calls start concurrent hook processes for one session: the counts stay exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hooks_support import HOOK_ENV, denial_of, fixture, hook_env, loop_brake_patch, write_patch


@pytest.fixture(autouse=True)
def _no_host_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in HOOK_ENV:
        monkeypatch.delenv(name, raising=False)


def _start(host: str, event: dict[str, object], home: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_loop_brake", "hook", host, "--home", str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=hook_env(),
    )
    return process


def _run_all(host: str, events: list[dict[str, object]], home: Path) -> list[str | None]:
    """Start one process per event, then feed them all at once (they race for the state)."""
    processes = [_start(host, event, home) for event in events]
    for process, event in zip(processes, events, strict=True):
        assert process.stdin is not None
        process.stdin.write(json.dumps(event).encode())  # small: never blocks on the pipe
        process.stdin.close()
        process.stdin = None  # fed: communicate() only reads
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        results.append(denial_of(host, done))
    return results


@pytest.mark.parametrize("round_", range(3))
def test_eight_identical_calls_at_once_deny_exactly_six(round_: int, tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    event["session_id"] = f"parallel-{round_}"
    results = _run_all("claude-code", [event] * 8, tmp_path)
    denied = [reason for reason in results if reason is not None]
    assert len(denied) == 6
    # Each count was handed out once: the denials carry counts 3 to 8, each exactly once.
    counts = sorted(int(reason.split(" called ")[1].split(" ")[0]) for reason in denied)
    assert counts == [3, 4, 5, 6, 7, 8]


def test_parallel_sessions_keep_their_own_counts(tmp_path: Path) -> None:
    events = []
    for session in ("one", "two", "three", "four"):
        event = fixture("codex-bash.json")
        event["session_id"] = session
        events += [event, event]
    assert _run_all("codex", events, tmp_path) == [None] * 8


def test_parallel_calls_with_the_circuit_breaker_in_the_same_transaction(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 100}")
        + "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      config: {duplicateLimit: 4, window: 10}\n",
    )
    events = []
    for attempt in range(8):
        event = fixture("gemini-shell.json")
        event["tool_input"]["description"] = f"attempt {attempt}"
        events.append(event)
    results = _run_all("gemini", events, tmp_path)
    # Three allowed calls fill the window to the limit; the other five are denied.
    assert sum(reason is None for reason in results) == 3
