"""The tool registry: lookup → guards → body, errors as results, and a brake that propagates."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from dsh_loop_brake import LoopBrakeError, ToolCallDenied
from dsh_loop_brake.circuit_breaker import CircuitBreakerError
from dsh_loop_brake.harness import (
    Agent,
    Fiber,
    Harness,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    ToolResult,
)


def call(name: str, arguments: Any = None, call_id: str = "c1") -> ToolExecution:
    return ToolExecution(call_id, name, {} if arguments is None else arguments, Agent("a1"))


def run(registry: ToolRegistry, execution: ToolExecution) -> ToolResult:
    return asyncio.run(registry.execute(execution))


def test_the_body_gets_the_arguments_and_the_execution() -> None:
    registry = ToolRegistry()
    seen: list[tuple[Any, ToolExecution]] = []
    registry.register(
        ToolDefinition("echo", lambda args, execution: seen.append((args, execution)) or args["x"])
    )
    execution = call("echo", {"x": 7})
    assert run(registry, execution) == ToolResult(content=7)
    assert seen == [({"x": 7}, execution)]


def test_an_async_body_is_awaited() -> None:
    registry = ToolRegistry()

    async def body(args: Any, execution: ToolExecution) -> str:
        await asyncio.sleep(0)
        return "async ok"

    registry.register(ToolDefinition("slow", body))
    assert run(registry, call("slow")).content == "async ok"


def test_a_body_may_return_its_own_tool_result() -> None:
    registry = ToolRegistry()
    own = ToolResult("nope", is_error=True, error={"code": "MINE", "message": "nope"})
    registry.register(ToolDefinition("own", lambda args, execution: own))
    assert run(registry, call("own")) is own


def test_an_unknown_tool_is_an_error_result() -> None:
    result = run(ToolRegistry(), call("missing\ntool"))
    assert result.is_error and result.error is not None
    assert result.error["code"] == "UNKNOWN_TOOL"
    assert result.content == result.error["message"]
    assert "\n" not in result.content  # a hostile name cannot break the line


def test_a_body_exception_is_a_tool_error_result() -> None:
    registry = ToolRegistry()

    def broken(args: Any, execution: ToolExecution) -> None:
        raise FileNotFoundError("no such file: notes.txt")

    registry.register(ToolDefinition("read", broken))
    result = run(registry, call("read"))
    assert result.is_error and result.error is not None
    assert result.error["code"] == "TOOL_ERROR"
    assert "FileNotFoundError" in result.error["message"]
    assert "notes.txt" in result.content  # the model needs the tool's own reason


def test_a_guard_denial_is_final_and_the_body_does_not_run() -> None:
    registry = ToolRegistry()
    ran: list[str] = []
    later: list[str] = []
    registry.register(ToolDefinition("rm", lambda args, execution: ran.append("rm")))
    registry.guard(lambda execution: None)
    registry.guard(lambda execution: "rm is not allowed here")
    registry.guard(lambda execution: later.append("asked") or None)
    result = run(registry, call("rm"))
    assert result == ToolResult(
        "rm is not allowed here",
        is_error=True,
        error={"code": "DENIED", "message": "rm is not allowed here"},
    )
    assert ran == [] and later == []


def test_a_guard_that_raises_denies_the_call() -> None:
    registry = ToolRegistry()
    ran: list[str] = []
    registry.register(ToolDefinition("t", lambda args, execution: ran.append("t")))

    def broken_guard(execution: ToolExecution) -> str | None:
        raise KeyError("secret-argument-value")

    registry.guard(broken_guard)
    result = run(registry, call("t", {"token": "secret-argument-value"}))
    assert result.is_error and result.error is not None and result.error["code"] == "DENIED"
    assert "secret-argument-value" not in result.content
    assert ran == []


def test_removing_a_guard_lets_calls_through_again() -> None:
    registry = ToolRegistry()
    registry.register(ToolDefinition("t", lambda args, execution: "ran"))
    remove = registry.guard(lambda execution: "no")
    assert run(registry, call("t")).is_error
    remove()
    assert run(registry, call("t")).content == "ran"


def test_registering_a_name_again_shadows_until_the_later_one_is_disposed() -> None:
    registry = ToolRegistry()
    first = ToolDefinition("search", lambda args, execution: "first")
    second = ToolDefinition("search", lambda args, execution: "second")
    registry.register(first)
    undo_second = registry.register(second)
    assert registry.get("search") is second
    assert run(registry, call("search")).content == "second"
    undo_second()
    assert registry.get("search") is first
    assert registry.names() == ["search"]


def test_disposing_the_earlier_registration_keeps_the_later_one() -> None:
    registry = ToolRegistry()
    undo_first = registry.register(ToolDefinition("s", lambda args, execution: 1))
    second = ToolDefinition("s", lambda args, execution: 2)
    registry.register(second)
    undo_first()
    assert registry.get("s") is second


def test_registrations_outside_a_row_belong_to_the_root_fiber() -> None:
    root = Fiber("root")
    registry = ToolRegistry(root)
    registry.register(ToolDefinition("t", lambda args, execution: 1))
    registry.guard(lambda execution: "no")
    root.dispose()
    assert registry.get("t") is None
    assert registry.names() == []


def test_a_definition_without_name_or_callable_body_is_refused() -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError):
        registry.register(ToolDefinition("", lambda args, execution: 1))
    with pytest.raises(TypeError):
        registry.register(ToolDefinition("x", "not callable"))  # type: ignore[arg-type]


def _brake_error() -> LoopBrakeError:
    return LoopBrakeError("search", 3, 3, "0123456789ab", "a1")


def test_a_brake_error_propagates_from_the_registry_and_is_a_result_in_the_harness() -> None:
    def braked(args: Any, execution: ToolExecution) -> None:
        raise _brake_error()

    registry = ToolRegistry()
    registry.register(ToolDefinition("search", braked))
    with pytest.raises(LoopBrakeError):
        run(registry, call("search"))

    harness = Harness.from_rows([])
    try:
        harness.ctx.tools.register(ToolDefinition("search", braked))
        result = asyncio.run(harness.execute(call("search")))
        message = str(_brake_error())
        assert result == ToolResult(
            message, is_error=True, error={"code": "LOOP_BRAKE", "message": message}
        )
    finally:
        harness.dispose()


class HostDenial(ToolCallDenied):
    """A host's own denial, raised with its own code."""

    def __init__(self) -> None:
        super().__init__("deploys are frozen today", code="FREEZE", tool_name="search")


