"""Braking a tool: a braked function (``wrap_execute``, ``LoopBrake.tool``) and a braked copy of
a tool definition (``decorate_tool``).

**Counting once.** A braked function counts its call and then runs the body *inside* that call:
the braked calls in progress are a chain of ``_Call`` records in a ``ContextVar``, so the chain
follows the body into every thread or task that inherits its context, and into no other. A
braked function called inside a braked call of the same brake, session, tool and identical
arguments runs its body without counting again: that is one call reaching the body through two
wrappers (``decorate_tool(decorate_tool(x))``, a definition that wraps another and is registered
over it). So is a braked function wrapped again by the same brake under *another* name (an alias
registered with what ``get`` returned): that is known when it is wrapped, and the inner layer
does not count again under its own name -- counted under both, each call would end the other
name's streak and the alias would never be denied. Any other call made inside a body -- another
tool, other arguments, another session -- counts. A call that enters through the plugin's
execute seam is a new host call, with a chain of its own: what ran around it does not make it a
repeat of anything.

**One host call, however many runs.** The execute seam runs each host call in a ``HostCall``
scope (the root of its chain). A braked body run straight inside it -- not inside another braked
call -- is recorded there with its verdict, and a later run of the same brake, session, tool and
identical arguments inside that same host call is the same call again, not a new one: a host
that retries a body after a transient error, or starts it twice to take the first answer, has
it counted once, and a retried denial is denied again without counting. What a retried body
calls in turn is counted each run: the body really makes those calls again.

**Tracebacks.** No frame of this module keeps the call's arguments when an exception (a denial
above all) leaves it: each drops them from its locals first, so a traceback rendered with local
variables -- what error trackers do by default -- shows none of them.

**Finding a call's parts.** A braked ``execute`` takes what the host gives it and hands it on
unchanged; the arguments are its first positional argument (else the keyword ``arguments`` or
``args``, or the name of the function's own first parameter), the execution its second (else the
keyword ``execution``, or the name of its second parameter).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from types import CoroutineType
from typing import Any, Final, TypeVar, final

from dsh_loop_brake._brake import LoopBrake
from dsh_loop_brake._canonical import call_digest
from dsh_loop_brake._errors import LoopBrakeError
from dsh_loop_brake._execution import execution_session, read_field, warn_fail_open
from dsh_loop_brake._short_repr import json_literal

__all__ = [
    "BRAKES_ATTRIBUTE",
    "BrakedDefinition",
    "HostCall",
    "Switch",
    "brake_definition",
    "brake_function",
    "braked_execute",
    "count_call",
    "current_call",
    "decorate_tool",
    "enter_call",
    "inside_call",
    "leave_call",
    "tool_name",
    "with_execute",
    "wrap_execute",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

BRAKES_ATTRIBUTE: Final = "__loop_brakes__"
"""On a braked function: the brakes that count its calls (``functools.wraps`` copies it on)."""


@final
class Switch:
    """Whether braked functions brake (``on``) or pass every call straight through.

    The plugin turns its switch off on dispose: what it braked while it lived runs unbraked.
    """

    __slots__ = ("on",)

    def __init__(self, on: bool = True) -> None:
        self.on = on


_ALWAYS_ON: Final = Switch()


# -- counting once ---------------------------------------------------------------------------


@final
class _Call(tuple[Any, ...]):
    """A braked call in progress: ``(brake, tool, session, arguments, outer, layered)``.

    What a braked function called inside it compares itself to. ``layered``: the function it
    runs is itself braked by the same brake, so the next braked layer inside is this very call
    whatever name it counts under. A tuple made by
    ``tuple.__new__`` (no ``__init__`` to run: it is made on every braked call), whose repr
    never shows the arguments.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<braked call of tool {json_literal(self[1])}>"


_new_call: Final = tuple.__new__


