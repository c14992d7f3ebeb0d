"""The counting core: exact call identity and the per-session loop brake (standard library only).

A call is identified by ``sha256(tool_name + "\\n" + canonical_json(args))``. Per session the brake
keeps one current digest and one count (a streak, not a histogram) and raises ``LoopBrakeError`` on
the call that brings the streak to ``max_repeats``. Nothing here opens a file or a socket, starts a
process or calls a model.

Exceptions::

    Exception
    └── LoopBrakeError            a call was denied because it repeated too often
    ValueError
    └── LoopBrakeConfigError      a loop-brake configuration is unusable
        └── InvalidMaxRepeatsError    maxRepeats is not an integer of at least 1
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import math
import os
import re
import reprlib
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar, final

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "PLUGIN_NAME",
    "InvalidMaxRepeatsError",
    "LoopBrake",
    "LoopBrakeConfigError",
    "LoopBrakeError",
    "call_hash",
    "canonical_json",
    "decorate_tool",
    "hash_prefix",
    "normalize_max_repeats",
    "resolve_max_repeats",
    "session_key",
    "wrap_execute",
]

DEFAULT_MAX_REPEATS: Final = 3
ENV_VAR: Final = "DSH_LOOP_BRAKE_MAX_REPEATS"
PLUGIN_NAME: Final = "dsh-loop-brake"

_HASH_PREFIX_LENGTH: Final = 12
_CONFIG_KEYS: Final = ("maxRepeats",)
# Tool names remembered for the once-per-tool warning; bounded so hostile names cannot grow it.
_WARNED_TOOLS_LIMIT: Final = 1024

logger = logging.getLogger("dsh_loop_brake")

T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Errors


class LoopBrakeError(Exception):
    """A tool call was denied because it repeated the same call ``max_repeats`` times in a row."""

    code: Final = "LOOP_BRAKE"
    plugin: Final = PLUGIN_NAME

    def __init__(
        self,
        tool_name: str,
        count: int,
        max_repeats: int,
        hash_prefix: str,
        session_id: str,
    ) -> None:
        self.tool_name = tool_name
        self.count = count
        self.max_repeats = max_repeats
        self.hash_prefix = hash_prefix[:_HASH_PREFIX_LENGTH]
        self.session_id = session_id
        # The arguments are deliberately not taken: they are the likeliest place for paths,
        # queries and credentials, and this error is the likeliest thing to be logged.
        super().__init__(
            f"loop brake: tool {_json_literal(tool_name)} called {count} times in a row with "
            f"identical arguments (call {self.hash_prefix}\u2026, limit {max_repeats}); the call "
            "was denied before it ran. Change the arguments, call a different tool, or stop."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.tool_name, self.count, self.max_repeats, self.hash_prefix, self.session_id),
        )


class LoopBrakeConfigError(ValueError):
    """A loop-brake configuration is unusable; the message says which key and what to do."""

    code: str = "LOOP_BRAKE_CONFIG"


class InvalidMaxRepeatsError(LoopBrakeConfigError):
    """``maxRepeats`` is not an integer of at least 1."""

    def __init__(self, value: object, source: str) -> None:
        self.value = value
        self.source = source
        super().__init__(
            "loop brake: maxRepeats must be an integer of at least 1, "
            f"got {_short_repr(value)} (from {source})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value, self.source))


def _json_literal(text: str) -> str:
    """``text`` as an ASCII JSON string literal: quotes and newlines cannot break a line."""
    return json.dumps(text, ensure_ascii=True)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 2
_SHORT_REPR.maxlist = _SHORT_REPR.maxtuple = _SHORT_REPR.maxdict = _SHORT_REPR.maxset = 4
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 80


def _short_repr(value: object, limit: int = 80) -> str:
    """A repr of at most ``limit`` characters that never walks a huge value."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        text = f"<int of {value.bit_length()} bits>"
    elif isinstance(value, str):
        text = repr(value[: limit + 1])
    else:
        text = _SHORT_REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# --------------------------------------------------------------------------------------------
# Call identity


class _NotIdentifiable(TypeError):
    """Raised inside canonical_json for a value of a type JSON cannot express."""


def canonical_json(value: Any) -> str:
    """The text JavaScript's ``JSON.stringify`` gives for ``value``, keys sorted (RFC 8785).

    Raises ``TypeError`` or ``ValueError`` for values that are not JSON (bytes, sets, non-``str``
    keys, cycles...); the message names the offending type, never a value.
    """
    text = _fast_canonical_json(value)
    if text is None or (not text.isascii() and _SURROGATE.search(text) is not None):
        return _slow_canonical_json(value)
    return text


