"""Composing a profile for the hook with the harness: the slow path, taken when the cache is stale.

The rows are those the harness would apply: the profile's composed ``loop-brake`` row (none:
this package's bundle row, i.e. the defaults, as replay does) and its ``circuit-breaker`` row
when it has one. They are checked here by applying them as the harness does
(``Brakes.from_profile``: the plugins' own validation, with the ``file:line`` of a bad value),
so a mistake in a patch file is reported where it is, and a profile that cannot be applied is
never cached.
"""

from __future__ import annotations

import os
from typing import Any

from dsh_loop_brake.hooks._errors import HookError
from dsh_loop_brake.hooks._profile import ProfileRows, RowSettings, file_identity

__all__ = ["compose_for_hook"]

LOOP_BRAKE_ROW = "loop-brake"
CIRCUIT_BREAKER_ROW = "circuit-breaker"


def compose_for_hook(profile: str, home: str) -> tuple[list[list[object]], ProfileRows]:
    """The identities of the files ``profile`` is composed from, and the rows the hook applies."""
    import logging

    from dsh_loop_brake.harness.errors import HarnessError
    from dsh_loop_brake.loop_brake import LoopBrakeConfigError
    from dsh_loop_brake.stores import StoreError

    # A skipped patch is logged as a warning; a hook that may run the call says nothing at all
    # (gemini-cli turns text on stderr into a message), and `dsh-loop-brake config` shows it.
    # Only while composing: what the brakes warn about later is said as on every other call.
    quiet = logging.NullHandler()
    logger = logging.getLogger("dsh_loop_brake")
    logger.addHandler(quiet)
    try:
        return _compose(profile, home)
    except (HarnessError, LoopBrakeConfigError, StoreError) as exc:
        raise HookError(" ".join(str(exc).split())) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise HookError(f"{where}{exc.strerror or exc}") from None
    finally:
        logger.removeHandler(quiet)


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
        _settings(composition.row(LOOP_BRAKE_ROW)),
        _settings(composition.row(CIRCUIT_BREAKER_ROW)),
    )
    _check(profile, home)
    return identities, rows


def _settings(row: Any) -> RowSettings | None:
    return None if row is None else RowSettings(row.config, bool(row.disabled))


def _check(profile: str, home: str) -> None:
    """Apply the profile's two rows as the harness does, and let them go: what cannot be applied
    raises the plugin's error, located at the row's file and line."""
    from dsh_loop_brake._brakes import Brakes

    Brakes.from_profile(profile, home=home).close()