def _enclosing(
    call: _Call | None, brake: LoopBrake, tool: str, session: Any, arguments: Any
) -> _Call | None:
    """``call``, or the one it runs inside, that is the very call the others describe."""
    innermost = True
    while call is not None:
        outer_brake, outer_tool, outer_session, outer_arguments, outer, layered = call
        if (
            outer_brake is brake
            and outer_session == session
            # Another name matches only the layer straight around this one: a body further
            # out calling another tool with the same values is a call of its own.
            and (outer_tool == tool or (layered and innermost))
            and _identical(tool, arguments, outer_arguments)
        ):
            return call
        call = outer
        innermost = False
    return None


def _identical(tool: str, arguments: Any, other: Any) -> bool:
    """Whether two calls of ``tool`` ask for the same thing, as the brake identifies calls."""
    if other is arguments:
        return True  # handed on as it came: the usual case, decided without hashing
    try:
        return call_digest(tool, arguments) == call_digest(tool, other)
    except Exception:
        return False  # not identifiable: not the same call, as the brake sees it


@final
class HostCall(list[list[Any]]):
    """One call through the host's ``execute``: the braked body runs made straight inside it.

    The execute seam makes one per host call and runs the call in it (``enter_call``). Each run
    is recorded as ``[call, verdict]``, in the order the runs began (``list.append`` is atomic);
    the first run of a call is counted, and a run again of it in the same host call (a retry, a
    second speculative run) gets the first run's verdict instead of a count -- waiting for it
    when the two run at once in two threads. A list claimed by appending, not a lock around
    the check: the scope is on every host call's path, and a lock per host call cost 3,800
    instructions more per call than this (valgrind, a sync stub host; the scope itself costs
    about 4,700, 9% of a braked call through the reference harness). Its repr never shows the
    arguments it holds.
    """

    __slots__ = ()

    def count_run(
        self, brake: LoopBrake, tool: str, arguments: Any, session: str | None, layered: bool
    ) -> _Call | None:
        """``count_call`` for a body run straight inside this host call."""
        mine: list[Any] = [
            _new_call(_Call, (brake, tool, session, arguments, None, layered)),
            _PENDING,
        ]
        self.append(mine)
        for run in self:
            if run is mine:
                break  # the first run of this call: it is counted
            earlier = run[0]
            if run[1] is not _SUPERSEDED and (
                earlier[0] is brake
                and earlier[1] == tool
                and earlier[2] == session
                and _identical(tool, arguments, earlier[3])
            ):
                mine[1] = _SUPERSEDED  # this run is that one's: no later run waits on it
                del arguments, mine  # no argument in this frame's locals
                return _verdict(run)
        try:
            brake.check(tool, arguments, session_id=session)
        except LoopBrakeError as error:
            mine[1] = error
            del arguments, mine  # no argument in this frame's locals
            raise
        except BaseException:
            mine[1] = _UNBRAKED  # the check failed: count_call lets the call run unbraked
            del arguments, mine
            raise
        mine[1] = None
        counted: _Call = mine[0]
        return counted

    def __repr__(self) -> str:
        return "<host call>"


_PENDING: Final = object()
"""The verdict of a run whose check is under way."""
_UNBRAKED: Final = object()
"""The verdict of a run whose check failed: it ran unbraked (fail open), and so do its reruns."""
_SUPERSEDED: Final = object()
"""A run again of a call run earlier in the host call: the earlier run's verdict is its own."""


def _verdict(run: list[Any]) -> _Call | None:
    """What a run again of ``run``'s call gets: its call to run inside, or its denial raised."""
    verdict = run[1]
    if verdict is _PENDING:
        import time  # two runs of one call at once, in two threads: rare

        while verdict is _PENDING:
            time.sleep(0.0005)  # the first run's check is under way; it sets its verdict
            verdict = run[1]
    if verdict is None:
        call: _Call = run[0]
        return call  # run again: inside the call as it was counted
    if verdict is _UNBRAKED:
        return None
    raise _again(verdict)


def _again(denial: LoopBrakeError) -> LoopBrakeError:
    """The same denial, as a new exception: a retry is told what the first run was told."""
    import copy  # a retried denial is rare: not on every call's import path

    return copy.copy(denial)  # every attribute, and no traceback of the first run


