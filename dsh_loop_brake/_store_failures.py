"""What a brake says when its store fails at run time: one warning a minute per store object.

Both brakes fail open on a store failure (the call is allowed, not counted, and the brake's
``store_errors`` grows by one). This module is the warning they share: it names the store by its
``url`` (which every store gives with any password as ``***``) and the error's type -- never its
message, which could quote anything the store was told -- and says so at most once a minute per
store object, however many brakes share that store and however many calls fail meanwhile.

The warning is logged without ``exc_info``: an error tracker rendering the traceback with its
locals would show the frames' variables, the raw store URL among them.
"""

from __future__ import annotations

import threading
import time

from dsh_loop_brake._short_repr import json_literal

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Final

__all__ = ["WARN_EVERY", "store_failed"]

#: Seconds between two warnings about the same store object.
WARN_EVERY: Final = 60.0

# Store objects (by id) and when each was last warned about, oldest first; bounded, so stores
# made and dropped by the thousand cannot grow it. An id reused by a new store within the minute
# costs at most that store's first warning's minute.
_WARNED_LIMIT: Final = 1024
_last_warned: dict[int, float] = {}
_lock = threading.Lock()
_clock = time.monotonic  # replaced by tests that move time


def store_failed(store: object, error: BaseException, *, logger: str, brake: str) -> None:
    """Warn (at most once a minute per ``store``) that ``store`` failed with ``error``.

    ``brake`` names the brake in the message (``"loop brake"``, ``"circuit breaker"``);
    ``logger`` is the logger's name. Never raises: a store that cannot even say its URL is named
    by its type.
    """
    now = _clock()
    key = id(store)
    with _lock:
        last = _last_warned.get(key)
        if last is not None and now - last < WARN_EVERY:
            return
        _last_warned.pop(key, None)
        _last_warned[key] = now  # last in the dict: the most recently warned
        while len(_last_warned) > _WARNED_LIMIT:
            del _last_warned[next(iter(_last_warned))]
    import logging  # only now: the brakes' own path never needs it

    logging.getLogger(logger).warning(
        "%s: the store %s failed (%s); calls are allowed and not counted until it answers"
        " again, each is counted in store_errors (this warning repeats at most once a minute)",
        brake,
        _store_name(store),
        _error_type(error),
    )


def _store_name(store: object) -> str:
    try:
        url = store.url  # type: ignore[attr-defined]
        if isinstance(url, str):
            return json_literal(url)
    except Exception:
        pass
    return f"<{_name(type(store))}>"


def _error_type(error: BaseException) -> str:
    shown = _name(type(error))
    cause = error.__cause__
    if cause is not None:
        shown += f" from {_name(type(cause))}"
    return shown


def _name(kind: type) -> str:
    # A type's name can be anything a program sets: escaped, so it cannot break the line.
    return json_literal(getattr(kind, "__name__", "?"))[1:-1]
