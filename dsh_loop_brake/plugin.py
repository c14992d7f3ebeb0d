"""The loop-brake plugin: puts the brake into a host's tool registry and takes it out on dispose.

Two seams, one count per call:

* ``ctx.tools.register`` is patched so every definition registered while the plugin lives carries
  a braked ``execute`` (``decorate_tool``). This is the enforcement path.
* ``ctx.tools.execute`` is patched when the host has it, to catch tools registered before the
  plugin was applied.

A host call that goes through both seams is counted once: the execute seam counts it and marks
it in flight by the execution object's identity and, when it has one, its call id; the braked
body finds the mark (by identity, or by call id when the host hands it a copy) and runs
unbraked. Marks are plain shared state under a lock, so this holds when the host runs bodies in
another thread or task.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final, Protocol, final

from dsh_loop_brake.harness.hookspecs import hookimpl
from dsh_loop_brake.loop_brake import (
    PLUGIN_NAME,
    LoopBrake,
    _field,
    _with_execute,
    decorate_tool,
    resolve_max_repeats,
    session_key,
)

__all__ = ["ROW_ID", "apply", "dsh_apply"]

ROW_ID: Final = "loop-brake"

_Marks = tuple[Hashable, ...]
"""What a call in flight is marked by: its execution object's id, and its call id if it has one."""

_MISSING: Final = object()


class _Row(Protocol):
    id: str
    name: str
    config: Any
    disabled: bool


def apply(ctx: Any, config: Any = None) -> LoopBrake:
    """Validate ``config``, brake ``ctx.tools`` and return the live ``LoopBrake``."""
    # Validate first: a brake with other teeth than the profile asked for must be refused now,
    # not found out once a loop is already burning tokens.
    brake = LoopBrake(resolve_max_repeats(config))
    tools = getattr(ctx, "tools", None)
    if not callable(getattr(tools, "register", None)):
        raise TypeError(
            f"{PLUGIN_NAME} needs a tool registry: the context has no tools.register(definition); "
            "apply it in a host that provides one (see docs/harness.md)"
        )
    if not callable(getattr(ctx, "effect", None)):
        raise TypeError(
            f"{PLUGIN_NAME} needs ctx.effect(callback) to be undone on dispose; "
            "apply it in a host that provides fiber effects (see docs/harness.md)"
        )
    installation = _Installation(tools, brake)
    ctx.effect(installation.install)
    return brake


@hookimpl
def dsh_apply(ctx: Any, row: _Row) -> LoopBrake | None:
    """Apply the rows named ``dsh-loop-brake``; leave every other row to its own plugin."""
    if row.name != PLUGIN_NAME:
        return None
    return apply(ctx, row.config)


