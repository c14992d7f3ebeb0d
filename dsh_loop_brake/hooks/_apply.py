"""The profile's rows applied for one hook call: the package's own brakes on the rows' stores.

What the plugins do at apply, minus the tool registry: the ``loop-brake`` row's config goes
through ``resolve_max_repeats`` and ``resolve_store_setting``, the ``circuit-breaker`` row's
through ``resolve_config`` and ``resolve_store_setting``, and the brakes are ``LoopBrake`` and
``CircuitBreaker`` on the stores those settings name. The hook differs from the harness in two
things only, both because every tool call is a new process:

- a row whose store is not configured (no ``store``, no ``DSH_LOOP_BRAKE_STORE``) keeps its
  state in ``sqlite:state/brakes.sqlite3`` under the dsh home, not in memory; a row that says
  ``memory:`` is a configuration error (memory would remember nothing);
- a relative ``incidentLog`` is under the dsh home, as a relative ``sqlite:`` path is (the
  host runs the hook in whatever directory its session is in).

Both brakes on one URL share one open store. A store the hook cannot open, or that fails inside
a check, is the hook's own failure (:class:`~dsh_loop_brake.hooks._errors.HookError`: exit 1, one
line naming the store and the error's type), where a brake in a long-lived host would fail open
by itself: the host runs the call either way, and the user is told on every call, not once.
"""

from __future__ import annotations

import os

from dsh_loop_brake._config import resolve_max_repeats
from dsh_loop_brake._errors import LoopBrakeConfigError, ToolCallDenied
from dsh_loop_brake.hooks._errors import HookError
from dsh_loop_brake.hooks._paths import DEFAULT_STATE_FILE
from dsh_loop_brake.stores import StoreError, open_store, redact_url
from dsh_loop_brake.stores._settings import resolve_store_setting

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from dsh_loop_brake._brake import LoopBrake
    from dsh_loop_brake._breaker import CircuitBreaker
    from dsh_loop_brake._store import Store
    from dsh_loop_brake.hooks._profile import ProfileRows
    from dsh_loop_brake.stores._settings import StoreSetting

__all__ = ["DEFAULT_STORE", "HookBrakes", "StoreFailed", "apply_rows"]

#: Where a row without a store keeps its counts: a file under the dsh home.
DEFAULT_STORE = f"sqlite:{DEFAULT_STATE_FILE}"

# How each row's brake and row are named in messages: what the two plugins pass to
# resolve_store_setting.
_LOOP_BRAKE = {"brake": "loop brake", "source": "the loop-brake patch row"}
_CIRCUIT_BREAKER = {"brake": "circuit breaker", "source": "the circuit-breaker patch row"}


class StoreFailed(BaseException):
    """A store failed inside a brake's check, seen through :class:`_OwnStore`.

    A ``BaseException``, so that it passes the brakes' ``except Exception`` (their fail-open for
    a long-lived host, which warns through ``logging``) and reaches the hook, which fails open
    its own way: exit 1 and one line. ``error`` is the store's exception.
    """

    def __init__(self, url: str, error: Exception) -> None:
        super().__init__(url)
        self.url = url
        self.error = error