class CodedReason(str):
    """A guard's reason string that carries a code, as the circuit breaker's does."""

    code = "POLICY"


@pytest.mark.parametrize(
    ("denial", "code"),
    [
        (_brake_error(), "LOOP_BRAKE"),
        (HostDenial(), "FREEZE"),
        (CircuitBreakerError("stop", kind="cap", count=3, limit=3), "CIRCUIT_BREAKER"),
        (ToolCallDenied("not now"), "DENIED"),
    ],
    ids=["loop-brake", "host", "circuit-breaker", "plain"],
)
def test_a_denial_a_guard_raises_denies_with_its_code_and_message(
    denial: ToolCallDenied, code: str
) -> None:
    registry = ToolRegistry()
    ran: list[str] = []
    registry.register(ToolDefinition("search", lambda args, execution: ran.append("search")))

    def guard(execution: ToolExecution) -> str | None:
        raise denial

    registry.guard(guard)
    result = run(registry, call("search"))
    message = str(denial)
    assert result == ToolResult(message, is_error=True, error={"code": code, "message": message})
    assert ran == []


def test_a_reason_string_with_a_code_denies_with_that_code() -> None:
    registry = ToolRegistry()
    registry.register(ToolDefinition("search", lambda args, execution: 1))
    registry.guard(lambda execution: CodedReason("outside office hours"))
    result = run(registry, call("search"))
    assert result.error == {"code": "POLICY", "message": "outside office hours"}
    assert type(result.content) is str and type(result.error["message"]) is str