_running: ContextVar[_Call | HostCall | None] = ContextVar("dsh_loop_brake_running", default=None)


def count_call(
    brake: LoopBrake,
    tool: str,
    arguments: Any,
    session: str | None,
    outer: _Call | HostCall | None,
    *,
    layered: bool = False,
) -> _Call | None:
    """Count one call (``LoopBrakeError`` when it is denied) and return the call to run it in.

    ``outer`` is the braked call it runs inside (``current_call()``), else the ``HostCall`` it
    runs straight inside, else ``None`` (a body the host runs on its own); ``layered``, whether
    the function about to run is braked by ``brake`` too. ``None`` when the body is to run as it
    is: inside an identical braked call, or the brake itself failed (the call is allowed, one
    warning per tool).
    """
    try:
        if outer is not None:
            if type(outer) is HostCall:
                return outer.count_run(brake, tool, arguments, session, layered)
            same = _enclosing(outer, brake, tool, session, arguments)
            if same is not None:
                if same[1] == tool:
                    return None
                # Not counted again, but run as itself: what its body calls is compared to it.
                inner: _Call = _new_call(_Call, (brake, tool, session, arguments, outer, layered))
                return inner
        brake.check(tool, arguments, session_id=session)
    except LoopBrakeError:
        del arguments, outer  # none of the call left in this frame (see the module docstring)
        raise
    except Exception as error:
        # Fail open: a brake must never block real work because its own parts failed.
        warn_fail_open(tool, error, "the brake's check")
        return None
    call: _Call = _new_call(_Call, (brake, tool, session, arguments, outer, layered))
    return call


# The chain, for the plugin's execute seam: a host call runs inside the call the seam counted,
# or, when its body counts itself, in a ``HostCall`` of its own. Bound methods of the
# ContextVar: they are on every host call's path.
current_call: Final = _running.get
enter_call: Final = _running.set
leave_call: Final = _running.reset


async def inside_call(awaitable: Any, call: _Call | HostCall | None) -> Any:
    """Await ``awaitable`` inside ``call``: a sync body's coroutine runs after the body returned."""
    token = _running.set(call)
    try:
        return await awaitable
    finally:
        _running.reset(token)


# -- braked functions ------------------------------------------------------------------------

_Begin = Callable[[tuple[Any, ...], dict[str, Any]], "_Call | None"]
"""Reads a call's arguments and session from what the function was given, and counts it."""


def _is_async(fn: Callable[..., Any]) -> bool:
    import inspect  # here, not at import: the core's import stays light for one-call processes

    return inspect.iscoroutinefunction(fn)


def _braked(fn: Callable[..., Any], begin: _Begin, switch: Switch, brake: LoopBrake) -> Any:
    """``fn`` with ``begin`` run before its body, inside the call ``begin`` counted."""
    if _is_async(fn):

        @functools.wraps(fn)
        async def braked_async(*args: Any, **kwargs: Any) -> Any:
            call = None
            try:
                if switch.on:
                    call = begin(args, kwargs)  # before the body starts
                if call is None:
                    return await fn(*args, **kwargs)
                token = _running.set(call)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    _running.reset(token)
            except BaseException:
                del args, kwargs, call  # no argument in this frame's locals
                raise

        braked: Callable[..., Any] = braked_async
    else:

        @functools.wraps(fn)
        def braked_sync(*args: Any, **kwargs: Any) -> Any:
            call = None
            try:
                if switch.on:
                    call = begin(args, kwargs)
                if call is None:
                    return fn(*args, **kwargs)
                token = _running.set(call)
                try:
                    result = fn(*args, **kwargs)
                finally:
                    _running.reset(token)
            except BaseException:
                del args, kwargs, call  # no argument in this frame's locals
                raise
            if type(result) is CoroutineType:
                # A sync function that hands back a coroutine (an async callable object): what
                # its body calls runs when that is awaited, and must still be inside this call.
                return inside_call(result, call)
            return result

        braked = braked_sync
    setattr(braked, BRAKES_ATTRIBUTE, (*getattr(fn, BRAKES_ATTRIBUTE, ()), brake))
    return braked


