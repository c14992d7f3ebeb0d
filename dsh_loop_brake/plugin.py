"""The loop-brake plugin: puts the brake into a host's tool registry and takes it out on dispose.

Two seams, one count per call:

* ``ctx.tools.register`` is patched so every definition registered while the plugin lives carries
  a braked ``execute`` (``decorate_tool``). This is the enforcement path.
* ``ctx.tools.execute`` is patched when the host has it, to catch tools registered before the
  plugin was applied.

A host call that goes through both seams is counted once: the execute seam counts it and marks
it in flight by the execution object's identity and by its call key (its call id, or for a call
without one its tool name and arguments object); the braked body finds the mark (by identity,
or by call key when the host hands it a copy) and runs unbraked. Marks are plain shared state
under a lock, so this holds when the host runs bodies in another thread or task.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final, Protocol, final

from dsh_loop_brake._execution import OBJECT_TYPES, agent_session, read_field
from dsh_loop_brake._wrapping import with_execute
from dsh_loop_brake.harness.hookspecs import hookimpl
from dsh_loop_brake.loop_brake import PLUGIN_NAME, LoopBrake, decorate_tool, resolve_max_repeats

__all__ = ["ROW_ID", "apply", "dsh_apply"]

ROW_ID: Final = "loop-brake"

_CallKey = tuple[Hashable, ...]
"""What tells a copy of an execution for its original: ``(session, call id)``, or for a call
without an id ``(session, tool name, id of the arguments)``, which a shallow copy shares."""
_Marks = tuple[int, _CallKey]
"""What a call in flight is marked by: its execution object's id, and its call key."""

_MISSING: Final = object()
_ABSENT: Final = object()
"""A body called without an execution (``body(arguments)``)."""