@final
class _Installation:
    """Both seams of one applied brake, the calls in flight, and how to undo it all."""

    __slots__ = ("_active", "_brake", "_in_flight", "_lock", "_saved", "_tools")

    def __init__(self, tools: Any, brake: LoopBrake) -> None:
        self._tools = tools
        self._brake = brake
        self._active = False
        self._lock = threading.Lock()
        # mark (see _Marks) -> how many executions with that mark are inside the execute seam
        self._in_flight: dict[Hashable, int] = {}
        # attribute name -> (our wrapper, the instance's own attribute or _MISSING)
        self._saved: dict[str, tuple[Callable[..., Any], object]] = {}

    def install(self) -> Callable[[], None]:
        self._active = True
        self._patch("register", self._register_seam(self._tools.register))
        execute = getattr(self._tools, "execute", None)
        if callable(execute):
            self._patch("execute", self._execute_seam(execute))
        return self.dispose

    def dispose(self) -> None:
        # Inactive seams and gates pass straight through, so definitions braked while the plugin
        # lived run unbraked, and a call already inside a seam is not denied after dispose.
        self._active = False
        for name, (wrapper, own) in self._saved.items():
            if _own_attribute(self._tools, name) is not wrapper:
                continue  # patched again on top of ours: leave that layer alone
            if own is _MISSING:
                delattr(self._tools, name)
            else:
                setattr(self._tools, name, own)
        self._saved.clear()
        # A brake that remembered across a reload would deny a fresh run's first call.
        self._brake.reset()

    def _patch(self, name: str, wrapper: Callable[..., Any]) -> None:
        own = _own_attribute(self._tools, name)
        setattr(self._tools, name, wrapper)
        self._saved[name] = (wrapper, own)

    # -- the register seam ---------------------------------------------------------------

    def _register_seam(self, register: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(register)
        def braked_register(definition: Any, *rest: Any, **kwargs: Any) -> Any:
            if self._active:
                definition = self._brake_definition(definition)
            return register(definition, *rest, **kwargs)

        return braked_register

    def _brake_definition(self, definition: Any) -> Any:
        braked = decorate_tool(definition, self._brake)
        if braked is definition:
            return definition  # nothing callable to brake
        original = _field(definition, "execute")
        return _with_execute(braked, self._gate(original, _field(braked, "execute")))

    def _gate(self, original: Callable[..., Any], braked: Callable[..., Any]) -> Callable[..., Any]:
        """Run ``braked`` unless the execute seam already counted this call or we are disposed."""
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def gate_async(args: Any, *rest: Any, **kwargs: Any) -> Any:
                chosen = original if self._counted(rest[0] if rest else None) else braked
                result: Awaitable[Any] = chosen(args, *rest, **kwargs)
                return await result

            return gate_async

        @functools.wraps(original)
        def gate(args: Any, *rest: Any, **kwargs: Any) -> Any:
            chosen = original if self._counted(rest[0] if rest else None) else braked
            return chosen(args, *rest, **kwargs)

        return gate

    def _counted(self, execution: object) -> bool:
        if not self._active:
            return True
        if execution is None:
            return False
        with self._lock:
            if id(execution) in self._in_flight:
                return True  # the very object the execute seam counted: the usual case, no reads
        key = _call_key(execution)  # a copy of the execution: match it by its call id
        if key is None:
            return False
        with self._lock:
            return key in self._in_flight

    # -- the execute seam ----------------------------------------------------------------

    def _execute_seam(self, execute: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(execute):

            @functools.wraps(execute)
            async def braked_execute_async(execution: Any, *rest: Any, **kwargs: Any) -> Any:
                key = self._enter(execution)
                try:
                    result: Awaitable[Any] = execute(execution, *rest, **kwargs)
                    return await result
                finally:
                    self._leave(key)

            return braked_execute_async

        @functools.wraps(execute)
        def braked_execute(execution: Any, *rest: Any, **kwargs: Any) -> Any:
            key = self._enter(execution)
            try:
                result = execute(execution, *rest, **kwargs)
            except BaseException:
                self._leave(key)
                raise
            if callable(getattr(result, "add_done_callback", None)):
                # A future (asyncio's or concurrent.futures'): the body may still be running in
                # another thread or task, so the call stays marked until it is done. The host
                # gets its own future back, with its whole API.
                result.add_done_callback(lambda _done: self._leave(key))
                return result
            if inspect.isawaitable(result):
                return self._leave_after(result, key)
            self._leave(key)
            return result

        return braked_execute

    async def _leave_after(self, result: Awaitable[Any], key: _Marks | None) -> Any:
        try:
            return await result
        finally:
            self._leave(key)

    def _enter(self, execution: Any) -> _Marks | None:
        """Count the call (raising ``LoopBrakeError`` when denied) and mark it in flight."""
        if not self._active:
            return None
        session = session_key(None, execution)
        self._brake.check(
            str(_field(execution, "name")), _field(execution, "arguments"), session_id=session
        )
        # Marked by identity (what the braked body is usually handed) and by call id (for hosts
        # that hand the body a copy). The identity entry goes before the object can be collected.
        key = _call_key(execution, session)
        marks: _Marks = (id(execution),) if key is None else (id(execution), key)
        with self._lock:
            for mark in marks:
                self._in_flight[mark] = self._in_flight.get(mark, 0) + 1
        return marks

    def _leave(self, marks: _Marks | None) -> None:
        if marks is None:
            return
        with self._lock:
            for mark in marks:
                remaining = self._in_flight.get(mark, 0) - 1
                if remaining > 0:
                    self._in_flight[mark] = remaining
                else:
                    self._in_flight.pop(mark, None)


def _call_key(execution: object, session: str | None = None) -> tuple[str, str | int] | None:
    """The host's call id within the calling session, or ``None`` when the call has none."""
    call_id = _field(execution, "call_id")
    if call_id is None:
        call_id = _field(execution, "callId")
    if isinstance(call_id, (str, int)) and call_id != "":
        return (session_key(None, execution) if session is None else session, call_id)
    return None


def _own_attribute(source: object, name: str) -> object:
    """The instance's own attribute ``name`` (not one it gets from its class), or ``_MISSING``."""
    return getattr(source, "__dict__", {}).get(name, _MISSING)