def call_hash(tool_name: str, args: Any) -> str:
    """Lowercase hex SHA-256 of ``tool_name + "\\n" + canonical_json(args)``, UTF-8 encoded."""
    return _call_digest(tool_name, args).hex()


def hash_prefix(call_hash: str) -> str:
    """The first 12 hex characters of a call hash, and no more."""
    return call_hash[:_HASH_PREFIX_LENGTH]


def _call_digest(tool_name: str, args: Any) -> bytes:
    text = _fast_canonical_json(args)
    if text is not None:
        try:
            return hashlib.sha256((tool_name + "\n" + text).encode()).digest()
        except UnicodeEncodeError:
            pass  # a lone surrogate: the exact encoder escapes it as JavaScript does
    data = tool_name.encode("utf-8", "surrogatepass") + b"\n"
    return hashlib.sha256(data + _slow_canonical_json(args).encode()).digest()


# The C encoder of the json module is the fast path. It agrees with JSON.stringify byte for byte
# on str keys, str, int, bool and None, and on floats whose repr is plain decimal; everything else
# goes to the exact pure-Python encoder below. A JSONEncoder built once is much cheaper per call
# than json.dumps with keyword arguments, which builds one each time.
_C_ENCODER: Callable[[Any, int], list[str]] | None
try:
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - CPython always has it
    _c_make_encoder = None

if _c_make_encoder is not None:
    _C_ENCODER = _c_make_encoder(
        {},  # markers: circular-reference detection
        None,  # default: never called, the walk admits only JSON types
        json.encoder.encode_basestring,
        None,  # indent
        ":",
        ",",
        True,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
else:  # pragma: no cover
    _C_ENCODER = None

# Containers a value may hold before the exact encoder takes over (it bounds the walk on cycles).
_FAST_PATH_CONTAINERS: Final = 1000
_SURROGATE = re.compile("[\ud800-\udfff]")


def _fast_canonical_json(value: Any) -> str | None:
    """The canonical text via the C encoder, or ``None`` when the exact encoder must decide."""
    if _C_ENCODER is None or not _plain_json(value):
        return None
    try:
        return "".join(_C_ENCODER(value, 0))
    except (RecursionError, ValueError):
        return None


def _plain_json(value: Any) -> bool:
    """Whether the C encoder writes every part of ``value`` exactly as JSON.stringify does."""
    stack = [value]
    containers = 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            # repr and ECMAScript agree on non-integral floats in [1e-4, 1e16): plain decimals.
            if not 1e-4 <= abs(item) < 1e16 or item.is_integer():
                return False
            continue
        containers += 1
        if containers > _FAST_PATH_CONTAINERS:
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
                if not key.isascii() and max(key) > "\uffff":
                    return False  # UTF-16 order differs from code-point order for astral keys
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


@final
class _Emit:
    """A piece of output text, optionally leaving a container when written."""

    __slots__ = ("leave", "text")

    def __init__(self, text: str, leave: int | None = None) -> None:
        self.text = text
        self.leave = leave


def _slow_canonical_json(value: Any) -> str:
    """The exact encoder: iterative, so nesting depth is bounded by memory, not the C stack."""
    out: list[str] = []
    stack: list[Any] = [value]
    active: set[int] = set()  # containers on the current path: seeing one again is a cycle
    while stack:
        item = stack.pop()
        if type(item) is _Emit:
            out.append(item.text)
            if item.leave is not None:
                active.discard(item.leave)
            continue
        if item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(_encode_string(item))
        elif isinstance(item, int):
            out.append(_encode_int(item))
        elif isinstance(item, float):
            out.append(_encode_float(item))
        elif isinstance(item, (dict, list, tuple)):
            marker = id(item)
            if marker in active:
                raise ValueError(
                    f"canonical_json: a {type(item).__name__} contains itself (a cyclic "
                    "structure has no JSON form)"
                )
            active.add(marker)
            if isinstance(item, dict):
                _push_object(item, stack, marker)
            else:
                _push_array(item, stack, marker)
        else:
            raise _NotIdentifiable(
                f"canonical_json: a value of type {type(item).__name__!r} has no JSON form"
            )
    return "".join(out)


def _push_object(obj: dict[Any, Any], stack: list[Any], marker: int) -> None:
    for key in obj:
        if not isinstance(key, str):
            raise _NotIdentifiable(
                f"canonical_json: object keys must be str, got a key of type {type(key).__name__!r}"
            )
    keys = sorted(obj, key=_utf16_order)
    stack.append(_Emit("}", marker))
    for index in range(len(keys) - 1, -1, -1):
        key = keys[index]
        stack.append(obj[key])
        stack.append(_Emit(("{" if index == 0 else ",") + _encode_string(key) + ":"))
    if not keys:
        stack.append(_Emit("{"))


def _push_array(items: list[Any] | tuple[Any, ...], stack: list[Any], marker: int) -> None:
    stack.append(_Emit("]", marker))
    for index in range(len(items) - 1, -1, -1):
        stack.append(items[index])
        if index:
            stack.append(_Emit(","))
    stack.append(_Emit("["))


def _utf16_order(key: str) -> bytes:
    """Sort key comparing strings by UTF-16 code units, as JavaScript does."""
    return key.encode("utf-16-be", "surrogatepass")


# Look the codec up now: its first use would import a module, and a check must not touch files.
_utf16_order("")


def _encode_string(text: str) -> str:
    encoded: str = json.encoder.encode_basestring(text)
    if not encoded.isascii():
        # JSON.stringify escapes lone surrogates; Python's encoder leaves them raw.
        encoded = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)
    return encoded


