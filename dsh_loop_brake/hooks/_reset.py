"""``dsh-loop-brake hook reset``: forget what the hook counted, for one session or all.

A streak also ends by itself with the next different call, and any state not touched for the
row's ``sessionTtl`` (default one day) is forgotten; this is for "let this session go on now".
It goes through the brakes on the profile's stores, as a call does: ``LoopBrake.reset`` and
``CircuitBreaker.reset``. The stores forget the circuit breaker's state for every agent at once
(there is no per-agent reset), so ``--session`` forgets that session's streak only.
"""

from __future__ import annotations

import os

from dsh_loop_brake.hooks._apply import StoreFailed, apply_rows, store_error
from dsh_loop_brake.hooks._profile import load_profile

__all__ = ["ResetDone", "reset_state"]


class ResetDone:
    """What ``reset_state`` forgot: the stores it reached, and what was kept."""

    __slots__ = ("breaker_kept", "streak", "urls")

    def __init__(self, urls: list[str], streak: int | None, breaker_kept: bool) -> None:
        self.urls = urls  # the stores' URLs, passwords as ***
        self.streak = streak  # the session's streak before it was forgotten (None: none)
        self.breaker_kept = breaker_kept  # --session with a circuit breaker: its state stays


def reset_state(profile: str, home: str, session: str | None) -> ResetDone:
    """Forget ``session`` (``None``: everything) in the stores the profile's rows use."""
    brakes = apply_rows(load_profile(profile, home), home, os.environ)
    urls = [store.url for store in brakes.stores.values()]
    streak = None
    try:
        if brakes.loop_brake is not None:
            if session is not None:
                held = brakes.loop_brake.streak(session)
                streak = None if held is None else held[1]
            brakes.loop_brake.reset(session)
        if brakes.circuit_breaker is not None and session is None:
            brakes.circuit_breaker.reset()
    except StoreFailed as failure:
        raise store_error(failure.url, failure.error, "run the reset again") from None
    finally:
        for store in brakes.stores.values():
            store.close()
    return ResetDone(urls, streak, session is not None and brakes.circuit_breaker is not None)
