"""The hook against a hostile profile cache and a host whose standard output is closed, broken
or in another encoding: it recomposes, or fails open with one line, and never hangs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hooks_support import (
    denial_of,
    failed_open,
    fixture,
    hook_env,
    loop_brake_patch,
    run_hook,
    write_patch,
)

from dsh_loop_brake.hooks._profile import CACHE_FORMAT


def _cache(home: Path) -> Path:
    return home / "state" / "hook-profile-default.json"


def _hook_command(host: str, home: Path) -> list[str]:
    return [sys.executable, "-m", "dsh_loop_brake", "hook", host, "--home", str(home)]


def _limit_memory() -> None:  # so a hook reading /dev/zero fails instead of eating the machine
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _run_bounded(
    host: str, event: dict[str, object], home: Path
) -> subprocess.CompletedProcess[bytes]:
    """One hook call that may neither hang nor grow without bound."""
    try:
        return subprocess.run(
            _hook_command(host, home),
            input=json.dumps(event).encode(),
            capture_output=True,
            env=hook_env(),
            timeout=30,
            check=False,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the hook hung on the cache")


def _assert_recomposed(home: Path) -> None:
    cache = _cache(home)
    assert not cache.is_symlink() and cache.is_file()
    assert json.loads(cache.read_bytes())["format"] == CACHE_FORMAT


def test_a_deeply_nested_cache_is_composed_again(tmp_path: Path) -> None:
    event = fixture("gemini-shell.json")
    for _ in range(2):
        assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is None
    _cache(tmp_path).write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is not None
    _assert_recomposed(tmp_path)


def test_an_oversized_cache_is_composed_again(tmp_path: Path) -> None:
    event = fixture("gemini-shell.json")
    for _ in range(2):
        assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is None
    cache = _cache(tmp_path)
    current = json.loads(cache.read_bytes())
    current["padding"] = "x" * (2 << 20)  # current in every field, but far larger than any cache
    cache.write_text(json.dumps(current), encoding="utf-8")
    assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is not None
    _assert_recomposed(tmp_path)
    assert "padding" not in json.loads(cache.read_bytes())


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink-to-a-good-cache"])
def test_a_cache_that_is_not_a_regular_file_is_composed_again(kind: str, tmp_path: Path) -> None:
    event = fixture("gemini-shell.json")
    for _ in range(2):
        assert denial_of("gemini", _run_bounded("gemini", event, tmp_path)) is None
    cache = _cache(tmp_path)
    if kind == "symlink-to-a-good-cache":
        good = tmp_path / "elsewhere.json"
        cache.rename(good)
        cache.symlink_to(good)
    else:
        cache.unlink()
        if kind == "fifo":
            os.mkfifo(cache)
        else:
            cache.symlink_to("/dev/zero")
    assert denial_of("gemini", _run_bounded("gemini", event, tmp_path)) is not None
    _assert_recomposed(tmp_path)


def test_a_same_size_edit_with_the_mtime_put_back_is_seen(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    patch = write_patch(tmp_path, loop_brake_patch("{maxRepeats: 5}"))
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    before = patch.stat()
    patch.write_text(loop_brake_patch("{maxRepeats: 2}"), encoding="utf-8")  # same size
    os.utime(patch, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = patch.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is not None and "limit 2)" in reason


def _with_stdout_closed(event: dict[str, object], home: Path) -> subprocess.CompletedProcess[bytes]:
    """``dsh-loop-brake hook claude-code >&-`` from sh, the event on standard input."""
    return subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *_hook_command("claude-code", home)],
        input=json.dumps(event).encode(),
        stderr=subprocess.PIPE,
        env=hook_env(),
        timeout=60,
        check=False,
    )


def test_with_stdout_closed_an_allowed_call_is_allowed_and_a_denied_one_says_so(
    tmp_path: Path,
) -> None:
    event = fixture("claude-code-bash.json")
    for _ in range(2):
        done = _with_stdout_closed(event, tmp_path)
        assert (done.returncode, done.stderr) == (0, b"")
    done = _with_stdout_closed(event, tmp_path)
    assert done.returncode == 1
    line = done.stderr.decode()
    assert line.startswith("dsh-loop-brake hook: ") and line.count("\n") == 1, line
    assert "could not be written" in line and "stdout closed" in line, line
    assert "internal error" not in line and "not judged" not in line, line


def test_a_denial_into_a_broken_pipe_says_the_answer_was_not_written(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    for _ in range(2):
        assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read the answer
    try:
        done = subprocess.run(
            _hook_command("claude-code", tmp_path),
            input=json.dumps(event).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=hook_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1
    line = done.stderr.decode()
    assert line.startswith("dsh-loop-brake hook: ") and line.count("\n") == 1, line
    assert "could not be written" in line and "stdout closed" in line, line
    assert "internal error" not in line and "not judged" not in line, line
    # The call was counted all the same: the next identical one is the fourth.
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is not None and "called 4 times in a row" in reason


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "cp500"])
def test_the_deny_json_is_ascii_whatever_the_stdout_encoding(encoding: str, tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    env = {"PYTHONIOENCODING": encoding}
    for _ in range(2):
        done = run_hook("claude-code", event, home=tmp_path, env=env)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    done = run_hook("claude-code", event, home=tmp_path, env=env)
    assert done.stdout.isascii() and done.stdout.startswith(b"{"), done.stdout[:40]
    assert done.stdout.endswith(b"}\n")
    assert denial_of("claude-code", done) is not None


def test_a_failure_to_judge_is_still_one_line_with_stdout_closed(tmp_path: Path) -> None:
    done = _with_stdout_closed({"not": "an event"}, tmp_path)
    assert done.returncode == 1
    failed_open(subprocess.CompletedProcess(done.args, 1, b"", done.stderr))
