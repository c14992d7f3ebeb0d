"""What every framework adapter shares: its brakes, its verdicts, the call's arguments and session.

An adapter reads the tool call from its framework's hook, asks :class:`Verdicts` for a verdict
(which counts the call in the brakes exactly once) and then either lets the framework run the
tool, hands the framework its own "tool failed" result carrying the denial's message, or raises
the denial out of the run. Nothing here imports a framework.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, Literal, TypeVar, final

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake._errors import ToolCallDenied
from dsh_loop_brake._execution import session_of

__all__ = [
    "OnDeny",
    "SessionRule",
    "Verdicts",
    "check_session",
    "missing_framework",
    "parse_arguments",
    "session_of",
]

OnDeny = Literal["message", "raise"]

T = TypeVar("T")

# How many recent verdicts an adapter remembers to recognise a call its framework checks again
# (a retry around the hook, a call resumed after an approval). Bounded: a long run cannot grow it.
_RECENT_LIMIT: Final = 4096


def missing_framework(
    module: str, framework: str, extra: str, package: str, error: ImportError
) -> ImportError:
    """The error for an adapter module whose framework cannot be imported: it names the extra.

    ``package`` is the framework's top-level import name. When it is installed but lacks what the
    adapter imports (an older version), the error says so and keeps the original as its cause.
    """
    if importlib.util.find_spec(package) is None:
        text = f"{module} needs {framework}, which is not installed"
    else:
        text = f"{module} needs {framework}, and the installed version lacks it ({error})"
    return ImportError(f'{text}: pip install -U "dsh-loop-brake[{extra}]"', name=module)


def parse_arguments(arguments: object) -> object:
    """The call's arguments as JSON values: a JSON string is parsed; one that is not JSON stays
    the raw string (so two identical unparsable strings are still one call)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):  # RecursionError: hostile nesting thousands deep
            return arguments
    return arguments


def check_session(session: T | None, where: str) -> T | None:
    """``session=`` as given, once it is known to be a function (or ``None``)."""
    if session is not None and not callable(session):
        raise TypeError(
            f"{where}: session must be a function that returns the session id, or None, "
            f"got {type(session).__name__}"
        )
    return session


@final
class SessionRule:
    """Which session an adapter counts a call in, from what its framework hands the hook.

    ``session`` is the user's ``session=`` (a function of that object, checked here), else the
    adapter's own ``default`` reading of it; either answer becomes a session key through
    ``session_of`` (``str()`` of it, or "default" for none).
    """

    __slots__ = ("_read",)

    def __init__(
        self,
        session: Callable[[Any], object] | None,
        default: Callable[[Any], object],
        *,
        where: str,
    ) -> None:
        chosen = check_session(session, where)
        self._read = chosen if chosen is not None else default

    def session_id(self, context: object) -> str:
        """The session of the call ``context`` stands for.

        A method, not ``__call__``: calling an instance costs about 0.4 us more per tool call.
        """
        return session_of(self._read(context))


@final
class Verdicts:
    """One adapter's brakes and what it does with a denial: ``raises`` is ``on_deny == "raise"``.

    ``judge`` counts a call in the brakes and returns its denial (or ``None`` to let it run);
    ``judge_once`` does the same for a call the framework may present more than once, and
    answers a repeat presentation with the first verdict without counting it again.
    """

    __slots__ = ("_lock", "_recent", "brakes", "raises")

    def __init__(self, brakes: Brakes | None, on_deny: OnDeny, *, where: str) -> None:
        if brakes is None:
            brakes = Brakes()
        elif not isinstance(brakes, Brakes):
            raise TypeError(
                f"{where}: brakes must be a dsh_loop_brake.Brakes, for example "
                f"Brakes(loop_brake=LoopBrake(5)), or None, got {type(brakes).__name__}"
            )
        if on_deny not in ("message", "raise"):
            shown = repr(on_deny) if isinstance(on_deny, str) else type(on_deny).__name__
            raise ValueError(f'{where}: on_deny must be "message" or "raise", got {shown[:80]}')
        self.brakes = brakes
        self.raises = on_deny == "raise"
        self._lock = threading.Lock()
        # key -> (a weak reference to the object the key was taken from, or None; the verdict)
        self._recent: OrderedDict[
            Hashable, tuple[weakref.ref[Any] | None, ToolCallDenied | None]
        ] = OrderedDict()

    def judge(self, tool_name: str, arguments: object, session_id: str) -> ToolCallDenied | None:
        """Count the call; its denial (with no traceback, so no frame's locals), or ``None``."""
        try:
            self.brakes.check(tool_name, parse_arguments(arguments), session_id=session_id)
        except ToolCallDenied as denial:
            # The traceback holds the frames that saw the arguments; the denial leaves without it.
            return denial.with_traceback(None)
        return None

    def judge_once(
        self,
        key: Hashable,
        tool_name: str,
        arguments: object,
        session_id: str,
        *,
        anchor: object = None,
    ) -> ToolCallDenied | None:
        """``judge``, unless the call under ``key`` was judged lately: then that verdict again.

        ``anchor`` is the object an identity key (``id(anchor)``) was taken from: the remembered
        verdict only counts while that very object is alive, so a reused ``id`` is a new call.
        """
        with self._lock:
            seen = self._recent.get(key)
            if seen is not None and (seen[0] is None or seen[0]() is anchor):
                self._recent.move_to_end(key)
                return seen[1]
        verdict = self.judge(tool_name, arguments, session_id)
        reference = weakref.ref(anchor) if anchor is not None else None
        with self._lock:
            self._recent[key] = (reference, verdict)
            self._recent.move_to_end(key)
            if len(self._recent) > _RECENT_LIMIT:
                self._recent.popitem(last=False)
        return verdict
