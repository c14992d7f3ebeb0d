"""Braking a tool: a braked ``execute`` (``wrap_execute``) and a braked copy of a definition
(``decorate_tool``)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from dsh_loop_brake._brake import LoopBrake
from dsh_loop_brake._execution import read_field, session_key

__all__ = ["decorate_tool", "with_execute", "wrap_execute"]

T = TypeVar("T")


def wrap_execute(
    execute: Callable[..., Any],
    brake: LoopBrake,
    *,
    tool: str,
    session_id: str | None = None,
) -> Callable[..., Any]:
    """``execute`` with ``brake.check`` run before it; async when ``execute`` is."""
    if inspect.iscoroutinefunction(execute):

        @functools.wraps(execute)
        async def braked_async(args: Any, *rest: Any, **kwargs: Any) -> Any:
            execution = rest[0] if rest else None
            brake.check(tool, args, session_id=session_key(session_id, execution))
            result: Awaitable[Any] = execute(args, *rest, **kwargs)
            return await result

        return braked_async

    @functools.wraps(execute)
    def braked(args: Any, *rest: Any, **kwargs: Any) -> Any:
        execution = rest[0] if rest else None
        brake.check(tool, args, session_id=session_key(session_id, execution))
        return execute(args, *rest, **kwargs)

    return braked


def decorate_tool(definition: T, brake: LoopBrake) -> T:
    """A copy of ``definition`` whose ``execute`` is braked under the definition's name."""
    execute = read_field(definition, "execute")
    name = read_field(definition, "name")
    if not callable(execute) or name is None:
        return definition
    return with_execute(definition, wrap_execute(execute, brake, tool=str(name)))


def with_execute(definition: T, execute: Callable[..., Any]) -> T:
    """A copy of ``definition`` with ``execute`` in place of its own; every other field kept."""
    if isinstance(definition, Mapping):
        return {**definition, "execute": execute}  # type: ignore[return-value]
    if dataclasses.is_dataclass(definition) and not isinstance(definition, type):
        try:
            return dataclasses.replace(definition, execute=execute)
        except (TypeError, ValueError):
            pass  # execute is not an init field: fall back to a shallow copy
    if isinstance(definition, tuple) and hasattr(definition, "_replace"):
        # A NamedTuple: its fields are read-only properties that only _replace can set.
        replaced: T = definition._replace(execute=execute)
        return replaced
    duplicate = copy.copy(definition)
    object.__setattr__(duplicate, "execute", execute)
    return duplicate
