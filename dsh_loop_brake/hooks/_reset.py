"""``dsh-loop-brake hook reset``: forget what the hook counted, for one session or all.

A streak also ends by itself with the next different call, and any state not touched for the
row's ``sessionTtl`` (default one day) is forgotten; this is for "let this session go on now".
"""

from __future__ import annotations

import os

from dsh_loop_brake.hooks._profile import RowSettings, load_profile
from dsh_loop_brake.hooks._run import state_of
from dsh_loop_brake.hooks._state import open_state

__all__ = ["reset_state"]


def reset_state(profile: str, home: str, session: str | None) -> list[tuple[str, int]]:
    """Forget ``session`` (``None``: everything) in each state file the profile's rows use."""
    rows = load_profile(profile, home)
    loop = rows.loop_brake or RowSettings(None)
    used = [loop] + ([rows.circuit_breaker] if rows.circuit_breaker is not None else [])
    done: list[tuple[str, int]] = []
    for path, ttl in dict.fromkeys(state_of(row, home, os.environ) for row in used):
        if not os.path.exists(path):
            continue
        state = open_state(path, ttl)
        try:
            done.append((path, state.forget(session)))
        finally:
            state.close()
    return done
