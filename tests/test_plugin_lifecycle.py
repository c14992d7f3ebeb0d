"""Applying the plugin patches both seams or neither; disposing, in any order, undoes it all.

SPEC §3: a registry whose ``register`` or ``execute`` cannot be set is refused with a
``TypeError`` that names the attribute and why, and is left exactly as it was; several brakes on
one registry, disposed in any order, leave it exactly as it was; one disposed under another's
live wrapper passes calls through unbraked.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hosts import Context, InlineHost

from dsh_loop_brake import LoopBrake, LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin


def body(arguments: Any, execution: Any = None) -> str:
    return "ok"


def call(agent: str = "agent-1") -> dict[str, Any]:
    return {"name": "search", "arguments": {"q": "weather"}, "agent": {"id": agent}}


def snapshot(tools: object) -> dict[str, Any]:
    """What a registry looks like from outside: its instance attributes and both seams."""
    return {
        "vars": dict(vars(tools)) if hasattr(tools, "__dict__") else None,
        "register": getattr(tools, "register", None),
        "execute": getattr(tools, "execute", None),
    }


# --------------------------------------------------------------------------------------------
# All or nothing


class SlottedExecute:
    """``execute`` is a method of a class with ``__slots__`` and no ``__dict__``: not settable,
    while ``register`` (a slot) is."""

    __slots__ = ("defs", "register")

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.register = self._register

    def _register(self, definition: Any) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: Any) -> Any:
        return self.defs[execution["name"]]["execute"](execution["arguments"], execution)


class PropertyExecute(InlineHost):
    """``execute`` is a read-only property."""

    @property  # type: ignore[override]
    def execute(self) -> Callable[[Any], Any]:
        return super().execute


class PropertyRegister(InlineHost):
    """``register`` is a read-only property; ``execute`` could be set."""

    @property  # type: ignore[override]
    def register(self) -> Callable[[Any], Any]:
        return super().register


@dataclasses.dataclass(frozen=True)
class FrozenTools:
    defs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def register(self, definition: Any) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: Any) -> Any:
        return self.defs[execution["name"]]["execute"](execution["arguments"], execution)


class IgnoringSetter(InlineHost):
    """Setting ``execute`` is accepted and ignored: reading it gives the class's method."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "execute":
            super().__setattr__(name, value)


@pytest.mark.parametrize(
    ("host_type", "attribute", "why"),
    [
        (SlottedExecute, "execute", "__slots__"),
        (PropertyExecute, "execute", "property"),
        (PropertyRegister, "register", "property"),
        (FrozenTools, "register", "frozen dataclass"),
        (IgnoringSetter, "execute", "did not change"),
    ],
)
def test_a_registry_whose_seams_cannot_be_set_is_refused_and_left_as_it_was(
    host_type: type, attribute: str, why: str
) -> None:
    tools = host_type()
    ctx = Context(tools)
    before = snapshot(tools)

    with pytest.raises(TypeError) as refused:
        loop_brake_plugin.apply(ctx, {"maxRepeats": 1})

    message = str(refused.value)
    assert f"tools.{attribute}" in message and why in message and type(tools).__name__ in message
    assert "\n" not in message
    assert snapshot(tools) == before  # nothing patched, nothing left behind
    assert ctx.disposers == []
    # And nothing goes on denying: every definition registered now runs as it is.
    tools.register({"name": "search", "execute": body})
    for _ in range(3):
        assert tools.execute(call()) == "ok"
    assert tools.defs["search"]["execute"] is body


# --------------------------------------------------------------------------------------------
# Dispose in any order


def applied(tools: Any, count: int) -> list[tuple[Context, LoopBrake]]:
    brakes = []
    for index in range(count):
        ctx = Context(tools)
        brakes.append((ctx, loop_brake_plugin.apply(ctx, {"maxRepeats": 2 + index})))
    return brakes