class _OwnStore:
    """A store as the hook's brakes use it: the same store, but a failure is :class:`StoreFailed`.

    Every member of the store protocol reads through to the store; its operations raise
    ``StoreFailed`` instead of the store's own exception.
    """

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value
        store = self._store

        def operation(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Exception as error:
                raise StoreFailed(store.url, error) from None

        return operation


class HookBrakes:
    """The brakes one hook call applies (``None``: that row brakes nothing) and their stores."""

    __slots__ = ("circuit_breaker", "loop_brake", "stores")

    def __init__(
        self,
        loop_brake: LoopBrake | None,
        circuit_breaker: CircuitBreaker | None,
        stores: dict[tuple[str, int], Store],
    ) -> None:
        self.loop_brake = loop_brake
        self.circuit_breaker = circuit_breaker
        self.stores = stores

    def check(self, tool_name: str, arguments: object, session: str) -> str | None:
        """Judge the call as ``Brakes.check`` does (the loop brake, then the circuit breaker with
        the session as its agent); the denial message, or ``None`` when the call may run."""
        outcome = "nothing was counted"
        try:
            if self.loop_brake is not None:
                self.loop_brake.check(tool_name, arguments, session_id=session)
                outcome = "the loop brake counted the call, the circuit breaker did not"
            if self.circuit_breaker is not None:
                self.circuit_breaker.check_call(tool_name, arguments, agent=session)
        except ToolCallDenied as denial:
            return str(denial)
        except StoreFailed as failure:
            raise store_error(failure.url, failure.error, outcome) from None
        return None


def apply_rows(rows: ProfileRows, home: str, environ: Mapping[str, str]) -> HookBrakes:
    """The brakes of ``rows`` (a profile without a ``loop-brake`` row: the defaults), their
    stores open; raises :class:`HookError` for a configuration the hook cannot apply."""
    loop_row = rows.loop_brake
    breaker_row = rows.circuit_breaker
    stores: dict[tuple[str, int], Store] = {}
    loop_brake = breaker = None
    if loop_row is None or not loop_row.disabled:
        config = None if loop_row is None else loop_row.config
        max_repeats = _resolved(resolve_max_repeats, config, environ)
        setting = _resolved(resolve_store_setting, config, environ, **_LOOP_BRAKE)
        store = _store(setting, home, stores, _LOOP_BRAKE)
        from dsh_loop_brake._brake import LoopBrake

        loop_brake = LoopBrake(max_repeats, store=store)
    if breaker_row is not None and not breaker_row.disabled:
        # Imported only for a profile that has the breaker: the hook's start-up is paid per call.
        from dsh_loop_brake._breaker_config import CircuitBreakerConfigError, resolve_config

        config = _incident_log_under_home(breaker_row.config, home)
        settings = _resolved(resolve_config, config)
        if settings.enabled:
            setting = _resolved(
                resolve_store_setting,
                config,
                environ,
                error=CircuitBreakerConfigError,
                **_CIRCUIT_BREAKER,
            )
            store = _store(setting, home, stores, _CIRCUIT_BREAKER)
            from dsh_loop_brake._breaker import CircuitBreaker

            breaker = CircuitBreaker(settings, store=store)
    return HookBrakes(loop_brake, breaker, stores)


def _resolved(resolve: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``resolve(...)``, a plugin's resolver. The row's own values were validated, located at
    their file and line, when the profile was composed: what fails here is the environment's,
    and the message names the variable."""
    try:
        return resolve(*args, **kwargs)
    except LoopBrakeConfigError as error:
        raise HookError(str(error)) from None


def _incident_log_under_home(config: Any, home: str) -> Any:
    """The config with a relative ``incidentLog`` under the dsh home (see the module docstring);
    anything else as it is, for ``resolve_config`` to check."""
    if not isinstance(config, dict):
        return config
    path = config.get("incidentLog")
    if not isinstance(path, str) or not path.strip():
        return config
    expanded = os.path.expanduser(path)
    if os.path.isabs(expanded):
        return config
    return {**config, "incidentLog": os.path.join(home, expanded)}


def _store(
    setting: StoreSetting,
    home: str,
    opened: dict[tuple[str, int], Store],
    names: Mapping[str, str],
) -> Store:
    """The store ``setting`` names (unset: the default file), opened once per URL and TTL."""
    brake = names["brake"]
    kind = setting.source.kind
    if kind == "default":
        url, where = DEFAULT_STORE, "the hook's default"
    else:
        url, where = setting.url, names["source"] if kind == "row" else str(setting.source)
        if setting.is_memory:
            raise HookError(
                f"{brake}: the store {setting.shown} (from {where}) keeps nothing between the"
                " hook's processes (every tool call is a new one); use sqlite:PATH or a redis://"
                f" URL, or leave store out for {DEFAULT_STATE_FILE} in the dsh home"
            )
    key = (url, setting.session_ttl)
    store = opened.get(key)
    if store is None:
        try:
            store = open_store(url, session_ttl=setting.session_ttl, home=home)
        except StoreError as error:  # StoreConfigError and MissingExtraError too
            raise HookError(f"{brake}: {error} (from {where})") from None
        opened[key] = store
    return _OwnStore(store)  # the protocol, read through (mypy reads __getattr__)


def store_error(url: str, error: BaseException, outcome: str) -> HookError:
    """The hook's line for a store that failed: the store (password as ``***``) and the error's
    types, never its message (which could quote anything the store was told)."""
    kind = type(error).__name__
    cause = error.__cause__ or error.__context__
    if cause is not None:
        kind += f" from {type(cause).__name__}"
    shown = redact_url(url)
    return HookError(f"the store {shown} failed ({kind}); {outcome}")
