"""A denial rendered with local variables shows no argument from any frame of ours (SPEC §2).

Error trackers (Sentry, by default) render every frame's locals. Each test makes a call whose
arguments hold a canary secret, gets it denied through one of our wrappers or seams, renders the
traceback as they would (``traceback.TracebackException(..., capture_locals=True)``) and looks
at every frame of the wrapping and plugin modules. (The counting core's own frame is its
module's business and has tests of its own.)
"""

from __future__ import annotations

import asyncio
import traceback
from pathlib import Path
from typing import Any

import pytest
from hosts import AsyncHost, AsyncRetryingHost, Context, InlineHost, RetryingHost

import dsh_loop_brake
from dsh_loop_brake import LoopBrake, LoopBrakeError, decorate_tool, wrap_execute
from dsh_loop_brake import plugin as loop_brake_plugin

CANARY = "sk-CANARY-7f3a9c"
PACKAGE = Path(dsh_loop_brake.__file__).parent
OURS = {PACKAGE / "_wrapping.py", PACKAGE / "plugin.py", PACKAGE / "_execution.py"}


def secret_arguments() -> dict[str, Any]:
    return {"path": "/home/u/.env", "token": CANARY, "nested": [{"key": CANARY}]}


def our_frames(error: BaseException) -> list[traceback.FrameSummary]:
    rendered = traceback.TracebackException(
        type(error), error, error.__traceback__, capture_locals=True
    )
    frames = []
    while rendered is not None:
        frames += [frame for frame in rendered.stack if Path(frame.filename) in OURS]
        rendered = rendered.__cause__ or rendered.__context__  # type: ignore[assignment]
    return frames


def assert_no_canary(error: BaseException, *, expect_frames: bool = True) -> None:
    frames = our_frames(error)
    if expect_frames:
        assert frames, "the denial should pass through a frame of ours"
    for frame in frames:
        for name, shown in (frame.locals or {}).items():
            assert CANARY not in shown, f"{Path(frame.filename).name}:{frame.name} local {name}"


def denial(run: Any) -> LoopBrakeError:
    for _ in range(5):
        try:
            run()
        except LoopBrakeError as error:
            return error
    raise AssertionError("never denied")


def body(arguments: Any, execution: Any = None) -> str:
    return "ok"


async def async_body(arguments: Any, execution: Any = None) -> str:
    return "ok"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_wrap_execute(asynchronous: bool) -> None:
    braked = wrap_execute(async_body if asynchronous else body, LoopBrake(2), tool="read_file")

    def run() -> Any:
        result = braked(secret_arguments(), {"agent": {"id": "a"}})
        return asyncio.run(result) if asynchronous else result

    assert_no_canary(denial(run))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_brake_tool(asynchronous: bool) -> None:
    brake = LoopBrake(2)

    @brake.tool
    def read_file(path: str, token: str, nested: list[Any]) -> str:
        return "ok"

    @brake.tool(name="read_file")
    async def read_file_async(path: str, token: str, nested: list[Any]) -> str:
        return "ok"

    def run() -> Any:
        if asynchronous:
            return asyncio.run(read_file_async(**secret_arguments()))
        return read_file(**secret_arguments())

    assert_no_canary(denial(run))


@pytest.mark.parametrize("before_apply", [False, True], ids=["register-seam", "execute-seam"])
def test_both_seams_of_a_sync_host(before_apply: bool) -> None:
    host = InlineHost()
    if before_apply:
        host.register({"name": "read_file", "execute": body})
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 2})
    if not before_apply:
        host.register({"name": "read_file", "execute": body})
    call = {"name": "read_file", "arguments": secret_arguments(), "agent": {"id": "a"}}

    assert_no_canary(denial(lambda: host.execute(dict(call))))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync-body", "async-body"])
@pytest.mark.parametrize("before_apply", [False, True], ids=["register-seam", "execute-seam"])
def test_both_seams_of_an_async_host(before_apply: bool, asynchronous: bool) -> None:
    host = AsyncHost()
    definition = {"name": "read_file", "execute": async_body if asynchronous else body}
    if before_apply:
        host.register(definition)
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 2})
    if not before_apply:
        host.register(definition)
    call = {"name": "read_file", "arguments": secret_arguments(), "agent": {"id": "a"}}

    assert_no_canary(denial(lambda: asyncio.run(host.execute(dict(call)))))


@pytest.mark.parametrize("host_type", [RetryingHost, AsyncRetryingHost])
def test_a_retried_denial_keeps_ours_clean(host_type: type) -> None:
    # The host runs the denied body again twice: the retries are denied from what the first
    # run recorded, and the denial the host finally raises is the last retry's.
    host = host_type()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 1})
    host.register({"name": "read_file", "execute": body})
    call = {"name": "read_file", "arguments": secret_arguments(), "agent": {"id": "a"}}
    run = host.execute if host_type is RetryingHost else lambda c: asyncio.run(host.execute(c))
    with pytest.raises(LoopBrakeError) as denied:
        run(call)
    assert "count_run" in [frame.name for frame in our_frames(denied.value)]  # the recorded run
    assert_no_canary(denied.value)


def test_a_denial_from_inside_a_braked_body_passes_through_ours_clean() -> None:
    # The outer call's arguments hold the canary too: its frames are ours while the inner call's
    # denial passes through them.
    host = InlineHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 2})
    host.register({"name": "read_file", "execute": body})

    def agent_step(arguments: Any, execution: Any) -> str:
        for _ in range(3):
            host.execute({**execution, "name": "read_file", "arguments": secret_arguments()})
        return "done"

    host.register({"name": "agent_step", "execute": agent_step})
    step = {"name": "agent_step", "arguments": secret_arguments(), "agent": {"id": "a"}}
    with pytest.raises(LoopBrakeError) as denied:
        host.execute(step)
    assert_no_canary(denied.value)


def test_a_definition_braked_through_a_proxy() -> None:
    class Slotted:
        __slots__ = ("name",)

        def __init__(self) -> None:
            self.name = "read_file"

        def execute(self, arguments: Any, execution: Any = None) -> str:
            return "ok"

    braked = decorate_tool(Slotted(), LoopBrake(2))
    assert_no_canary(denial(lambda: braked.execute(secret_arguments())))


def test_a_tool_body_exception_passing_through_keeps_ours_clean_too() -> None:
    def failing(arguments: Any, execution: Any = None) -> str:
        raise OSError("disk full")

    braked = wrap_execute(failing, LoopBrake(5), tool="write")
    with pytest.raises(OSError) as failed:
        braked(secret_arguments())
    assert_no_canary(failed.value)
