"""The core does no I/O while checking, denying and failing open (SPEC §2, §7 security).

Audit hooks cannot be removed, so this module installs one hook, once, that records events only
while ``_recording`` is set for the current context. Any event that opens a file or a socket,
starts a process or imports a module (imports read files) counts as I/O.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dsh_loop_brake import (
    LoopBrake,
    LoopBrakeError,
    call_hash,
    canonical_json,
    decorate_tool,
    normalize_max_repeats,
    resolve_max_repeats,
    wrap_execute,
)

_recording: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "dsh_loop_brake_audit", default=None
)

_IO_EVENTS = (
    "open",
    "os.",
    "socket.",
    "subprocess.",
    "shutil.",
    "import",
    "ctypes.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "webbrowser.",
    "pty.",
    "mmap.",
    "glob.",
    "tempfile.",
    "exec",
    "compile",
)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    events = _recording.get()
    if events is not None and event.startswith(_IO_EVENTS):
        events.append(event)


sys.addaudithook(_hook)


@contextmanager
def no_io() -> Iterator[list[str]]:
    events: list[str] = []
    token = _recording.set(events)
    try:
        yield events
    finally:
        _recording.reset(token)
    assert events == [], f"the core did I/O: {sorted(set(events))}"


def test_the_hook_sees_io_when_it_happens(tmp_path: Any) -> None:
    # The instrument itself must be able to fail.
    events: list[str] = []
    token = _recording.set(events)
    try:
        (tmp_path / "probe.txt").write_text("x")
    finally:
        _recording.reset(token)
    assert "open" in events


ODD_ARGS: list[Any] = [
    {"q": "weather"},
    {"text": "caf\u00e9 \U0001f600 \ud800", "keys": {"\U0001f600": 1, "\uffff": 2}},
    {"floats": [1.0, -0.0, 1e21, 1e-7, float("nan"), 5e-324], "big": 2**70},
    [[[[{"deep": True}]]]],
]


def test_checking_and_denying_do_no_io() -> None:
    brake = LoopBrake(2)
    with no_io():
        for args in ODD_ARGS:
            for session in ("a", "b"):
                assert brake.check("tool", args, session_id=session) == 1
                with pytest.raises(LoopBrakeError) as denied:
                    brake.check("tool", args, session_id=session)
                str(denied.value)
                repr(denied.value)
            call_hash("tool", args)
            canonical_json(args)
        nested: Any = 1
        for _ in range(3_000):
            nested = [nested]
        brake.check("deep", nested, session_id="c")
        brake.streak("a")
        len(brake)
        brake.reset("a")
        brake.reset()


def test_failing_open_does_no_io(caplog: pytest.LogCaptureFixture) -> None:
    brake = LoopBrake(2)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"), no_io():
        for args in [{"when": datetime.date(2026, 1, 1)}, {1: 2}, cyclic, {b"k": 1}, {"s": {1}}]:
            assert brake.check("tool", args) == 0
        with pytest.raises(TypeError):
            canonical_json(object())
    assert len(caplog.records) == 1


def test_config_validation_does_no_io() -> None:
    with no_io():
        assert resolve_max_repeats({"maxRepeats": "4"}, {}) == 4
        assert resolve_max_repeats(None, {"DSH_LOOP_BRAKE_MAX_REPEATS": "5"}) == 5
        with pytest.raises(ValueError):
            normalize_max_repeats("zero")
        with pytest.raises(ValueError):
            resolve_max_repeats({"maxRepeat": 3}, {})


def test_wrapped_tools_do_no_io_sync_and_async() -> None:
    brake = LoopBrake(2)

    async def fetch(args: Any, execution: Any = None) -> str:
        return "ok"

    def read(args: Any, execution: Any = None) -> str:
        return "ok"

    tool = decorate_tool({"name": "read", "execute": read}, brake)
    braked_fetch = wrap_execute(fetch, brake, tool="fetch")

    async def scenario() -> None:
        with no_io():
            assert await braked_fetch({"u": 1}, {"agent": {"id": "x"}}) == "ok"
            with pytest.raises(LoopBrakeError):
                await braked_fetch({"u": 1}, {"agent": {"id": "x"}})
            assert tool["execute"]({"p": "/etc/hosts"}) == "ok"
            with pytest.raises(LoopBrakeError):
                tool["execute"]({"p": "/etc/hosts"})

    asyncio.run(scenario())


_FRESH_INTERPRETER = r"""
import logging  # a host that logs has it; the brake's first warning imports it otherwise
import sys
from dsh_loop_brake import loop_brake as core

events = []
IO = {io_events!r}
sys.addaudithook(lambda event, args: events.append(event) if event.startswith(IO) else None)

brake = core.LoopBrake(2)
cyclic = []
cyclic.append(cyclic)
for args in (
    {{"q": "weather", "n": 1.5, "t": 1.0, "i": 2**80}},
    {{"\U0001f600": "\ud83d\ude00 \ud800", "\uffff": [-0.0, 1e21, 1e-7, float("nan")]}},
    {{"a": b"bytes"}},
    {{1: "int key"}},
    cyclic,
):
    for _ in range(3):
        try:
            brake.check("tool", args)
        except core.LoopBrakeError as error:
            str(error)
core.resolve_max_repeats({{"maxRepeats": "3"}}, {{}})
print(sorted(set(events)))
"""


def test_a_fresh_interpreter_imports_nothing_and_opens_nothing_while_checking() -> None:
    # In a fresh interpreter nothing has been loaded lazily yet (codecs, regex caches...), so
    # this catches a first-use import that the in-process tests could miss.
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    script = _FRESH_INTERPRETER.format(io_events=_IO_EVENTS)
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
        timeout=60,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert completed.stdout.strip() == "[]", completed.stdout + completed.stderr