def _encode_int(number: int) -> str:
    try:
        return int.__repr__(number)
    except ValueError:
        raise ValueError(
            f"canonical_json: an int of {number.bit_length()} bits is beyond Python's limit for "
            "decimal conversion"
        ) from None


def _encode_float(number: float) -> str:
    """ECMAScript ``Number.prototype.toString``; NaN and the infinities become null."""
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    text = float.__repr__(abs(number))  # shortest round-trip digits, as ECMAScript uses
    mantissa, _, exponent_text = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    significant = digits.rstrip("0")
    exponent = int(exponent_text or 0) - len(fraction) + (len(digits) - len(significant))
    k = len(significant)
    n = k + exponent  # the value is 0.<significant> * 10**n
    if k <= n <= 21:
        body = significant + "0" * (n - k)
    elif 0 < n <= 21:
        body = significant[:n] + "." + significant[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + significant
    else:
        e = n - 1
        head = significant[0] + ("." + significant[1:] if k > 1 else "")
        body = f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"
    return "-" + body if number < 0 else body


# --------------------------------------------------------------------------------------------
# Configuration values


def normalize_max_repeats(value: object, *, source: str = "the loop-brake patch row") -> int:
    """``value`` as an int of at least 1, or ``InvalidMaxRepeatsError`` naming ``source``."""
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value) if value.is_integer() else None
    elif isinstance(value, str):
        text = value.strip()
        if 0 < len(text) <= 30 and text.isascii() and text.isdigit():
            number = int(text)
    if number is None or number < 1:
        raise InvalidMaxRepeatsError(value, source)
    return number


