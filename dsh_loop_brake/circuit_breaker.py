"""The circuit-breaker plugin: a windowed duplicate limit and a per-agent call cap, as one guard.

Row id ``circuit-breaker``, name ``dsh-circuit-breaker``. It is not in this package's bundle patch;
a user adds it with an ``insert`` patch. Applied, it installs one synchronous guard through
``ctx.tools.guard`` that denies a call when it would be the ``duplicateLimit``-th identical call in
the agent's window of recent allowed calls, or when the agent has already made
``maxCallsPerAgent`` allowed calls. The guard returns its deny message (a ``str`` carrying
``code == "CIRCUIT_BREAKER"``); outside a guard, ``CircuitBreaker.check_call`` raises
``CircuitBreakerError`` instead.

This module is the public face and the plugin; the work is done in private modules, each with one
job, which it re-exports (none of them needs pluggy or the harness, so a host that only checks
calls imports none of it):

* ``_breaker_config`` — the nine settings, their defaults and validation (``resolve_config``);
* ``_breaker``        — ``CircuitBreaker``: per-agent state and the verdict on a call;
* ``_incidents``      — the incident log.

Exceptions::

    Exception
    └── ToolCallDenied                    (dsh_loop_brake.loop_brake)
        └── CircuitBreakerError           check_call denied a call
    ValueError
     └── LoopBrakeConfigError             (dsh_loop_brake.loop_brake)
          └── CircuitBreakerConfigError   a circuit-breaker config that cannot be applied
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from dsh_loop_brake._breaker import CircuitBreaker, CircuitBreakerError, DenyMessage
from dsh_loop_brake._breaker_config import (
    DEFAULT_DENY_MESSAGE,
    DEFAULTS,
    MAX_WINDOW,
    CircuitBreakerConfig,
    CircuitBreakerConfigError,
    resolve_config,
)
from dsh_loop_brake.harness.hookspecs import hookimpl
from dsh_loop_brake.stores._settings import open_row_store, resolve_store_setting

__all__ = [
    "DEFAULTS",
    "DEFAULT_DENY_MESSAGE",
    "MAX_WINDOW",
    "PLUGIN_NAME",
    "ROW_ID",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "CircuitBreakerConfigError",
    "CircuitBreakerError",
    "DenyMessage",
    "apply",
    "dsh_apply",
    "resolve_config",
]

PLUGIN_NAME: Final = "dsh-circuit-breaker"
ROW_ID: Final = "circuit-breaker"

# How the row's store is named in messages, and the error a store it cannot use is.
_STORE_MESSAGES: Final[dict[str, Any]] = {
    "brake": "circuit breaker",
    "source": "the circuit-breaker patch row",
    "error": CircuitBreakerConfigError,
}


def apply(ctx: Any, config: object = None) -> CircuitBreaker:
    """Validate ``config``, install the breaker's guard on ``ctx.tools`` and return the breaker.

    The config is validated before the registry is touched; then the row's ``store`` (else
    ``DSH_LOOP_BRAKE_STORE``, else ``memory:``) is opened and reached once (a relative
    ``sqlite:`` path is under ``ctx.home``, the harness's ``DSH_HOME``, when the host has one).
    Disposing the context's fiber removes the guard, forgets the state held in memory (a shared
    store is left as it is: it belongs to every process that uses it) and closes the store. With
    ``enabled: false`` no guard is installed.
    """
    settings = resolve_config(config)
    store_setting = resolve_store_setting(
        config if isinstance(config, Mapping) else None, **_STORE_MESSAGES
    )
    tools = getattr(ctx, "tools", None)
    guard: Callable[[Callable[[Any], str | None]], object] | None = getattr(tools, "guard", None)
    effect: Callable[[Callable[[], object]], object] | None = getattr(ctx, "effect", None)
    if not callable(guard):
        raise TypeError(
            f"{PLUGIN_NAME} needs a tool registry with guards: the context has no"
            " tools.guard(fn); apply it in a host that provides one (see docs/harness.md)"
        )
    if not callable(effect):
        raise TypeError(
            f"{PLUGIN_NAME} needs ctx.effect(callback) to be undone on dispose; apply it in a host"
            " that provides fiber effects (see docs/harness.md)"
        )
    store = open_row_store(store_setting, ctx, **_STORE_MESSAGES)
    try:
        breaker = CircuitBreaker(settings, store=store)
        install_guard = guard

        def install() -> Callable[[], None]:
            remove = install_guard(breaker.check) if settings.enabled else None

            def dispose() -> None:
                try:
                    if callable(remove):
                        remove()
                finally:
                    try:
                        breaker.close()  # a breaker never closes the store it was given ...
                    finally:
                        store.close()  # ... so the store apply opened is closed here

            return dispose

        effect(install)
    except BaseException:
        store.close()  # all or nothing: nothing applied, nothing left open
        raise
    return breaker


@hookimpl
def dsh_apply(ctx: Any, row: Any) -> CircuitBreaker | None:
    """Apply rows named ``dsh-circuit-breaker``; leave every other row to its own plugin."""
    try:
        name, config = getattr(row, "name", None), getattr(row, "config", None)
    except Exception:
        return None
    if name != PLUGIN_NAME:
        return None
    return apply(ctx, config)