def _given(execution: Any) -> tuple[Any, ...]:
    """The execution as a positional argument (however it came): none when it was absent."""
    return () if execution is _ABSENT else (execution,)


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
        original = read_field(definition, "execute")
        return with_execute(braked, self._gate(original, read_field(braked, "execute")))

    def _gate(self, original: Callable[..., Any], braked: Callable[..., Any]) -> Callable[..., Any]:
        """Run ``braked`` unless the execute seam already counted this call or we are disposed."""
        # Marks are read without the lock: one dict lookup is atomic, and the execute seam made
        # its marks before the registry handed the execution to this body. The usual case is
        # the very object the execute seam counted, found by identity before anything is read.
        in_flight = self._in_flight
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def gate_async(
                args: Any, execution: Any = _ABSENT, *rest: Any, **kwargs: Any
            ) -> Any:
                counted = id(execution) in in_flight or self._counted(execution)
                chosen = original if counted else braked
                result: Awaitable[Any]
                if rest or kwargs or execution is _ABSENT:
                    result = chosen(args, *_given(execution), *rest, **kwargs)
                else:
                    result = chosen(args, execution)  # the usual call, passed on as it came
                return await result

            return gate_async

        @functools.wraps(original)
        def gate(args: Any, execution: Any = _ABSENT, *rest: Any, **kwargs: Any) -> Any:
            counted = id(execution) in in_flight or self._counted(execution)
            chosen = original if counted else braked
            if rest or kwargs or execution is _ABSENT:
                return chosen(args, *_given(execution), *rest, **kwargs)
            return chosen(args, execution)  # the usual call, passed on as it came

        return gate

    def _counted(self, execution: Any) -> bool:
        """Whether the body's call needs no count of its own (its execution not found by id)."""
        if not self._active:
            return True
        if execution is _ABSENT or execution is None:
            return False
        return _call_key_of(execution) in self._in_flight  # a copy: matched by its call key

    # -- the execute seam ----------------------------------------------------------------

    def _execute_seam(self, execute: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(execute):

            @functools.wraps(execute)
            async def braked_execute_async(execution: Any, *rest: Any, **kwargs: Any) -> Any:
                key = self._enter(execution)
                try:
                    result: Awaitable[Any]
                    if rest or kwargs:
                        result = execute(execution, *rest, **kwargs)
                    else:
                        result = execute(execution)  # the usual call, passed on as it came
                    return await result
                finally:
                    self._leave(key)

            return braked_execute_async

        @functools.wraps(execute)
        def braked_execute(execution: Any, *rest: Any, **kwargs: Any) -> Any:
            key = self._enter(execution)
            try:
                if rest or kwargs:
                    result = execute(execution, *rest, **kwargs)
                else:
                    result = execute(execution)  # the usual call, passed on as it came
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
        name, arguments, session, key = _call_of(execution)
        self._brake.check(name, arguments, session_id=session)
        # Marked by identity (what the braked body is usually handed) and by call key (for hosts
        # that hand the body a copy). The identity mark goes in before the object can be freed.
        identity = id(execution)
        in_flight = self._in_flight
        lock = self._lock
        lock.acquire()  # rather than `with`, which costs twice as much on every call's path
        try:
            in_flight[identity] = in_flight.get(identity, 0) + 1
            in_flight[key] = in_flight.get(key, 0) + 1
        finally:
            lock.release()
        return identity, key

    def _leave(self, marks: _Marks | None) -> None:
        if marks is None:
            return
        in_flight = self._in_flight
        lock = self._lock
        identity, key = marks
        lock.acquire()
        try:
            remaining = in_flight.pop(identity, 1) - 1
            if remaining:
                in_flight[identity] = remaining
            remaining = in_flight.pop(key, 1) - 1
            if remaining:
                in_flight[key] = remaining
        finally:
            lock.release()


def _call_of(execution: object) -> tuple[str, Any, str, _CallKey]:
    """The tool name, arguments, session and call key (see ``_CallKey``) of a host's execution.

    Read by key from a mapping, else by attribute; the session is the agent's id (as
    ``session_key`` has it), the call id is ``call_id`` (or ``callId``).
    """
    kind = type(execution)
    if kind in OBJECT_TYPES and kind not in _NOT_ALL_ATTRIBUTES:
        try:  # the usual execution: an object with all four attributes, read once each
            name = execution.name  # type: ignore[attr-defined]
            arguments = execution.arguments  # type: ignore[attr-defined]
            agent = execution.agent  # type: ignore[attr-defined]
            call_id = execution.call_id  # type: ignore[attr-defined]
        except AttributeError:
            # Read field by field from now on: some were read already, and a property must
            # not run twice on every call.
            if len(_NOT_ALL_ATTRIBUTES) < 256:
                _NOT_ALL_ATTRIBUTES.add(kind)
        else:
            if type(name) is not str:
                name = str(name)
            session = agent_session(agent)
            if type(call_id) is str and call_id:
                return name, arguments, session, (session, call_id)  # the usual call id
            key = _call_key(session, call_id, execution, (name, arguments))
            return name, arguments, session, key
    name = str(read_field(execution, "name"))
    arguments = read_field(execution, "arguments")
    session = agent_session(read_field(execution, "agent"))
    key = _call_key(session, read_field(execution, "call_id"), execution, (name, arguments))
    return name, arguments, session, key


def _call_key_of(execution: object) -> _CallKey:
    """Only the call key of an execution: the braked body's lookup of a copy reads no more."""
    session = agent_session(read_field(execution, "agent"))
    return _call_key(session, read_field(execution, "call_id"), execution)


def _call_key(
    session: str, call_id: object, execution: object, read: tuple[str, Any] | None = None
) -> _CallKey:
    """The call key (see ``_CallKey``); ``read`` is the name and arguments, if already read."""
    if call_id is None:
        call_id = read_field(execution, "callId")
    if type(call_id) is str:
        if call_id:
            return (session, call_id)  # the usual call id: a plain string
    elif isinstance(call_id, (str, int)) and call_id != "":
        return (session, call_id)
    if read is None:
        read = (str(read_field(execution, "name")), read_field(execution, "arguments"))
    name, arguments = read
    return (session, name, id(arguments))


_NOT_ALL_ATTRIBUTES: set[type] = set()
"""Object types seen without one of the four attributes: read field by field, not in one go."""


def _own_attribute(source: object, name: str) -> object:
    """The instance's own attribute ``name`` (not one it gets from its class), or ``_MISSING``."""
    return getattr(source, "__dict__", {}).get(name, _MISSING)