def resolve_max_repeats(
    config: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> int:
    """The row's ``maxRepeats``, else ``DSH_LOOP_BRAKE_MAX_REPEATS`` when set, else 3."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise LoopBrakeConfigError(
            "loop brake: the config must be a mapping such as {maxRepeats: 5}, got a "
            f"{type(config).__name__}; write it as a mapping or leave it out for the defaults"
        )
    for key in config:
        if key not in _CONFIG_KEYS:
            raise LoopBrakeConfigError(
                f"loop brake: unknown config key {_short_repr(key)}; the keys that exist are "
                f"{', '.join(_CONFIG_KEYS)} (check the spelling)"
            )
    value = config.get("maxRepeats")
    if value is not None:
        return normalize_max_repeats(value)
    raw = (os.environ if environ is None else environ).get(ENV_VAR)
    if raw is not None and raw.strip():
        return normalize_max_repeats(raw, source=f"the environment variable {ENV_VAR}")
    return DEFAULT_MAX_REPEATS


# --------------------------------------------------------------------------------------------
# Sessions


def session_key(session_id: str | None = None, execution: object = None) -> str:
    """The explicit session id, else the calling agent's id from the execution, else "default"."""
    if session_id is not None:
        return session_id
    agent_id = _field(_field(execution, "agent"), "id")
    if agent_id is not None and agent_id != "":
        return str(agent_id)
    return "default"


def _field(source: object, name: str) -> Any:
    """``source.name`` or ``source[name]``; ``None`` when neither is there."""
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


# --------------------------------------------------------------------------------------------
# The brake


@final
class LoopBrake:
    """Counts consecutive identical calls per session and denies the ``max_repeats``-th one."""

    __slots__ = ("_lock", "_max_repeats", "_streaks", "_warned")

    def __init__(self, max_repeats: int = DEFAULT_MAX_REPEATS) -> None:
        self._max_repeats = normalize_max_repeats(max_repeats, source="LoopBrake(max_repeats=...)")
        self._lock = threading.Lock()
        # session id -> (digest of the current call, how many times in a row it was made)
        self._streaks: dict[str, tuple[bytes, int]] = {}
        self._warned: set[str] = set()

    @property
    def max_repeats(self) -> int:
        """The streak length at which a call is denied."""
        return self._max_repeats

    def check(self, tool_name: str, args: Any, *, session_id: str = "default") -> int:
        """Count this call; return the streak, or raise ``LoopBrakeError`` when it is denied."""
        try:
            digest = _call_digest(tool_name, args)
        except (TypeError, ValueError) as error:
            # Fail open: a brake must never block real work it cannot judge. The call is a
            # different call from whatever came before, so the streak ends here.
            with self._lock:
                self._streaks.pop(session_id, None)
            self._warn_unidentifiable(tool_name, error)
            return 0
        with self._lock:
            previous = self._streaks.get(session_id)
            count = previous[1] + 1 if previous is not None and previous[0] == digest else 1
            self._streaks[session_id] = (digest, count)
        if count >= self._max_repeats:
            raise LoopBrakeError(tool_name, count, self._max_repeats, digest.hex(), session_id)
        return count

    def streak(self, session_id: str) -> tuple[str, int] | None:
        """The session's current call (hash prefix) and its count, or ``None``."""
        with self._lock:
            current = self._streaks.get(session_id)
        if current is None:
            return None
        return current[0][: _HASH_PREFIX_LENGTH // 2].hex(), current[1]

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's streak, or every session's."""
        with self._lock:
            if session_id is None:
                self._streaks.clear()
            else:
                self._streaks.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._streaks)

    def __repr__(self) -> str:
        return f"LoopBrake(max_repeats={self._max_repeats})"

    def _warn_unidentifiable(self, tool_name: str, error: Exception) -> None:
        with self._lock:
            if tool_name in self._warned or len(self._warned) >= _WARNED_TOOLS_LIMIT:
                return
            self._warned.add(tool_name)
        logger.warning(
            "loop brake: tool %s was called with arguments that cannot be identified (%s); "
            "the call was allowed and not counted",
            _json_literal(tool_name),
            _describe_unidentifiable(error),
        )


def _describe_unidentifiable(error: Exception) -> str:
    # Our own messages name types only; anything else is reduced to its type name.
    message = str(error)
    if message.startswith("canonical_json: "):
        return _json_literal(message.removeprefix("canonical_json: "))[1:-1]
    return type(error).__name__


# --------------------------------------------------------------------------------------------
# Wrapping tool definitions


def wrap_execute(
    execute: Callable[..., Any],
    brake: LoopBrake,
    *,
    tool: str,
    session_id: str | None = None,
) -> Callable[..., Any]:
    """``execute`` with ``brake.check`` run before it; async when ``execute`` is."""
    if inspect.iscoroutinefunction(execute):

        @functools.wraps(execute)
        async def braked_async(args: Any, *rest: Any, **kwargs: Any) -> Any:
            execution = rest[0] if rest else None
            brake.check(tool, args, session_id=session_key(session_id, execution))
            result: Awaitable[Any] = execute(args, *rest, **kwargs)
            return await result

        return braked_async

    @functools.wraps(execute)
    def braked(args: Any, *rest: Any, **kwargs: Any) -> Any:
        execution = rest[0] if rest else None
        brake.check(tool, args, session_id=session_key(session_id, execution))
        return execute(args, *rest, **kwargs)

    return braked


def decorate_tool(definition: T, brake: LoopBrake) -> T:
    """A copy of ``definition`` whose ``execute`` is braked under the definition's name."""
    execute = _field(definition, "execute")
    name = _field(definition, "name")
    if not callable(execute) or name is None:
        return definition
    braked = wrap_execute(execute, brake, tool=str(name))
    if isinstance(definition, Mapping):
        return {**definition, "execute": braked}  # type: ignore[return-value]
    if dataclasses.is_dataclass(definition) and not isinstance(definition, type):
        try:
            return dataclasses.replace(definition, execute=braked)
        except (TypeError, ValueError):
            pass  # execute is not an init field: fall back to a shallow copy
    duplicate = copy.copy(definition)
    object.__setattr__(duplicate, "execute", braked)
    return duplicate
