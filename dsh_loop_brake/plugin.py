"""The loop-brake plugin: puts the brake into a host's tool registry and takes it out on dispose.

Two seams, one count per call:

* ``ctx.tools.register`` is patched so every definition registered while the plugin lives carries
  a braked ``execute`` (``decorate_tool``). This is the enforcement path: the braked body counts
  its own call, however and whenever the host gets to it -- with a copy, a deep copy or a rebuilt
  execution, in another thread or task, from a queue after ``execute`` returned. A braked body
  that runs inside an identical braked call (a definition that wraps one and is registered over
  it) does not count again; ``_wrapping`` says how.
* ``ctx.tools.execute`` is patched when the host has it, and counts only the calls whose body
  will not count itself: tools whose live definition the register seam did not brake (they were
  registered before the plugin was applied). The live definition is the host's ``get(name)``;
  for a host without one, the names the register seam braked answer instead. Each host call
  runs in a ``HostCall`` scope of its own, so a body the host runs again for it (a retry, a
  speculative second run) is the same call, counted once.

A call is read by attribute or by key (``name``, ``arguments``, ``agent`` and its ``id``); call
ids are not needed. Reading that fails (a property that raises) lets the call run unbraked, with
one warning per tool: a brake must never block real work because its own parts failed.

Applying patches both seams or neither (a ``TypeError`` says which attribute could not be set and
why). Disposing turns both seams and every braked body into pass-throughs, forgets the streaks,
and puts the registry's attributes back -- where another plugin's wrapper sits on top of ours, ours
stays in place, passing calls through, and goes when the layer above it goes, if that is ours.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import CoroutineType
from typing import Any, Final, Protocol, final

from dsh_loop_brake._execution import OBJECT_TYPES, execution_session, read_field, warn_fail_open
from dsh_loop_brake._wrapping import (
    BRAKES_ATTRIBUTE,
    HostCall,
    Switch,
    braked_execute,
    count_call,
    enter_call,
    inside_call,
    leave_call,
    tool_name,
    with_execute,
)
from dsh_loop_brake.harness.hookspecs import hookimpl
from dsh_loop_brake.loop_brake import PLUGIN_NAME, LoopBrake, resolve_max_repeats
from dsh_loop_brake.stores._settings import open_row_store, resolve_store_setting

__all__ = ["ROW_ID", "apply", "dsh_apply"]

ROW_ID: Final = "loop-brake"


class _Row(Protocol):
    id: str
    name: str
    config: Any
    disabled: bool


def apply(ctx: Any, config: Any = None) -> LoopBrake:
    """Validate ``config``, brake ``ctx.tools`` and return the live ``LoopBrake``.

    The row's ``store`` (else ``DSH_LOOP_BRAKE_STORE``, else ``memory:``) is opened and reached
    once here, after validation and before the registry is touched; a relative ``sqlite:`` path
    is under ``ctx.home`` (the harness's ``DSH_HOME``) when the host has one. Dispose closes it.
    """
    # Validate first: a brake with other teeth than the profile asked for must be refused now,
    # not found out once a loop is already burning tokens.
    max_repeats = resolve_max_repeats(config)
    store_setting = resolve_store_setting(config)
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
    store = open_row_store(store_setting, ctx)
    try:
        brake = LoopBrake(max_repeats, store=store)
        installation = _Installation(tools, brake)
        ctx.effect(installation.install)
    except BaseException:
        store.close()  # all or nothing: nothing applied, nothing left open
        raise
    return brake


@hookimpl
def dsh_apply(ctx: Any, row: _Row) -> LoopBrake | None:
    """Apply the rows named ``dsh-loop-brake``; leave every other row to its own plugin."""
    if row.name != PLUGIN_NAME:
        return None
    return apply(ctx, row.config)


@final
class _Installation:
    """Both seams of one applied brake, and how to undo them."""

    __slots__ = ("_brake", "_braked_names", "_get", "_patches", "_switch", "_tools")

    def __init__(self, tools: Any, brake: LoopBrake) -> None:
        self._tools = tools
        self._brake = brake
        self._switch = Switch(on=False)  # on once both seams are in
        self._patches: tuple[_Patch, ...] = ()
        # Names of the tools the register seam braked: the live definitions of a host without get.
        self._braked_names: set[str] = set()
        # The host's lookup of the live definition, as it was at apply (a get patched later to
        # hand out wrapped definitions cannot hide what the registry really runs).
        get = getattr(tools, "get", None)
        self._get: Callable[[str], Any] | None = get if callable(get) else None

    @property
    def live(self) -> bool:
        """Applied and not disposed."""
        return self._switch.on

    def install(self) -> Callable[[], None]:
        tools = self._tools
        patches = [_Patch(tools, "register", self._register_seam(tools.register), self)]
        try:
            execute = getattr(tools, "execute", None)
            if callable(execute):
                patches.append(_Patch(tools, "execute", self._execute_seam(execute), self))
        except BaseException:
            for patch in reversed(patches):
                patch.undo()  # all or nothing: the registry exactly as it was
            raise
        self._patches = tuple(patches)
        self._switch.on = True
        return self.dispose

    def dispose(self) -> None:
        # Off first: definitions braked while the plugin lived run unbraked from now on, and a
        # call already inside a seam is not denied after dispose.
        self._switch.on = False
        try:
            for patch in reversed(self._patches):
                patch.undo()
        finally:
            store = self._brake.store
            try:
                # A brake that remembered across a reload would deny a fresh run's first call.
                # A shared store belongs to every process that uses it: left as it is.
                if not store.shared:
                    self._brake.reset()
            finally:
                store.close()  # the store the plugin opened at apply

    # -- the register seam ---------------------------------------------------------------

    def _register_seam(self, register: Callable[..., Any]) -> Callable[..., Any]:
        switch = self._switch
        keyword = _first_parameter(register) or "definition"

        @functools.wraps(register)
        def braked_register(*args: Any, **kwargs: Any) -> Any:
            if switch.on:
                if args:
                    args = (self._braked(args[0]), *args[1:])
                elif keyword in kwargs:
                    kwargs[keyword] = self._braked(kwargs[keyword])
            return register(*args, **kwargs)

        return braked_register

    def _braked(self, definition: Any) -> Any:
        """``definition`` with a braked execute; as it is when it has nothing callable to run."""
        try:
            execute = read_field(definition, "execute")
            if not callable(execute):
                return definition  # nothing to run, so nothing to brake
            name = tool_name(definition, execute)
            braked = braked_execute(execute, self._brake, tool=name, switch=self._switch)
            definition = with_execute(definition, braked)
        except Exception as error:
            # Fail open: the host registers it as it is, and the execute seam counts its calls.
            warn_fail_open(None, error, "reading its definition")
            return definition
        self._braked_names.add(name)
        return definition

    # -- the execute seam ----------------------------------------------------------------

    def _execute_seam(self, execute: Callable[..., Any]) -> Callable[..., Any]:
        import inspect

        switch = self._switch
        counted = self._counted
        keyword = _first_parameter(execute) or "execution"
        # Both seams take the usual call, execute(execution), as one positional argument and
        # hand it on as it came: *args and **kwargs repacking cost about 550 instructions a
        # call on replay's path (valgrind, see docs/performance.md).

        if inspect.iscoroutinefunction(execute):

            @functools.wraps(execute)
            async def braked_execute_async(
                execution: Any = _ABSENT, /, *rest: Any, **kwargs: Any
            ) -> Any:
                try:
                    call = None
                    token = None
                    if switch.on:
                        call = counted(kwargs.get(keyword) if execution is _ABSENT else execution)
                        # A host call: a chain of its own, whatever ran around it.
                        token = enter_call(HostCall() if call is None else call)
                    try:
                        if rest or kwargs or execution is _ABSENT:
                            return await execute(*_given(execution), *rest, **kwargs)
                        return await execute(execution)  # the usual call, handed on as it came
                    finally:
                        if token is not None:
                            leave_call(token)
                except BaseException:
                    del execution, rest, kwargs, call  # no argument in this frame's locals
                    raise

            return braked_execute_async

        @functools.wraps(execute)
        def braked_execute_sync(execution: Any = _ABSENT, /, *rest: Any, **kwargs: Any) -> Any:
            try:
                call = scope = token = None
                if switch.on:
                    call = counted(kwargs.get(keyword) if execution is _ABSENT else execution)
                    # A host call: a chain of its own, whatever ran around it.
                    scope = HostCall() if call is None else call
                    token = enter_call(scope)
                try:
                    if rest or kwargs or execution is _ABSENT:
                        result = execute(*_given(execution), *rest, **kwargs)
                    else:
                        result = execute(execution)  # the usual call, handed on as it came
                finally:
                    if token is not None:
                        leave_call(token)
            except BaseException:
                del execution, rest, kwargs, call, scope  # no argument in this frame's locals
                raise
            if type(result) is CoroutineType and scope is not None:
                return inside_call(result, scope)  # the host call goes on when it is awaited
            return result

        return braked_execute_sync

    def _counted(self, execution: Any) -> Any:
        """Count a host call that its body will not count; the call to run it in, or ``None``."""
        if execution is None:
            return None  # no call to read: the host's execute has its own say
        name = None
        try:
            # read_field's usual case in place: this runs on every host call's path.
            name = (
                execution.name if type(execution) in OBJECT_TYPES else read_field(execution, "name")
            )
            if type(name) is not str:
                name = str(name)
            if self._body_counts(name):
                return None
            arguments = read_field(execution, "arguments")
            session = execution_session(execution)
        except Exception as error:
            warn_fail_open(name, error, "reading its execution")
            return None
        try:
            return count_call(self._brake, name, arguments, session, None)  # a new host call
        except BaseException:
            del execution, arguments  # no argument in this frame's locals
            raise

    def _body_counts(self, name: str) -> bool:
        """Whether the live definition of ``name`` has a body this brake braked."""
        if self._get is None:
            return name in self._braked_names
        try:
            definition = self._get(name)
            if type(definition) in OBJECT_TYPES:  # read_field's usual case in place
                execute = getattr(definition, "execute", None)
            else:
                execute = read_field(definition, "execute")
        except Exception:
            execute = None  # a get that is no lookup by name: the names answer instead
        if callable(execute):
            return self._brake in getattr(execute, BRAKES_ATTRIBUTE, ())
        return name in self._braked_names


def _first_parameter(method: Callable[..., Any]) -> str | None:
    """The name a host's ``register``/``execute`` takes its one argument by, as a keyword."""
    import inspect

    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return None
    for parameter in parameters:
        if parameter.kind is parameter.POSITIONAL_OR_KEYWORD:
            return str(parameter.name)
        return None
    return None


_ABSENT: Final = object()
"""An ``execute`` called without its execution positionally (by keyword, or not at all)."""


def _given(execution: Any) -> tuple[Any, ...]:
    return () if execution is _ABSENT else (execution,)


# -- patching the registry ------------------------------------------------------------------

_MISSING: Final = object()
"""What an attribute that came from the registry's class is restored to: no instance attribute."""
_PATCH_ATTRIBUTE: Final = "__loop_brake_patch__"


@final
class _Patch:
    """One seam: the registry's attribute ``name`` replaced by our ``wrapper``, and what it was."""

    __slots__ = ("installation", "name", "own", "source", "wrapper")

    def __init__(
        self, source: Any, name: str, wrapper: Callable[..., Any], installation: _Installation
    ) -> None:
        own = _own_value(source, name)
        try:
            setattr(source, name, wrapper)
        except Exception as error:
            raise TypeError(_cannot_patch(source, name, _why_not(source, name, error))) from None
        if getattr(source, name, None) is not wrapper:
            _restore(source, name, own)
            raise TypeError(
                _cannot_patch(source, name, "setting it did not change what it reads as")
            )
        self.source = source
        self.name = name
        self.own = own
        self.wrapper = wrapper
        self.installation = installation
        setattr(wrapper, _PATCH_ATTRIBUTE, self)

    def undo(self) -> None:
        """Put back what was there, unless another wrapper was patched on top of ours since."""
        if getattr(self.source, self.name, None) is not self.wrapper:
            return  # patched again on top: our wrapper stays there, passing calls through
        own = self.own
        # A brake disposed under another's wrapper left its own in place; it goes now, too.
        below = _patch_of(own)
        while below is not None and not below.installation.live:
            own = below.own
            below = _patch_of(own)
        _restore(self.source, self.name, own)


def _patch_of(value: object) -> _Patch | None:
    patch = getattr(value, _PATCH_ATTRIBUTE, None) if value is not _MISSING else None
    return patch if isinstance(patch, _Patch) else None


def _own_value(source: object, name: str) -> object:
    """What to restore ``name`` to: the instance's own value, or ``_MISSING`` (the class's)."""
    own = getattr(source, "__dict__", None)
    if isinstance(own, dict) and name in own:
        return own[name]
    if hasattr(_class_attribute(type(source), name), "__set__"):
        return getattr(source, name)  # a slot, or a property with a setter: set it back
    return _MISSING


def _restore(source: object, name: str, own: object) -> None:
    if own is _MISSING:
        if name in getattr(source, "__dict__", ()):
            delattr(source, name)  # the class's attribute shows through again
    else:
        setattr(source, name, own)


def _class_attribute(cls: type, name: str) -> object:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _why_not(source: object, name: str, error: Exception) -> str:
    cls = type(source)
    attribute = _class_attribute(cls, name)
    if isinstance(attribute, property):
        return f"it is a property of {cls.__name__} without a setter"
    if getattr(getattr(cls, "__dataclass_params__", None), "frozen", False):
        return f"{cls.__name__} is a frozen dataclass"
    if not hasattr(source, "__dict__"):
        return f"{cls.__name__} has __slots__ without a place for it and no __dict__"
    return f"setting it raised {type(error).__name__}"


def _cannot_patch(source: object, name: str, why: str) -> str:
    return (
        f"{PLUGIN_NAME} cannot brake this tool registry: tools.{name} of "
        f"{type(source).__name__} cannot be replaced ({why}); nothing was patched -- give the "
        "plugin a registry whose register and execute can be set (see docs/harness.md)"
    )