def wrap_execute(
    execute: Callable[..., Any],
    brake: LoopBrake,
    *,
    tool: str,
    session_id: str | None = None,
) -> Callable[..., Any]:
    """``execute`` with ``brake.check`` run before it; async when ``execute`` is.

    The session is ``session_id``, else the execution's agent id, else the current
    ``brake.session(...)``, else ``"default"``.
    """
    return braked_execute(execute, brake, tool=tool, session_id=session_id)


def braked_execute(
    execute: Callable[..., Any],
    brake: LoopBrake,
    *,
    tool: str,
    session_id: str | None = None,
    switch: Switch = _ALWAYS_ON,
) -> Callable[..., Any]:
    """``wrap_execute``, with the ``switch`` that turns it into a pass-through."""
    if not callable(execute):
        raise TypeError(f"wrap_execute needs a callable execute, got {type(execute).__name__}")
    if not isinstance(tool, str):
        raise TypeError(f"wrap_execute: the tool name must be a str, got {type(tool).__name__}")
    places = _Places.of(execute)
    layered = _braked_by(execute, brake)

    def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call | None:
        try:
            arguments, session = places.read(args, kwargs)
        except Exception as error:
            warn_fail_open(tool, error, "reading its execution")
            return None
        try:
            if session_id is not None:
                session = session_id
            return count_call(brake, tool, arguments, session, _running.get(), layered=layered)
        except BaseException:
            del args, kwargs, arguments  # no argument in this frame's locals
            raise

    general: Callable[..., Any] = _braked(execute, begin, switch, brake)
    if _is_async(execute):
        return general

    # The usual call, body(arguments, execution), read and handed on in place: the general
    # wrapper's repacking and its reader cost about 1,200 instructions a call on replay's path,
    # 2% of a braked call through the harness (valgrind; see docs/performance.md).
    @functools.wraps(execute)
    def braked_sync(
        arguments: Any = _ABSENT, execution: Any = _ABSENT, /, *rest: Any, **kwargs: Any
    ) -> Any:
        call = None
        try:
            if rest or kwargs or execution is _ABSENT:
                return general(*_given(arguments, execution), *rest, **kwargs)
            if switch.on:
                try:
                    session = execution_session(execution) if session_id is None else session_id
                except Exception as error:
                    warn_fail_open(tool, error, "reading its execution")
                else:
                    call = count_call(
                        brake, tool, arguments, session, _running.get(), layered=layered
                    )
            if call is None:
                return execute(arguments, execution)
            token = _running.set(call)
            try:
                result = execute(arguments, execution)
            finally:
                _running.reset(token)
        except BaseException:
            del arguments, execution, rest, kwargs, call  # no argument in this frame's locals
            raise
        if type(result) is CoroutineType:
            return inside_call(result, call)  # see _braked
        return result

    setattr(braked_sync, BRAKES_ATTRIBUTE, getattr(general, BRAKES_ATTRIBUTE))
    return braked_sync


def _braked_by(fn: Callable[..., Any], brake: LoopBrake) -> bool:
    """Whether ``fn`` is braked by ``brake`` already (or wraps, by ``functools.wraps``, what is)."""
    try:
        return brake in getattr(fn, BRAKES_ATTRIBUTE, ())
    except Exception:
        return False  # an odd callable whose attributes raise: nothing known about it


_ABSENT: Final = object()
"""An argument the caller did not pass."""


def _given(arguments: Any, execution: Any) -> tuple[Any, ...]:
    """What the caller passed positionally of the two."""
    if arguments is _ABSENT:
        return ()
    return (arguments,) if execution is _ABSENT else (arguments, execution)


