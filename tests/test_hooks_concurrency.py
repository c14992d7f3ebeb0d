"""Parallel tool calls start concurrent hook processes for one session: the counts stay exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from hooks_support import (
    denial_of,
    fixture,
    loop_brake_patch,
    run_hooks_at_once,
    write_patch,
)


def _run_all(host: str, events: list[dict[str, object]], home: Path) -> list[str | None]:
    return [denial_of(host, done) for done in run_hooks_at_once(host, events, home)]


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


@pytest.mark.parametrize(
    ("host", "name"), [("claude-code", "claude-code-bash.json"), ("gemini", "gemini-shell.json")]
)
def test_eight_calls_at_once_through_the_circuit_breaker_deny_exactly_six(
    host: str, name: str, tmp_path: Path
) -> None:
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 100}")
        + "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      config: {duplicateLimit: 3, window: 10}\n",
    )
    events = []
    for attempt in range(8):  # the same command, a new description each time
        event = fixture(name)
        event["tool_input"]["description"] = f"attempt {attempt}"
        events.append(event)
    denied = [reason for reason in _run_all(host, events, tmp_path) if reason is not None]
    # Two allowed calls fill the window to the limit; the other six are denied, each at count 3
    # (a denied call is neither recorded nor counted).
    assert len(denied) == 6
    assert all("(count 3, limit 3)" in reason for reason in denied)
