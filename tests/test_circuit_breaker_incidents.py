"""The incident log: one JSON line per kind per agent, safe to share, never a reason to fail."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
from dsh_loop_brake.harness import Agent, ToolExecution

TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")


def breaker(log: Path | str, **config: Any) -> CircuitBreaker:
    return CircuitBreaker(resolve_config({"incidentLog": str(log), **config}))


def call(b: CircuitBreaker, name: str, arguments: Any, agent: Any = None) -> str | None:
    return b.check(ToolExecution("c", name, arguments, agent))


def lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="ascii")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


# --- what is written ------------------------------------------------------------------------


def test_one_line_on_the_first_denial_of_each_kind_per_agent(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=2, window=2, maxCallsPerAgent=3)
    first, second = Agent("agent-007"), Agent("agent-008")
    assert call(b, "bash", {"command": "ls"}, first) is None
    assert not log.exists()  # nothing until something is denied
    for _ in range(5):
        assert call(b, "bash", {"command": "ls"}, first) is not None
    assert call(b, "read", {"path": "a"}, first) is None
    assert call(b, "read", {"path": "b"}, first) is None
    for i in range(5):
        assert call(b, "search", {"q": i}, first) is not None  # the cap
    assert call(b, "bash", {"command": "ls"}, second) is None
    assert call(b, "bash", {"command": "ls"}, second) is not None

    records = lines(log)
    assert [(r["kind"], r["agent"], r["tool"]) for r in records] == [
        ("duplicate", "agent-007", "bash"),
        ("cap", "agent-007", "search"),
        ("duplicate", "agent-008", "bash"),
    ]
    for record in records:
        assert list(record) == ["time", "kind", "tool", "count", "limit", "agent"]
        assert TIME.match(record["time"])
    assert (records[0]["count"], records[0]["limit"]) == (2, 2)
    assert (records[1]["count"], records[1]["limit"]) == (3, 3)


def test_the_seeds_example_line(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, maxCallsPerAgent=300)
    agent = Agent("agent-007")
    for i in range(301):
        call(b, "bash", {"command": f"step {i}"}, agent)
    (record,) = lines(log)
    record["time"] = "2026-09-01T23:10:07Z"
    assert json.dumps(record, separators=(",", ":")) == (
        '{"time":"2026-09-01T23:10:07Z","kind":"cap","tool":"bash","count":300,"limit":300,'
        '"agent":"agent-007"}'
    )


class Shapeless:
    """An agent of an unknown shape: no ``id`` field, its identity under another name."""

    def __init__(self) -> None:
        self.uuid = "uuid-VALUE-must-not-appear"
        self.name = "NAME-VALUE-must-not-appear"
        self._session = "SESSION-VALUE-must-not-appear"


@pytest.mark.parametrize(
    ("agent", "keys"),
    [
        (Shapeless(), ["_session", "name", "uuid"]),
        ({"uuid": "uuid-VALUE-must-not-appear", "role": "NAME-VALUE"}, ["role", "uuid"]),
        (Agent(id=""), ["id"]),
        (Agent(id=None), ["id"]),  # type: ignore[arg-type]
    ],
    ids=["object", "mapping", "empty-id", "null-id"],
)
def test_an_agent_without_a_recognisable_id_is_described_by_its_keys(
    tmp_path: Path, agent: Any, keys: list[str]
) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=1)
    assert call(b, "bash", {}, agent) is not None
    (record,) = lines(log)
    assert record["agentKeys"] == keys
    assert "agent" not in record
    assert "VALUE" not in log.read_text()


def test_an_integer_id_is_written_as_a_string_and_no_agent_as_null(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=1)
    call(b, "bash", {}, {"id": 42})
    call(b, "bash", {}, None)
    assert [r["agent"] for r in lines(log)] == ["42", None]


def test_no_argument_value_is_ever_written(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=2, window=2, maxCallsPerAgent=2)
    secret = {"token": "sk-SECRET-123", "path": "/home/me/.ssh/id_rsa", "description": "SECRET"}
    for agent in (Agent("a"), Agent("b")):
        for _ in range(3):
            call(b, "upload", secret, agent)
        assert call(b, "upload", {"other": "sk-SECRET-456"}, agent) is None
        assert call(b, "upload", {"other": "sk-SECRET-789"}, agent) is not None  # the cap
    text = log.read_text()
    assert len(lines(log)) == 4
    for fragment in ("SECRET", "ssh", "token", "path", "other"):
        assert fragment not in text


@pytest.mark.parametrize("name", ['evil\n{"kind":"forged"}', "\u2028x\r", "\ud800", "é"])
def test_a_hostile_tool_name_cannot_forge_a_line(tmp_path: Path, name: str) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=1, exempt=[])
    call(b, name, {}, Agent("a"))
    raw = log.read_bytes()
    assert raw.count(b"\n") == 1 and raw.isascii()
    (record,) = lines(log)
    assert record["tool"] == name and record["kind"] == "duplicate"


# --- how it is written ------------------------------------------------------------------------


def test_concurrent_appends_from_many_threads_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=1, exempt=[])
    # Long lines: a buffered writer would split them into several writes that can interleave.
    tool = "t" * 20_000
    threads_count, agents_each = 8, 25
    start = threading.Barrier(threads_count)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def worker(n: int) -> None:
        agents = [Agent(f"agent-{n}-{i}") for i in range(agents_each)]
        start.wait()
        for agent in agents:
            assert call(b, tool, {"n": n}, agent) is not None

    try:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)
    records = lines(log)
    assert len(records) == threads_count * agents_each
    assert {r["agent"] for r in records} == {
        f"agent-{n}-{i}" for n in range(threads_count) for i in range(agents_each)
    }
    assert all(r["tool"] == tool for r in records)


def test_each_line_is_one_write_on_an_append_only_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "incidents.jsonl"
    b = breaker(log, duplicateLimit=1, exempt=[])
    opened: list[tuple[int, int]] = []
    writes: list[bytes] = []
    real_open, real_write = os.open, os.write

    def spy_open(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        fd = real_open(path, flags, mode, **kw)
        if str(path) == str(log):
            opened.append((fd, flags))
        return fd

    def spy_write(fd: int, data: bytes) -> int:
        if any(fd == o for o, _ in opened):
            writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "write", spy_write)
    call(b, "bash", {}, Agent("a"))
    call(b, "b" * 50_000, {}, Agent("b"))  # a line far longer than any write buffer
    assert len(opened) == 2 and all(flags & os.O_APPEND for _, flags in opened)
    assert len(writes) == 2 and all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes)
    assert b"".join(writes) == log.read_bytes()


def test_the_file_is_created_owner_only(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    previous = os.umask(0)
    try:
        call(breaker(log, duplicateLimit=1), "bash", {}, Agent("a"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_an_existing_file_is_appended_to_not_truncated(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    log.write_text('{"earlier":"line"}\n')
    call(breaker(log, duplicateLimit=1), "bash", {}, Agent("a"))
    call(breaker(log, duplicateLimit=1), "bash", {}, Agent("a"))  # a fresh breaker: a new run
    records = lines(log)
    assert records[0] == {"earlier": "line"} and len(records) == 3


@pytest.mark.parametrize(
    "where",
    ["directory", "inside-a-file", "missing-directory", "nul-free-but-too-long"],
)
def test_an_unwritable_path_never_affects_the_guard(
    tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    paths = {
        "directory": tmp_path,
        "inside-a-file": tmp_path / "file.txt" / "incidents.jsonl",
        "missing-directory": tmp_path / "no" / "such" / "dir" / "incidents.jsonl",
        "nul-free-but-too-long": tmp_path / ("x" * 5000),
    }
    (tmp_path / "file.txt").write_text("")
    logged = breaker(paths[where], duplicateLimit=2, window=4, maxCallsPerAgent=4)
    plain = CircuitBreaker(
        resolve_config({"duplicateLimit": 2, "window": 4, "maxCallsPerAgent": 4})
    )
    sequence = [("bash", {"c": 1}), ("bash", {"c": 1}), ("bash", {"c": 2})] * 3
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for agent in (Agent("a"), Agent("b")):
            for name, arguments in sequence:
                assert call(logged, name, arguments, agent) == call(plain, name, arguments, agent)
    warnings = [r for r in caplog.records if "incident log" in r.getMessage()]
    assert len(warnings) == 1  # said once, not on every denial
    assert "denials still apply" in warnings[0].getMessage()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
@pytest.mark.parametrize("target", ["existing", "dangling"])
def test_a_symbolic_link_at_the_path_is_refused_and_the_guard_goes_on(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A link planted in a shared directory must not make the guard append to another file.
    victim = tmp_path / "victim.txt"
    if target == "existing":
        victim.write_text("precious\n")
    log = tmp_path / "incidents.jsonl"
    log.symlink_to(victim)
    logged = breaker(log, duplicateLimit=1)
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for agent in (Agent("a"), Agent("b"), Agent("c")):  # three first denials, three lines due
            assert call(logged, "bash", {}, agent) is not None
        again = breaker(log, duplicateLimit=1)
        assert call(again, "bash", {}, Agent("d")) is not None
    if target == "existing":
        assert victim.read_text() == "precious\n"
    else:
        assert not victim.exists()
    assert log.is_symlink()
    warnings = [r.getMessage() for r in caplog.records if "incident log" in r.getMessage()]
    assert len(warnings) == 2  # one per breaker
    assert all("symbolic link" in w and "denials still apply" in w for w in warnings)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_a_link_in_a_parent_directory_is_followed(tmp_path: Path) -> None:
    # Only the log's own name is refused as a link; directories on the way are the user's.
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "logs").symlink_to(real)
    call(breaker(tmp_path / "logs" / "incidents.jsonl", duplicateLimit=1), "bash", {})
    assert len(lines(real / "incidents.jsonl")) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_nobody_reads_never_blocks_the_guard(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Opening a FIFO for writing waits for a reader: the guard, and the tool call, would hang.
    fifo = tmp_path / "incidents.fifo"
    os.mkfifo(fifo)
    verdicts: list[str | None] = []
    judge = threading.Thread(
        target=lambda: verdicts.append(call(breaker(fifo, duplicateLimit=1), "bash", {})),
        daemon=True,
    )
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        judge.start()
        judge.join(timeout=10)  # a hang detector, not a speed limit
        hung = judge.is_alive()
        if hung:  # let the stuck open() finish, so the thread ends with the test
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            judge.join(timeout=30)
    assert not hung, "the guard blocked on a named pipe"
    assert verdicts and verdicts[0] is not None and "denied" in verdicts[0]
    assert any("incident log" in r.getMessage() for r in caplog.records)


def test_without_an_incident_log_the_guard_touches_no_file(tmp_path: Path) -> None:
    events: list[str] = []
    recording = threading.Event()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if recording.is_set() and event in {
            "open",
            "os.open",
            "socket.connect",
            "subprocess.Popen",
        }:
            events.append(event)

    sys.addaudithook(hook)  # cannot be removed: inert unless recording
    b = CircuitBreaker(resolve_config({"duplicateLimit": 2, "window": 2, "maxCallsPerAgent": 5}))
    recording.set()
    try:
        for i in range(20):
            call(b, "bash", {"c": i % 2}, Agent("a"))
            call(b, "bash", {"c": 1}, None)
    finally:
        recording.clear()
    assert events == []