@final
class _Places:
    """Where a braked ``execute`` finds the arguments and the execution among what it is given."""

    __slots__ = ("arguments", "execution")

    def __init__(self, arguments: tuple[str, ...], execution: tuple[str, ...]) -> None:
        self.arguments = arguments  # keywords the arguments may come by, first match wins
        self.execution = execution

    @classmethod
    def of(cls, execute: Callable[..., Any]) -> _Places:
        import inspect

        first = second = ""
        try:
            parameters = list(inspect.signature(execute).parameters.values())
        except (TypeError, ValueError):  # no signature to read (some builtins)
            parameters = []
        positional = [
            parameter
            for parameter in parameters
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        ]
        if positional and positional[0].kind is positional[0].POSITIONAL_OR_KEYWORD:
            first = positional[0].name
        if len(positional) > 1 and positional[1].kind is positional[1].POSITIONAL_OR_KEYWORD:
            second = positional[1].name
        arguments = [first] + [name for name in ("arguments", "args") if name != second]
        execution = [second] + [name for name in ("execution",) if name != first]
        return cls(
            tuple(dict.fromkeys(name for name in arguments if name)),
            tuple(dict.fromkeys(name for name in execution if name)),
        )

    def read(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, str | None]:
        """The call's arguments, and its session from the execution's agent (``None``: none)."""
        if len(args) >= 2:
            arguments, execution = args[0], args[1]  # the usual call: body(arguments, execution)
        else:
            execution = _first_of(kwargs, self.execution) if kwargs else None
            if args:
                arguments = args[0]
            elif kwargs:
                arguments = self._arguments_by_keyword(kwargs)
            else:
                arguments = None
        return arguments, execution_session(execution)

    def _arguments_by_keyword(self, kwargs: dict[str, Any]) -> Any:
        for name in self.arguments:
            if name in kwargs:
                return kwargs[name]
        # No keyword names them: the call's own keywords are its arguments.
        return {key: value for key, value in kwargs.items() if key not in self.execution}


def _first_of(kwargs: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in kwargs:
            return kwargs[name]
    return None


def brake_function(
    fn: F, brake: LoopBrake, *, name: str | None = None, session_id: str | None = None
) -> F:
    """``LoopBrake.tool``: ``fn`` braked as a tool whose arguments are its parameters."""
    import inspect

    if not callable(fn):
        raise TypeError(f"LoopBrake.tool decorates a function, got {type(fn).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"LoopBrake.tool: name must be a str, got {type(name).__name__}")
    tool = name or getattr(fn, "__name__", None) or type(fn).__name__
    signature = inspect.signature(fn)
    parameters = signature.parameters
    kinds = {parameter.name: parameter.kind for parameter in parameters.values()}
    first = next(iter(parameters.values()), None)
    # A method decorated in its class: the instance is not part of what the call asks for.
    layered = _braked_by(fn, brake)
    skipped = (
        first.name
        if first is not None
        and first.name in ("self", "cls")
        and first.kind in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD)
        else None
    )

    def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call | None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return None  # a call that does not fit: the function raises its own TypeError
        arguments = _bound_arguments(bound, kinds, skipped)
        try:
            return count_call(brake, tool, arguments, session_id, _running.get(), layered=layered)
        except BaseException:
            del args, kwargs, bound, arguments  # no argument in this frame's locals
            raise

    braked: F = _braked(fn, begin, _ALWAYS_ON, brake)
    return braked


def _bound_arguments(bound: Any, kinds: dict[str, Any], skipped: str | None) -> dict[str, Any]:
    """A call bound to its signature as the tool's arguments: each parameter by its name."""
    import inspect

    bound.apply_defaults()
    arguments: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        kind = kinds[key]
        if kind is inspect.Parameter.VAR_POSITIONAL:
            arguments[key] = list(value)  # *args: a list under its name
        elif kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)  # **kwargs: merged in as top-level keys
        elif key != skipped:
            arguments[key] = value
    return arguments


# -- braked definitions ----------------------------------------------------------------------


def decorate_tool(definition: T, brake: LoopBrake) -> T:
    """A copy of ``definition`` whose ``execute`` is braked under the definition's name.

    Raises ``TypeError`` for a definition without a callable ``execute``.
    """
    return brake_definition(definition, brake)