class OwnSeams(InlineHost):
    """A registry whose seams are instance attributes of its own (the host set them)."""

    def __init__(self) -> None:
        super().__init__()
        self.register = self._own_register  # type: ignore[method-assign]
        self.execute = self._own_execute  # type: ignore[method-assign]

    def _own_register(self, definition: Any) -> Any:
        return InlineHost.register(self, definition)

    def _own_execute(self, execution: Any) -> Any:
        return InlineHost.execute(self, execution)


@pytest.mark.parametrize("host_type", [InlineHost, OwnSeams])
@pytest.mark.parametrize(
    "order", [order for count in (2, 3) for order in itertools.permutations(range(count))]
)
def test_brakes_disposed_in_any_order_leave_the_registry_exactly_as_it_was(
    host_type: type, order: tuple[int, ...]
) -> None:
    tools = host_type()
    before = snapshot(tools)
    brakes = applied(tools, len(order))

    for index in order:
        brakes[index][0].dispose()

    after = snapshot(tools)
    assert after == before  # equal seams; no instance attribute where the class had the original
    assert after["vars"].keys() == before["vars"].keys()
    tools.register({"name": "search", "execute": body})
    for _ in range(5):
        assert tools.execute(call()) == "ok"


def test_a_brake_disposed_under_another_passes_calls_through_and_the_other_still_brakes() -> None:
    tools = InlineHost()
    (lower_ctx, lower), (upper_ctx, upper) = applied(tools, 2)  # maxRepeats 2, then 3
    ran = []
    tools.register({"name": "search", "execute": lambda arguments, execution: ran.append(1)})

    lower_ctx.dispose()  # its wrappers stay under the upper brake's, as pass-throughs

    assert "register" in vars(tools) and "execute" in vars(tools)
    tools.execute(call())
    tools.execute(call())  # the lower brake (limit 2) would have denied this one
    with pytest.raises(LoopBrakeError) as denied:
        tools.execute(call())
    assert denied.value.max_repeats == 3
    assert len(ran) == 2
    assert len(lower) == 0 and len(upper) == 1

    upper_ctx.dispose()
    assert "register" not in vars(tools) and "execute" not in vars(tools)
    for _ in range(4):
        tools.execute(call())
    assert len(ran) == 6


def test_a_tool_registered_under_two_brakes_is_counted_once_by_each() -> None:
    tools = InlineHost()
    (_, lower), (_, upper) = applied(tools, 2)
    tools.register({"name": "search", "execute": body})

    tools.execute(call())
    assert lower.streak("agent-1") is not None and lower.streak("agent-1")[1] == 1  # type: ignore[index]
    assert upper.streak("agent-1") is not None and upper.streak("agent-1")[1] == 1  # type: ignore[index]
    with pytest.raises(LoopBrakeError) as denied:
        tools.execute(call())
    assert denied.value.max_repeats == 2  # the tighter brake, at its own limit


def test_dispose_leaves_instance_attributes_another_plugin_set_on_top_alone() -> None:
    tools = InlineHost()
    ctx = Context(tools)
    loop_brake_plugin.apply(ctx, {"maxRepeats": 2})
    ours = tools.execute

    def logging_execute(execution: Any) -> Any:
        return ours(execution)

    tools.execute = logging_execute  # type: ignore[method-assign]
    ctx.dispose()

    assert tools.execute is logging_execute  # not ours to undo
    tools.register({"name": "search", "execute": body})
    for _ in range(3):
        assert tools.execute(call()) == "ok"  # our layer under it passes calls through


class KeywordHost(InlineHost):
    """A registry whose callers pass the definition and the execution by keyword."""

    def register(self, tool: Any) -> Any:  # type: ignore[override]
        return super().register(tool)

    def execute(self, call: Any) -> Any:  # type: ignore[override]
        return super().execute(call)


def test_a_registry_called_with_keywords_is_braked_the_same() -> None:
    tools = KeywordHost()
    brake = loop_brake_plugin.apply(Context(tools), {"maxRepeats": 2})
    tools.register(tool={"name": "search", "execute": body})
    assert tools.execute(call=call()) == "ok"
    with pytest.raises(LoopBrakeError):
        tools.execute(call=call())
    assert brake.streak("agent-1") is not None
