"""The tool registry: register, look up, guard and execute tools; errors become results."""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable
from typing import final

from dsh_loop_brake.harness.fibers import Fiber, current_fiber
from dsh_loop_brake.harness.types import ToolDefinition, ToolExecution, ToolResult
from dsh_loop_brake.loop_brake import ToolCallDenied

__all__ = ["Guard", "ToolRegistry"]

Guard = Callable[[ToolExecution], "str | None"]
"""A synchronous pre-execution check: a reason string denies the call, ``None`` allows it.

The error result's code is the string's ``code`` attribute when it has one (the circuit breaker's
``DenyMessage``), else ``DENIED``. A guard may also raise a ``ToolCallDenied``: the call is denied
with that error's code and message.
"""

_DENIED = "DENIED"

logger = logging.getLogger("dsh_loop_brake.harness")


@final
class ToolRegistry:
    """One registry shared by every row of a harness.

    ``execute`` runs lookup → guards → body and turns an unknown tool, a guard's denial or a body's
    exception into a :class:`ToolResult` the model can read. A ``ToolCallDenied`` raised by the
    body (a braked body: ``LoopBrakeError``) is the one exception that propagates: a brake is
    raised, never returned (the agent-facing ``Harness.execute`` converts it).
    """

    # No __slots__: plugins patch ``register`` and ``execute`` as instance attributes.

    def __init__(self, root: Fiber | None = None) -> None:
        self._root = root if root is not None else Fiber("registry")
        # Both are replaced whole under the lock and never changed in place, so ``execute``
        # reads them without it and sees each as it stood at that moment, never half-updated.
        self._tools: dict[str, tuple[ToolDefinition, ...]] = {}
        self._guards: tuple[Guard, ...] = ()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ToolRegistry {len(self._tools)} tools, {len(self._guards)} guards>"

    def names(self) -> list[str]:
        """The names of the registered tools, in registration order."""
        with self._lock:
            return list(self._tools)

    def register(self, definition: ToolDefinition) -> Callable[[], None]:
        """Register a tool (shadowing an earlier one of that name); return its disposer.

        The registration belongs to the fiber being applied, else to the root fiber, and is
        undone when that fiber is disposed.
        """
        name = getattr(definition, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError("a tool definition needs a non-empty string name")
        if not callable(getattr(definition, "execute", None)):
            raise TypeError(f"tool {json.dumps(name)} needs a callable execute")
        with self._lock:
            self._tools[name] = (*self._tools.get(name, ()), definition)

        def unregister() -> None:
            with self._lock:
                stack = self._tools.get(name, ())
                for index in range(len(stack) - 1, -1, -1):
                    if stack[index] is definition:
                        stack = stack[:index] + stack[index + 1 :]
                        break
                else:
                    return
                if stack:
                    self._tools[name] = stack
                else:
                    del self._tools[name]

        return self._owned(unregister)

    def get(self, name: str) -> ToolDefinition | None:
        """The definition a call of ``name`` would run now (the latest registration), or None."""
        stack = self._tools.get(name)
        return stack[-1] if stack else None

    def guard(self, fn: Guard) -> Callable[[], None]:
        """Add a pre-execution guard; return its disposer (owned like registrations)."""
        if not callable(fn):
            raise TypeError("a guard must be callable")
        with self._lock:
            self._guards = (*self._guards, fn)

        def remove() -> None:
            with self._lock:
                guards = self._guards
                for index, existing in enumerate(guards):
                    if existing is fn:
                        self._guards = guards[:index] + guards[index + 1 :]
                        break

        return self._owned(remove)

    async def execute(self, execution: ToolExecution) -> ToolResult:
        """Run one call: lookup → guards (first denial final) → ``body(arguments, execution)``."""
        name = execution.name
        stack = self._tools.get(name)  # as get(name) has it, without a call on every call's path
        definition = stack[-1] if stack else None
        if definition is None:
            message = f"unknown tool {_quote(name)}: no tool of that name is registered"
            return _error("UNKNOWN_TOOL", message)
        if self._guards:
            denial = self._denial(execution)
            if denial is not None:
                return denial
        try:
            result = definition.execute(execution.arguments, execution)
            if type(result) is not ToolResult and inspect.isawaitable(result):
                result = await result
        except ToolCallDenied:
            raise
        except Exception as exc:
            return _error("TOOL_ERROR", f"tool {_quote(name)} failed: {type(exc).__name__}: {exc}")
        if isinstance(result, ToolResult):
            return result
        return ToolResult(content=result)

    def _owned(self, undo: Callable[[], None]) -> Callable[[], None]:
        """Hand ``undo`` to the owning fiber; if that fiber is already disposed, undo now."""
        try:
            return (current_fiber() or self._root).adopt(undo)
        except BaseException:
            undo()  # nothing would ever run it: the tool or guard must not stay behind
            raise

    def _denial(self, execution: ToolExecution) -> ToolResult | None:
        """The first guard's denial as an error result, or ``None`` when every guard allows."""
        for guard in self._guards:
            try:
                reason = guard(execution)
            except ToolCallDenied as denial:
                # Guards are the registry's own check: a denial raised is a denial returned.
                return _error(_code_of(denial), str(denial))
            except Exception as exc:
                # A guard that cannot decide must not wave the call through. Its message may
                # hold anything (the arguments included): only the type is shown.
                logger.warning(
                    "a guard failed on tool %s (%s); the call is denied",
                    _quote(execution.name),
                    type(exc).__name__,
                )
                name = _quote(execution.name)
                return _error(_DENIED, f"tool {name} denied: a guard failed ({type(exc).__name__})")
            if reason is None:
                continue
            if isinstance(reason, str) and reason:
                # The plain text (str.__str__, not a subclass's own __str__), with its code.
                return _error(_code_of(reason), str.__str__(reason))
            return _error(_DENIED, f"tool {_quote(execution.name)} denied by a guard")
        return None


def _code_of(denial: object) -> str:
    """The code a denial names (a guard's string or a raised error may carry one), else DENIED."""
    try:
        code = getattr(denial, "code", None)
    except Exception:  # a hostile property: the denial still stands
        return _DENIED
    return code if isinstance(code, str) and code else _DENIED


def _error(code: str, message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True, error={"code": code, "message": message})


def _quote(name: object) -> str:
    # JSON string literal, non-ASCII escaped: a hostile tool name cannot inject lines.
    return json.dumps(str(name))