def brake_definition(definition: T, brake: LoopBrake, *, switch: Switch = _ALWAYS_ON) -> T:
    """``decorate_tool``, with the ``switch`` that turns its braked ``execute`` off."""
    execute = read_field(definition, "execute")
    if not callable(execute):
        raise TypeError(_without_execute(definition))
    braked = braked_execute(execute, brake, tool=tool_name(definition, execute), switch=switch)
    return with_execute(definition, braked)


def tool_name(definition: object, execute: object) -> str:
    """The name a definition's calls are counted under: its ``name``, else its body's name."""
    try:
        name = read_field(definition, "name")
    except Exception:
        name = None  # a name that cannot be read: the body's name stands in
    if type(name) is str and name:
        return name
    if name is not None and name != "":
        return str(name)
    fallback = getattr(execute, "__name__", None)
    return fallback if isinstance(fallback, str) and fallback else type(definition).__name__


def _without_execute(definition: object) -> str:
    kind = type(definition).__name__
    if callable(definition):
        return (
            f"decorate_tool needs a tool definition with a callable execute, got the {kind} "
            f"{getattr(definition, '__name__', kind)!r}; to brake a plain function, decorate it "
            "with @brake.tool (LoopBrake.tool)"
        )
    return (
        f"decorate_tool needs a tool definition with a callable execute, got {_a(kind)} without "
        "one: give it an execute (a dataclass, object or mapping with name and execute)"
    )


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def with_execute(definition: T, execute: Callable[..., Any]) -> T:
    """A copy of ``definition`` with ``execute`` in place of its own; every other field kept.

    Where the definition's class cannot hold a replaced ``execute`` (slots without room for
    it, a read-only attribute, a property, an object that cannot be copied), a
    ``BrakedDefinition`` that reads everything else from the original.
    """
    if isinstance(definition, Mapping):
        mapping: T = _mapping_with(definition, execute)
        return mapping
    if isinstance(definition, tuple) and hasattr(definition, "_replace"):
        # A NamedTuple: its fields are read-only properties that only _replace can set.
        replaced: T = definition._replace(execute=execute)
        return replaced
    import dataclasses

    if dataclasses.is_dataclass(definition) and not isinstance(definition, type):
        try:
            copied: T = dataclasses.replace(definition, execute=execute)
        except Exception:
            pass  # execute is not an init field, an InitVar needs a value...: copy it instead
        else:
            return copied
    import copy

    try:
        duplicate = copy.copy(definition)
        if duplicate is not definition:
            object.__setattr__(duplicate, "execute", execute)
            if getattr(duplicate, "execute", None) is execute:
                return duplicate
    except Exception:
        pass  # no room for execute (slots, a property), or it cannot be copied
    proxy: T = BrakedDefinition(definition, execute)  # type: ignore[assignment]
    return proxy


def _mapping_with(definition: Mapping[str, Any], execute: Callable[..., Any]) -> Any:
    if type(definition) is not dict and isinstance(definition, MutableMapping):
        import copy

        try:
            duplicate = copy.copy(definition)  # keeps the mapping's own type
            if duplicate is not definition:
                duplicate["execute"] = execute
                return duplicate
        except Exception:
            pass
    return {**definition, "execute": execute}


@final
class BrakedDefinition:
    """A braked stand-in for a definition whose class cannot hold a replaced ``execute``.

    ``execute`` is the braked one; every other attribute is read from (and set on) the
    original, and ``isinstance`` sees the original's class.
    """

    __slots__ = ("_loop_brake_original", "execute")

    def __init__(self, original: object, execute: Callable[..., Any]) -> None:
        object.__setattr__(self, "_loop_brake_original", original)
        object.__setattr__(self, "execute", execute)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_loop_brake_original"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "execute":
            object.__setattr__(self, name, value)
        else:
            setattr(self._loop_brake_original, name, value)

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:  # what isinstance reads, after the type
        return type(self._loop_brake_original)

    def __dir__(self) -> list[str]:
        return sorted({*dir(self._loop_brake_original), "execute"})

    def __repr__(self) -> str:
        return f"<braked {self._loop_brake_original!r}>"
