"""Composing a profile for the hook with the harness: the slow path, taken when the cache is stale.

The rows are those the harness would apply: the profile's composed ``loop-brake`` row (none:
this package's bundle row, i.e. the defaults, as replay does) and its ``circuit-breaker`` row
when it has one. Each is validated here as the plugin would validate it at apply, so a mistake
in a patch file is reported with its ``file:line`` once, not found later mid-session.
"""

from __future__ import annotations

import os
from typing import Any

from dsh_loop_brake.hooks._errors import HookError
from dsh_loop_brake.hooks._profile import ProfileRows, RowSettings, file_identity

__all__ = ["compose_for_hook", "store_keys"]

LOOP_BRAKE_ROW = "loop-brake"
CIRCUIT_BREAKER_ROW = "circuit-breaker"

# Keys of both rows that say where the counts live (the SPEC's stores); taken out of the config
# before the plugin's own validation, which does not know them yet.
_STORE_KEYS = ("store", "sessionTtl")


def compose_for_hook(profile: str, home: str) -> tuple[list[list[object]], ProfileRows]:
    """The identities of the files ``profile`` is composed from, and the rows the hook applies."""
    import logging

    from dsh_loop_brake.harness.errors import HarnessError
    from dsh_loop_brake.loop_brake import LoopBrakeConfigError

    # A skipped patch is logged as a warning; a hook that may run the call says nothing at all
    # (gemini-cli turns text on stderr into a message), and `dsh-loop-brake config` shows it.
    logging.getLogger("dsh_loop_brake").addHandler(logging.NullHandler())
    try:
        return _compose(profile, home)
    except (HarnessError, LoopBrakeConfigError) as exc:
        raise HookError(" ".join(str(exc).split())) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise HookError(f"{where}{exc.strerror or exc}") from None


def _compose(profile: str, home: str) -> tuple[list[list[object]], ProfileRows]:
    from dsh_loop_brake.harness.layers import compose
    from dsh_loop_brake.harness.manifest import find_manifest
    from dsh_loop_brake.harness.profiles import PATCH_FILE, PROFILE_FILE, read_bundles

    directory = os.path.join(home, "profiles", profile)
    fixed = [
        os.path.join(directory, PROFILE_FILE),
        os.path.join(directory, PATCH_FILE),
        os.path.join(home, PATCH_FILE),
    ]
    # Taken before reading, so a file changed while composing leaves the cache stale, not wrong.
    identities = [file_identity(path) for path in fixed]
    composition = compose(profile, home)
    watched = [str(layer.path) for layer in composition.layers]
    from pathlib import Path

    watched += [str(find_manifest(name).path) for name in read_bundles(Path(fixed[0]))]
    seen = set(fixed)
    for path in watched:
        if path not in seen:
            seen.add(path)
            identities.append(file_identity(os.path.abspath(path)))
    rows = ProfileRows(
        _loop_brake(composition.row(LOOP_BRAKE_ROW)),
        _circuit_breaker(composition.row(CIRCUIT_BREAKER_ROW)),
    )
    return identities, rows


def _loop_brake(row: Any) -> RowSettings | None:
    from dsh_loop_brake._config import resolve_max_repeats
    from dsh_loop_brake.loop_brake import LoopBrakeConfigError

    if row is None:
        return None
    origin = _origin(row)
    config, store, ttl = store_keys(row.config, origin, "loop brake")
    if not row.disabled:
        try:
            resolve_max_repeats(config, environ={})  # the row's own values; the env comes later
        except LoopBrakeConfigError as exc:
            raise HookError(_located(exc, row, "maxRepeats")) from None
    return RowSettings(config, bool(row.disabled), store, ttl, origin)


def _circuit_breaker(row: Any) -> RowSettings | None:
    from dsh_loop_brake._breaker_config import CircuitBreakerConfigError, resolve_config

    if row is None:
        return None
    origin = _origin(row)
    config, store, ttl = store_keys(row.config, origin, "circuit breaker")
    if not row.disabled:
        try:
            config = resolve_config(config, source=origin or "the circuit-breaker patch row")
        except CircuitBreakerConfigError as exc:
            raise HookError(_located(exc, row, getattr(exc, "key", None))) from None
        config = config.as_row_config()
    return RowSettings(config, bool(row.disabled), store, ttl, origin)


def _located(error: Exception, row: Any, key: str | None) -> str:
    """The message with the ``path:line`` of the row's bad value in front, as ``config`` says it."""
    message = " ".join(str(error).split())
    sources = row.sources
    origin = (sources.get(f"config.{key}") if key else None) or sources.get("config")
    if origin is None or message.startswith(f"{origin.path}:"):
        return message
    return f"{origin}: {message}"


def store_keys(config: Any, origin: str | None, what: str) -> tuple[Any, str | None, int | None]:
    """Split ``store`` and ``sessionTtl`` off a row's config, checking their types."""
    from dsh_loop_brake._config import integer_value

    if not isinstance(config, dict) or not any(key in config for key in _STORE_KEYS):
        return config, None, None
    rest = {key: value for key, value in config.items() if key not in _STORE_KEYS}
    where = f" (from {origin})" if origin else ""
    store = config.get("store")
    if store is not None and not (isinstance(store, str) and store.strip()):
        raise HookError(f"{what}: store must be a store URL such as sqlite:PATH{where}")
    ttl_value = config.get("sessionTtl")
    ttl = None if ttl_value is None else integer_value(ttl_value)
    if ttl_value is not None and (ttl is None or ttl < 1):
        raise HookError(f"{what}: sessionTtl must be an integer of at least 1 (seconds){where}")
    return rest or None, store.strip() if isinstance(store, str) else None, ttl


def _origin(row: Any) -> str | None:
    sources = row.sources
    origin = sources.get("config") or sources.get("id")
    return None if origin is None else str(origin)
