"""Helpers for the hook tests: run ``dsh-loop-brake hook HOST`` as the hosts do, read fixtures."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hooks"

#: Variables that change where the hook or the installer looks; never inherited by a test.
HOOK_ENV = (
    "DSH_HOME",
    "DSH_LOOP_BRAKE_MAX_REPEATS",
    "DSH_LOOP_BRAKE_STORE",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
)

#: Each host's fixtures, as the host sends them.
HOST_FIXTURES = {
    "claude-code": ("claude-code-bash.json", "claude-code-subagent-write.json"),
    "codex": ("codex-bash.json", "codex-subagent-apply-patch.json", "codex-mcp.json"),
    "gemini": ("gemini-shell.json", "gemini-mcp.json"),
}

CANARY = "sk-canary-7f3a9d1e-never-printed"


def fixture(name: str) -> dict[str, Any]:
    """A fixture event, parsed (a fresh copy each time)."""
    value: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return copy.deepcopy(value)


def hook_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a hook process: the test's own, the repository importable."""
    env = {key: value for key, value in os.environ.items() if key not in HOOK_ENV}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    if extra:
        env.update(extra)
    return env


def run_hook(
    host: str,
    event: dict[str, Any] | bytes | str,
    *args: str,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one hook call as a host does: the event on stdin, stdout and stderr captured."""
    if isinstance(event, dict):
        data = json.dumps(event).encode("utf-8")
    elif isinstance(event, str):
        data = event.encode("utf-8")
    else:
        data = event
    command = [sys.executable, "-m", "dsh_loop_brake", "hook", host, *args]
    if home is not None:
        command += ["--home", str(home)]
    return subprocess.run(
        command,
        input=data,
        capture_output=True,
        env=hook_env(env),
        cwd=cwd,
        timeout=120,
        check=False,
    )


def run_hooks_at_once(
    host: str, events: list[dict[str, Any]], home: Path
) -> list[subprocess.CompletedProcess[bytes]]:
    """One hook process per event, all started before any is fed: they race for the store, as
    the processes of a host's parallel tool calls do."""
    command = [sys.executable, "-m", "dsh_loop_brake", "hook", host, "--home", str(home)]
    processes = [
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=hook_env(),
        )
        for _ in events
    ]
    for process, event in zip(processes, events, strict=True):
        assert process.stdin is not None
        process.stdin.write(json.dumps(event).encode())  # small: never blocks on the pipe
        process.stdin.close()
        process.stdin = None  # fed: communicate() only reads
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    return done


def denial_of(host: str, done: subprocess.CompletedProcess[bytes]) -> str | None:
    """The denial message of a completed hook call, ``None`` when it allowed the call.

    Asserts the host's contract on the way: exit 0, nothing on stderr, stdout empty or exactly
    the host's deny JSON.
    """
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"", done.stderr
    if not done.stdout:
        return None
    decision = json.loads(done.stdout)
    if host == "gemini":
        assert set(decision) == {"decision", "reason"}
        assert decision["decision"] == "deny"
        reason: str = decision["reason"]
    else:
        assert decision == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": decision["hookSpecificOutput"][
                    "permissionDecisionReason"
                ],
            }
        }
        reason = decision["hookSpecificOutput"]["permissionDecisionReason"]
    assert isinstance(reason, str) and reason.strip()
    return reason


def failed_open(done: subprocess.CompletedProcess[bytes]) -> str:
    """The one stderr line of a hook call that could not judge (exit 1, empty stdout)."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == b""
    text = done.stderr.decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 1, text
    assert "Traceback" not in text
    assert text.startswith("dsh-loop-brake hook: ")
    return text


def write_patch(home: Path, text: str, profile: str = "default") -> Path:
    """Write the profile's ``cordis.patch.yml``."""
    path = home / "profiles" / profile / "cordis.patch.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def loop_brake_patch(config: str) -> str:
    """A patch file inserting the ``loop-brake`` row with ``config`` (flow YAML)."""
    return f"- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n      config: {config}\n"
