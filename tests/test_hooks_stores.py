"""The hook counts through the package's own brakes on the rows' stores: the default SQLite file
under the dsh home (both brakes in it), a row's own ``sqlite:`` file, a real Redis shared by
processes; a store it cannot open or use is the hook's own failure (exit 1, one line); the
circuit breaker's incident log; ``hook reset``."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hooks_support import (
    CANARY,
    denial_of,
    failed_open,
    fixture,
    hook_env,
    loop_brake_patch,
    run_hook,
    run_hooks_at_once,
    write_patch,
)

from dsh_loop_brake import call_hash

BREAKER_ROW = "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"


def _breaker_patch(config: str, loop: str = "{maxRepeats: 100}") -> str:
    return loop_brake_patch(loop) + BREAKER_ROW + f"      config: {config}\n"


def _run_at_once(host: str, events: list[dict[str, Any]], home: Path) -> list[str | None]:
    return [denial_of(host, done) for done in run_hooks_at_once(host, events, home)]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there once the probe is closed


# --- one SQLite file under the home, both brakes in it ----------------------------------------


def test_both_brakes_count_in_one_owner_only_file_under_the_home(tmp_path: Path) -> None:
    write_patch(tmp_path, _breaker_patch("{duplicateLimit: 3}", loop="{maxRepeats: 2}"))
    event = fixture("claude-code-bash.json")
    # The loop brake denies the 2nd identical call; a new description hides it from the loop
    # brake, and the circuit breaker, which ignores descriptions, denies the 3rd.
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is not None and reason.startswith("loop brake: ")
    event["tool_input"]["description"] = "once more"
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is None  # a denied call is not recorded by the breaker: this is its 2nd
    event["tool_input"]["description"] = "and again"
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is not None and reason.startswith("circuit breaker: this call to Bash")
    state = tmp_path / "state"
    assert sorted(path.name for path in state.iterdir() if path.suffix == ".sqlite3") == [
        "brakes.sqlite3"
    ]
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "brakes.sqlite3").stat().st_mode) == 0o600
    # The file is the stores' own: both brakes' tables, no table of the hook's.
    with sqlite3.connect(state / "brakes.sqlite3") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert {"streaks", "agents", "agent_window"} <= tables
    assert not any(name.startswith("provisional") for name in tables)


def test_the_denial_messages_are_the_brakes_own(tmp_path: Path) -> None:
    from dsh_loop_brake import CircuitBreakerError, LoopBrake, LoopBrakeError
    from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config

    event = fixture("gemini-shell.json")
    tool, arguments = event["tool_name"], event["tool_input"]
    config = {"duplicateLimit": 2, "denyMessage": "no {tool} #{count} of {limit}"}
    write_patch(tmp_path, _breaker_patch(json.dumps(config)))
    verdicts = [denial_of("gemini", run_hook("gemini", event, home=tmp_path)) for _ in range(2)]
    breaker = CircuitBreaker(resolve_config(config))
    breaker.check_call(tool, arguments, agent="s")
    with pytest.raises(CircuitBreakerError) as denied:
        breaker.check_call(tool, arguments, agent="s")
    assert verdicts == [None, str(denied.value)] == [None, "no run_shell_command #2 of 2"]

    other = tmp_path / "other"
    write_patch(other, loop_brake_patch("{maxRepeats: 2}"))
    verdicts = [denial_of("gemini", run_hook("gemini", event, home=other)) for _ in range(2)]
    brake = LoopBrake(2)
    brake.check(tool, arguments, session_id="s")
    with pytest.raises(LoopBrakeError) as raised:
        brake.check(tool, arguments, session_id="s")
    assert verdicts == [None, str(raised.value)]


def test_a_relative_sqlite_store_is_under_the_home(tmp_path: Path) -> None:
    write_patch(tmp_path, loop_brake_patch("{store: 'sqlite:counts/mine.sqlite3'}"))
    event = fixture("codex-bash.json")
    for _ in range(2):
        assert denial_of("codex", run_hook("codex", event, home=tmp_path, cwd=tmp_path)) is None
    assert denial_of("codex", run_hook("codex", event, home=tmp_path)) is not None
    store = tmp_path / "counts" / "mine.sqlite3"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    assert not (tmp_path / "state" / "brakes.sqlite3").exists()


def test_memory_from_the_environment_is_a_configuration_error(tmp_path: Path) -> None:
    env = {"DSH_LOOP_BRAKE_STORE": "memory:"}
    line = failed_open(
        run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path, env=env)
    )
    assert "DSH_LOOP_BRAKE_STORE" in line and "keeps nothing between the hook's processes" in line


def test_a_bad_store_url_in_the_row_is_located_at_its_file_and_line(tmp_path: Path) -> None:
    patch = write_patch(tmp_path, loop_brake_patch("{store: 'postgres://db/x'}"))
    line = failed_open(run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path))
    assert f"{patch}:4:" in line and "unknown store scheme" in line


# --- a store the hook cannot use: exit 1, one line, nothing on stdout -------------------------


def test_an_unreachable_redis_store_fails_open_with_its_password_hidden(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    url = f"redis://:{CANARY}@127.0.0.1:{_closed_port()}/0"
    env = {"DSH_LOOP_BRAKE_STORE": url}
    done = run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path, env=env)
    line = failed_open(done)
    assert CANARY not in line and ":***@127.0.0.1" in line
    assert "DSH_LOOP_BRAKE_STORE" in line
    # The same from a row (composing reaches the store too, and must hide it the same way).
    write_patch(tmp_path, loop_brake_patch(json.dumps({"store": url})))
    done = run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path)
    assert CANARY.encode() not in done.stdout + done.stderr
    failed_open(done)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "cordis.patch.yml":  # where the user wrote it
            assert CANARY.encode() not in path.read_bytes(), path


def test_a_state_file_locked_by_another_process_fails_open_in_one_line(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    event["tool_input"]["env"] = {"TOKEN": CANARY}
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    state = tmp_path / "state" / "brakes.sqlite3"
    holder = sqlite3.connect(state, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # another writer holds the file past the 2 s wait
        done = run_hook("claude-code", event, home=tmp_path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    line = failed_open(done)
    assert CANARY not in line
    assert f"the store sqlite:{state} failed (StoreError" in line
    assert "nothing was counted" in line
    # Not counted: the next call is the streak's 2nd, allowed; the 3rd is denied.
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is not None


def test_a_store_file_of_another_program_fails_open_and_is_left_alone(tmp_path: Path) -> None:
    state = tmp_path / "state" / "brakes.sqlite3"
    state.parent.mkdir(parents=True)
    with sqlite3.connect(state) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = state.read_bytes()
    line = failed_open(run_hook("gemini", fixture("gemini-shell.json"), home=tmp_path))
    assert f"sqlite:{state}" in line and "another program" in line
    assert state.read_bytes() == before


# --- many processes at once -------------------------------------------------------------------


@pytest.mark.parametrize("round_", range(2))
def test_a_redis_store_counts_one_session_across_processes(
    round_: int, redis_url: str, tmp_path: Path
) -> None:
    write_patch(tmp_path, loop_brake_patch(json.dumps({"store": redis_url})))
    event = fixture("codex-bash.json")
    event["session_id"] = f"fleet-{round_}"
    verdicts = _run_at_once("codex", [event] * 8, tmp_path)
    denied = sorted(
        int(reason.split(" called ")[1].split(" ")[0]) for reason in verdicts if reason is not None
    )
    assert denied == [3, 4, 5, 6, 7, 8]
    # Nothing of the session in a file: the counts are in Redis.
    assert not (tmp_path / "state" / "brakes.sqlite3").exists()


def test_a_redis_store_is_shared_by_two_homes_as_by_two_machines(
    redis_url: str, tmp_path: Path
) -> None:
    event = fixture("gemini-shell.json")
    homes = [tmp_path / "runner-1", tmp_path / "runner-2"]
    for home in homes:
        write_patch(home, _breaker_patch(json.dumps({"duplicateLimit": 3, "store": redis_url})))
    verdicts = []
    for number in range(3):
        event["tool_input"]["description"] = f"try {number}"
        verdicts.append(denial_of("gemini", run_hook("gemini", event, home=homes[number % 2])))
    assert verdicts[:2] == [None, None]
    assert verdicts[2] is not None and "(count 3, limit 3)" in verdicts[2]


# --- the circuit breaker's incident log -------------------------------------------------------


def test_the_incident_log_is_written_under_the_home(tmp_path: Path) -> None:
    write_patch(tmp_path, _breaker_patch("{duplicateLimit: 2, incidentLog: logs/incidents.jsonl}"))
    (tmp_path / "logs").mkdir()
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    event = fixture("claude-code-bash.json")
    event["tool_input"]["token"] = CANARY
    verdicts = []
    for attempt in range(3):
        event["tool_input"]["description"] = f"attempt {attempt}"
        done = run_hook("claude-code", event, home=tmp_path, cwd=elsewhere)
        verdicts.append(denial_of("claude-code", done))
    assert verdicts[0] is None and verdicts[1] is not None and verdicts[2] is not None
    log = tmp_path / "logs" / "incidents.jsonl"
    lines = log.read_text(encoding="ascii").splitlines()
    assert len(lines) == 1  # the first denial of its kind only
    incident = json.loads(lines[0])
    assert {k: incident[k] for k in ("kind", "tool", "count", "limit", "agent")} == {
        "kind": "duplicate",
        "tool": "Bash",
        "count": 2,
        "limit": 2,
        "agent": event["session_id"],
    }
    assert CANARY not in log.read_text(encoding="ascii")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert not list(elsewhere.iterdir())  # nothing where the host ran the hook


def test_an_incident_log_that_is_a_symlink_is_refused_and_the_denial_stands(
    tmp_path: Path,
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    os.symlink(target, tmp_path / "incidents.jsonl")
    write_patch(tmp_path, _breaker_patch("{duplicateLimit: 2, incidentLog: incidents.jsonl}"))
    assert denial_of("codex", run_hook("codex", fixture("codex-bash.json"), home=tmp_path)) is None
    done = run_hook("codex", fixture("codex-bash.json"), home=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)
    assert target.read_text(encoding="utf-8") == "keep me\n"
    # The breaker says so once, in one line (a warning, not a failure: the call was judged).
    assert done.stderr.count(b"\n") == 1 and b"symbolic link" in done.stderr
    assert b"Traceback" not in done.stderr


# --- hook reset -------------------------------------------------------------------------------


def _reset(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "hook", "reset", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=hook_env(),
        timeout=120,
        check=False,
    )


def test_reset_forgets_one_sessions_streak_or_everything(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    other = dict(event, session_id="another")
    for current in (event, event, other, other):
        assert denial_of("claude-code", run_hook("claude-code", current, home=tmp_path)) is None
    done = _reset(tmp_path, "--session", event["session_id"])
    assert done.returncode == 0, done.stderr
    assert "its streak was 2" in done.stdout and "sqlite:" in done.stdout
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    assert denial_of("claude-code", run_hook("claude-code", other, home=tmp_path)) is not None
    done = _reset(tmp_path)
    assert done.returncode == 0 and "forgot every session" in done.stdout
    assert denial_of("claude-code", run_hook("claude-code", other, home=tmp_path)) is None


def test_reset_of_one_session_says_the_breaker_keeps_its_state(tmp_path: Path) -> None:
    write_patch(tmp_path, _breaker_patch("{duplicateLimit: 2}"))
    event = fixture("claude-code-bash.json")
    for attempt in range(2):
        event["tool_input"]["description"] = f"attempt {attempt}"
        run_hook("claude-code", event, home=tmp_path)
    done = _reset(tmp_path, "--session", event["session_id"])
    assert done.returncode == 0 and "circuit breaker's state is kept" in done.stdout
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is not None
    assert _reset(tmp_path).returncode == 0
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None


def test_the_hash_in_the_message_is_the_calls(tmp_path: Path) -> None:
    event = fixture("codex-mcp.json")
    reason = None
    for _ in range(3):
        reason = denial_of("codex", run_hook("codex", event, home=tmp_path))
    assert reason is not None
    assert call_hash(event["tool_name"], event["tool_input"])[:12] in reason