def test_a_reason_string_whose_code_is_unusable_denies_as_denied() -> None:
    class Hostile(str):
        @property
        def code(self) -> str:
            raise RuntimeError("secret-argument-value")

    class Blank(str):
        code = ""

    for reason in (Hostile("no"), Blank("no")):
        registry = ToolRegistry()
        registry.register(ToolDefinition("search", lambda args, execution: 1))
        registry.guard(lambda execution, reason=reason: reason)  # type: ignore[misc]
        assert run(registry, call("search")).error == {"code": "DENIED", "message": "no"}


def test_a_host_denial_raised_by_a_body_propagates_and_is_a_result_in_the_harness() -> None:
    def braked(args: Any, execution: ToolExecution) -> None:
        raise HostDenial()

    registry = ToolRegistry()
    registry.register(ToolDefinition("search", braked))
    with pytest.raises(HostDenial):
        run(registry, call("search"))
    with Harness.from_rows([]) as harness:
        harness.ctx.tools.register(ToolDefinition("search", braked))
        result = asyncio.run(harness.execute(call("search")))
    message = "deploys are frozen today"
    assert result == ToolResult(
        message, is_error=True, error={"code": "FREEZE", "message": message}
    )


def test_harness_execute_uses_a_patched_sync_execute_seam() -> None:
    harness = Harness.from_rows([])
    try:
        harness.ctx.tools.execute = lambda execution: ToolResult("patched")  # type: ignore[method-assign]
        assert asyncio.run(harness.execute(call("anything"))).content == "patched"
    finally:
        harness.dispose()


def test_a_registration_for_a_disposed_fiber_is_refused_and_leaves_nothing_behind() -> None:
    # E.g. a task a plugin started while applying registers a tool after its row was disposed:
    # it inherited the row's fiber as the current one, and nothing would ever remove the tool.
    from dsh_loop_brake.harness import HarnessError

    registry = ToolRegistry()
    gone = Fiber("row gone")
    gone.dispose()
    with gone.activate():
        with pytest.raises(HarnessError, match="disposed"):
            registry.register(ToolDefinition("late", lambda args, execution: "ran"))
        with pytest.raises(HarnessError, match="disposed"):
            registry.guard(lambda execution: "no")
    assert registry.get("late") is None and registry.names() == []
    registry.register(ToolDefinition("t", lambda args, execution: "ran"))
    assert run(registry, call("t")).content == "ran"  # no orphaned guard denies it


def test_calls_from_many_threads_while_tools_and_guards_come_and_go() -> None:
    # A call reads the registry without its lock: while other threads register and dispose a
    # shadowing tool and a guard, every call must still run one whole definition or be denied
    # by the guard, never fail inside the registry.
    registry = ToolRegistry()
    registry.register(ToolDefinition("t", lambda args, execution: "base"))
    stop = threading.Event()
    results: list[ToolResult] = []

    def churn() -> None:
        while not stop.is_set():
            undo_tool = registry.register(ToolDefinition("t", lambda args, execution: "shadow"))
            undo_guard = registry.guard(lambda execution: "held")
            undo_guard()
            undo_tool()

    def calls() -> None:
        for _ in range(2000):
            results.append(run(registry, call("t")))

    churners = [threading.Thread(target=churn) for _ in range(2)]
    callers = [threading.Thread(target=calls) for _ in range(3)]
    for thread in churners + callers:
        thread.start()
    for thread in callers:
        thread.join()
    stop.set()
    for thread in churners:
        thread.join()
    assert len(results) == 6000
    denied = ToolResult(content="held", is_error=True, error={"code": "DENIED", "message": "held"})
    expected = [ToolResult(content="base"), ToolResult(content="shadow"), denied]
    assert all(result in expected for result in results)
    assert registry.get("t") is not None and run(registry, call("t")) == ToolResult("base")
