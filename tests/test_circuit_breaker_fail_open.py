"""The circuit breaker fails open on arguments it cannot read, and never lets an argument reach a
traceback rendered with local variables (SPEC §6, §2)."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import circuit_breaker as circuit_breaker_plugin
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerError, resolve_config
from dsh_loop_brake.harness import (
    Agent,
    Context,
    Fiber,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
)

CANARY = "sk-CANARY-4b1e77"


class FlakyList(list[Any]):
    """A lazily fetched list whose fetch fails (a remote result set, say)."""

    def __iter__(self) -> Iterator[Any]:
        raise ConnectionError(f"lost the connection while fetching {CANARY}")


class NoLength(list[Any]):
    def __len__(self) -> int:
        raise RuntimeError(CANARY)


class NoTruth(list[Any]):
    def __bool__(self) -> bool:
        raise RuntimeError(CANARY)

    def __len__(self) -> int:
        raise RuntimeError(CANARY)


class Uncomparable(str):
    def __lt__(self, other: object) -> bool:
        raise RuntimeError(CANARY)

    __gt__ = __lt__
    __hash__ = str.__hash__


class FailingItems(dict[str, Any]):
    @property
    def items(self) -> Any:  # type: ignore[override]
        raise PermissionError(CANARY)


class FailingKeys(dict[str, Any]):
    def __iter__(self) -> Iterator[str]:
        raise OSError(CANARY)


def hostile_arguments() -> list[Any]:
    return [
        {"rows": FlakyList([1, 2])},
        FlakyList([CANARY]),
        {"rows": NoLength([CANARY])},
        {"filter": NoTruth([CANARY])},
        FailingItems(description="x", token=CANARY),
        FailingKeys(description="x", token=CANARY),
    ]


IDS = ["iter-raises", "top-level-iter-raises", "len-raises", "bool-raises",
       "items-property-raises", "keys-raise"]  # fmt: skip


def test_keys_whose_comparison_raises_are_read_as_their_characters_and_counted() -> None:
    # A str-subclass key is read as the str it holds (its own __lt__ never runs), so the call is
    # identified, and identical calls are duplicates, as with plain keys.
    b = CircuitBreaker(resolve_config({"duplicateLimit": 2, "window": 2}))
    agent = Agent("a")
    hostile = {Uncomparable("b"): CANARY, Uncomparable("a"): 2}
    assert b.check_call("fetch", {"a": 2, "b": CANARY}, agent=agent) is None
    with pytest.raises(CircuitBreakerError) as denied:
        b.check_call("fetch", hostile, agent=agent)
    assert CANARY not in str(denied.value)


@pytest.mark.parametrize("index", range(len(IDS)), ids=IDS)
def test_arguments_that_raise_while_read_are_allowed_by_the_guard(
    index: int, caplog: pytest.LogCaptureFixture
) -> None:
    b = CircuitBreaker(resolve_config({"duplicateLimit": 2, "window": 2}))
    agent = Agent("a")
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for n in range(5):
            arguments = hostile_arguments()[index]
            assert b.check(ToolExecution(f"c{n}", "fetch", arguments, agent)) is None
            assert b.check_call("fetch", arguments, agent=agent) is None
    assert b.calls(agent) == 10  # allowed, and counted toward the cap as any call is
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]  # once per tool
    assert '"fetch"' in warning.getMessage()
    assert CANARY not in caplog.text


@pytest.mark.parametrize("index", range(len(IDS)), ids=IDS)
def test_through_the_registry_the_call_runs_rather_than_being_denied(index: int) -> None:
    registry = ToolRegistry()
    circuit_breaker_plugin.apply(Context(registry, Fiber("row")), {"duplicateLimit": 2})
    ran: list[int] = []
    registry.register(ToolDefinition("fetch", lambda args, execution: ran.append(1) or "ok"))

    async def calls() -> list[Any]:
        return [
            await registry.execute(
                ToolExecution(f"c{n}", "fetch", hostile_arguments()[index], Agent("a"))
            )
            for n in range(3)
        ]

    results = asyncio.run(calls())
    assert [r.is_error for r in results] == [False] * 3
    assert len(ran) == 3


def test_an_execution_whose_fields_raise_is_judged_on_what_can_be_read() -> None:
    class Execution:
        name = "fetch"
        agent = None

        @property
        def arguments(self) -> Any:
            raise RuntimeError(CANARY)

    b = CircuitBreaker(resolve_config({"maxCallsPerAgent": 2}))
    assert b.check(Execution()) is None
    assert b.check(Execution()) is None
    assert b.check(Execution()) is not None  # the cap needs no arguments


# --- tracebacks with local variables ----------------------------------------------------------


PACKAGE = str(Path(circuit_breaker_plugin.__file__).parent)


def our_frames(error: BaseException) -> list[str]:
    """Each frame of this package in the traceback, rendered as an error tracker does by default
    (every frame's local variables included)."""
    exception = traceback.TracebackException(
        type(error), error, error.__traceback__, capture_locals=True
    )
    frames = [frame for frame in exception.stack if frame.filename.startswith(PACKAGE)]
    return [f"{frame.name} {frame.locals}" for frame in frames]


@pytest.mark.parametrize("kind", ["duplicate", "cap"])
def test_a_denial_rendered_with_locals_shows_no_argument(kind: str) -> None:
    config = {"duplicateLimit": 2, "window": 5} if kind == "duplicate" else {"maxCallsPerAgent": 1}
    b = CircuitBreaker(resolve_config(config))
    secret = {"headers": {"Authorization": f"Bearer {CANARY}"}, "description": CANARY}
    b.check_call("http_get", secret, agent="agent-7")
    try:
        b.check_call("http_get", secret, agent="agent-7")
    except CircuitBreakerError as error:
        assert error.kind == kind
        frames = our_frames(error)
    else:
        pytest.fail("the second call was not denied")
    assert frames and all("'self'" in frame for frame in frames)  # the locals were rendered
    for frame in frames:
        assert CANARY not in frame
