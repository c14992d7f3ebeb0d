"""``Brakes``: the loop brake and, optionally, the circuit breaker, judged together for one call.

This is what a host other than the reference harness holds — a framework adapter, a coding-agent
hook, the MCP proxy: one object to ask before a tool call runs, raising the ``ToolCallDenied`` a
host catches once. ``Brakes.from_profile`` configures both from a harness profile's rows exactly
as the harness does, so they are tuned with the same patch files everywhere.

Checking needs neither pluggy nor the harness; only ``from_profile`` imports them, when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, final

from dsh_loop_brake._brake import LoopBrake
from dsh_loop_brake._breaker import CircuitBreaker
from dsh_loop_brake._breaker_config import CircuitBreakerConfigError
from dsh_loop_brake._errors import InvalidMaxRepeatsError, LoopBrakeConfigError, ToolCallDenied

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable

    from dsh_loop_brake.harness import Harness, Row

_Handle = TypeVar("_Handle", LoopBrake, CircuitBreaker)

__all__ = ["Brakes"]


@final
class Brakes:
    """The loop brake, then (when there is one) the circuit breaker, before each tool call.

    ``Brakes()`` is a default ``LoopBrake()`` alone; pass your own brake, a ``CircuitBreaker``, or
    both. ``loop_brake`` is ``None`` only for brakes built from a profile whose ``loop-brake`` row
    is disabled; ``circuit_breaker`` is ``None`` when there is no breaker.
    """

    __slots__ = ("_harness", "circuit_breaker", "loop_brake")

    def __init__(
        self, loop_brake: LoopBrake | None = None, circuit_breaker: CircuitBreaker | None = None
    ) -> None:
        self.loop_brake: LoopBrake | None = loop_brake if loop_brake is not None else LoopBrake()
        self.circuit_breaker = circuit_breaker
        self._harness: Harness | None = None  # what from_profile applied the rows with

    def check(self, tool_name: str, args: object, *, session_id: str | None) -> None:
        """Judge one call before it runs; raise the ``ToolCallDenied`` that denies it.

        The loop brake counts it first (``LoopBrakeError``); a call it denies never reaches the
        breaker, so the breaker neither records nor counts it. Then the circuit breaker judges it
        with ``session_id`` as the agent (``CircuitBreakerError``). ``session_id=None`` is the
        loop brake's current session and the breaker's calls without an agent.
        """
        try:
            brake = self.loop_brake
            if brake is not None:
                if session_id is None:
                    brake.check(tool_name, args)
                else:
                    brake.check(tool_name, args, session_id=session_id)
            breaker = self.circuit_breaker
            if breaker is not None:
                breaker.check_call(tool_name, args, agent=session_id)
        except ToolCallDenied:
            del args  # no frame of ours may still hold the arguments once a denial leaves it
            raise

    @classmethod
    def from_profile(
        cls,
        profile: str = "default",
        *,
        home: str | os.PathLike[str] | None = None,
        patches: Iterable[str | os.PathLike[str]] = (),
    ) -> Brakes:
        """Both brakes as the harness applies a profile's ``loop-brake`` and ``circuit-breaker``
        rows: its patch layers composed (``home`` is ``$DSH_HOME``, ``patches`` come last), the
        environment's fallback, validation at apply.

        A profile without a ``loop-brake`` row (or that does not exist) gets the package's own
        bundle row: the defaults. A disabled row brakes nothing. An unusable value raises the
        plugin's ``LoopBrakeConfigError`` (``CircuitBreakerConfigError`` for the breaker) with
        the file and line it came from; a malformed patch file raises the harness's error.
        Call :meth:`close` when done (or use ``with``).
        """
        from dsh_loop_brake._bundle_row import loop_brake_bundle_row
        from dsh_loop_brake.circuit_breaker import ROW_ID as CIRCUIT_BREAKER_ROW
        from dsh_loop_brake.harness import Harness, compose
        from dsh_loop_brake.harness.profiles import resolve_home
        from dsh_loop_brake.plugin import ROW_ID as LOOP_BRAKE_ROW

        home = resolve_home(home)  # also where a relative sqlite: store path lands
        composition = compose(profile, home, patches)
        loop_row = composition.row(LOOP_BRAKE_ROW) or loop_brake_bundle_row()
        breaker_row = composition.row(CIRCUIT_BREAKER_ROW)
        rows = [row for row in (loop_row, breaker_row) if row is not None]
        try:
            # Applied as the harness boots them (disabled rows are skipped): the same plugins,
            # resolution, validation and stores. The harness is kept, and with it the rows'
            # fibers: disposing them (which closes the stores) is what close() is for.
            harness = Harness.from_rows(rows, home=home)
        except CircuitBreakerConfigError as error:
            raise _located(error, breaker_row) from None
        except LoopBrakeConfigError as error:
            raise _located(error, loop_row) from None
        try:
            brakes = cls.__new__(cls)
            brakes.loop_brake = _handle(harness, loop_row, LoopBrake)
            brakes.circuit_breaker = _handle(harness, breaker_row, CircuitBreaker)
            brakes._harness = harness
        except BaseException:
            harness.dispose()
            raise
        return brakes

    def close(self) -> None:
        """Dispose what :meth:`from_profile` applied (every streak and window is forgotten, a
        store it opened is closed); idempotent, and nothing to do for brakes built directly."""
        harness, self._harness = self._harness, None
        if harness is not None:
            harness.dispose()

    def __enter__(self) -> Brakes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Brakes(loop_brake={self.loop_brake!r}, circuit_breaker={self.circuit_breaker!r})"


def _handle(harness: Harness, row: Row | None, kind: type[_Handle]) -> _Handle | None:
    """What the row's plugin returned when applying it, or ``None`` for no row or a disabled one."""
    if row is None or row.disabled:
        return None
    handle = harness.handle(row.id)
    if not isinstance(handle, kind):
        raise TypeError(
            f"the plugin {row.name!r} returned {type(handle).__name__} for row {row.id!r}, not a"
            f" {kind.__name__}; Brakes.from_profile needs this package's plugin for that row"
        )
    return handle


def _located(error: LoopBrakeConfigError, row: Row | None) -> LoopBrakeConfigError:
    """The error with the file and line of the row's bad value in front (``path:line: ...``), as
    the command line shows it; as it is when that place is unknown or already said."""
    if row is None or error.path is not None:
        return error
    config = row.config if isinstance(row.config, dict) else {}
    if isinstance(error, InvalidMaxRepeatsError):
        if config.get("maxRepeats") is None:
            return error  # the value came from the environment, which the message names
        key: str | None = "maxRepeats"
    else:
        key = getattr(error, "key", None)
    origin = (row.sources.get(f"config.{key}") if key else None) or row.sources.get("config")
    if origin is None or str(error).startswith(f"{origin.path}:"):
        return error
    import copy

    located = copy.copy(error)  # the same type and attributes, with the place in front
    located.args = (f"{origin}: {error}",)
    located.path, located.line = origin.path, origin.line
    return located
