"""Fibers: effects run now, disposers run in reverse, exactly once, and survive a failing one."""

from __future__ import annotations

import logging

import pytest

from dsh_loop_brake.harness import Context, Fiber, HarnessError, ToolRegistry, current_fiber


def test_effect_runs_now_and_disposers_run_in_reverse_exactly_once() -> None:
    fiber = Fiber("row")
    events: list[str] = []
    for name in ("a", "b", "c"):
        fiber.effect(
            lambda name=name: events.append(f"do {name}") or (lambda: events.append(f"undo {name}"))
        )
    assert events == ["do a", "do b", "do c"]
    fiber.dispose()
    fiber.dispose()
    assert events == ["do a", "do b", "do c", "undo c", "undo b", "undo a"]
    assert fiber.disposed


def test_an_effect_without_a_disposer_has_nothing_to_undo() -> None:
    fiber = Fiber()
    ran: list[int] = []
    fiber.effect(lambda: ran.append(1))
    fiber.dispose()
    assert ran == [1]


def test_a_failing_disposer_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    fiber = Fiber("row broken")
    undone: list[str] = []

    def explode() -> None:
        raise RuntimeError("boom")

    fiber.effect(lambda: lambda: undone.append("first"))
    fiber.effect(lambda: explode)
    fiber.effect(lambda: lambda: undone.append("last"))
    with caplog.at_level(logging.ERROR, logger="dsh_loop_brake.harness"):
        fiber.dispose()
    assert undone == ["last", "first"]
    assert "row broken" in caplog.text


def test_undoing_one_effect_early_runs_its_disposer_once() -> None:
    fiber = Fiber()
    undone: list[str] = []
    undo = fiber.effect(lambda: lambda: undone.append("x"))
    fiber.effect(lambda: lambda: undone.append("y"))
    undo()
    undo()
    fiber.dispose()
    assert undone == ["x", "y"]


def test_an_effect_that_raises_keeps_nothing() -> None:
    fiber = Fiber()

    def failing() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        fiber.effect(failing)
    fiber.dispose()  # nothing kept, nothing to run


def test_a_disposed_fiber_takes_no_new_effects() -> None:
    fiber = Fiber("gone")
    fiber.dispose()
    with pytest.raises(HarnessError, match="disposed"):
        fiber.effect(lambda: None)


def test_context_effect_makes_the_fiber_current_so_registrations_belong_to_it() -> None:
    root = Fiber("root")
    tools = ToolRegistry(root)
    row_fiber = Fiber("row")
    ctx = Context(tools, row_fiber)
    seen: list[Fiber | None] = []

    def effect() -> None:
        seen.append(current_fiber())
        tools.register(_tool("inside"))

    ctx.effect(effect)
    assert seen == [row_fiber]
    assert current_fiber() is None
    row_fiber.dispose()
    assert tools.get("inside") is None


def _tool(name: str):  # type: ignore[no-untyped-def]
    from dsh_loop_brake.harness import ToolDefinition

    return ToolDefinition(name, lambda args, execution: name)
