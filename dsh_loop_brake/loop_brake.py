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
import itertools
import json
import logging
import math
import os
import re
import reprlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
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
    return json.encoder.encode_basestring_ascii(text)  # json.dumps(text) without its dispatch


class _ShortRepr(reprlib.Repr):
    """reprlib without the walks it still makes: it sorts a whole dict or set before showing
    four items, shows a subclass of a builtin container or a long str subclass by its own full
    repr, and writes a huge int out in full (or fails, past 4300 digits)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4
        self.maxstring = self.maxother = 80

    def repr1(self, x: Any, level: int) -> str:
        try:
            if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 256:
                return f"<int of {x.bit_length()} bits>"
            if isinstance(x, str) and len(x) > self.maxstring:
                return self.repr_str(x, level)
            for base in _SHOWN_AS_BASE:
                if isinstance(x, base):
                    shown: str = getattr(self, "repr_" + base.__name__)(x, level)
                    return shown
            return super().repr1(x, level)
        except Exception:
            return f"<{type(x).__name__} object>"

    def repr_str(self, x: str, level: int) -> str:
        return repr(str.__getitem__(x, slice(self.maxstring + 1)))

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = [
            f"{self.repr1(key, level - 1)}: {self.repr1(item, level - 1)}"
            for key, item in itertools.islice(dict.items(x), self.maxdict)
        ]
        return "{" + ", ".join(shown + ["..."] * (len(x) > self.maxdict)) + "}"

    def repr_set(self, x: set[Any] | frozenset[Any], level: int) -> str:
        kind = "frozenset" if isinstance(x, frozenset) else "set"
        if not x:
            return f"{kind}()"
        if level <= 0:
            return "{...}" if kind == "set" else "frozenset({...})"
        shown = [self.repr1(item, level - 1) for item in itertools.islice(x, self.maxset)]
        text = "{" + ", ".join(shown + ["..."] * (len(x) > self.maxset)) + "}"
        return text if kind == "set" else f"frozenset({text})"

    repr_frozenset = repr_set


# Shown by the methods above whatever their subclass (a YAML round-trip loader's CommentedMap,
# an OrderedDict...), never by a repr that would write out every item.
_SHOWN_AS_BASE: Final = (dict, list, tuple, frozenset, set)

_SHORT_REPR: Final = _ShortRepr()


def _short_repr(value: object, limit: int = 80) -> str:
    """A repr of at most ``limit`` characters that never walks a huge value, and never fails."""
    if isinstance(value, (bytes, bytearray)):
        text = repr(bytes(value[: limit + 1]))
    else:
        text = _SHORT_REPR.repr1(value, _SHORT_REPR.maxlevel)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# --------------------------------------------------------------------------------------------
# Call identity
#
# Two encoders give the same text. The fast one is the json module's C encoder, used when a look
# at the value's types shows it will write exactly what JSON.stringify writes: str keys sorted by
# code point (the same order as UTF-16 unless a key holds an astral character), str, int, bool,
# None, and floats whose Python repr is ECMAScript's too. Integral floats and non-finite ones are
# swapped for the int or null JavaScript writes. Everything else, and anything deeper or larger
# than the look is willing to walk, goes to the exact encoder: pure Python, iterative, so nesting
# is bounded by memory and never raises RecursionError.


class _NotIdentifiable(TypeError):
    """Raised inside canonical_json for a value of a type JSON cannot express."""


def canonical_json(value: Any) -> str:
    """The text JavaScript's ``JSON.stringify`` gives for ``value``, keys sorted (RFC 8785).

    Raises ``TypeError`` or ``ValueError`` for values that are not JSON (bytes, sets, non-``str``
    keys, cycles...); the message names the offending type, never a value.
    """
    text = _fast_text(value)
    if text is None:
        return _exact_text(value)
    if not text.isascii():
        text = _javascript_surrogates(text)
    return text


def call_hash(tool_name: str, args: Any) -> str:
    """Lowercase hex SHA-256 of ``tool_name + "\\n" + canonical_json(args)``, UTF-8 encoded."""
    return _call_digest(tool_name, args).hex()


def hash_prefix(call_hash: str) -> str:
    """The first 12 hex characters of a call hash, and no more."""
    return call_hash[:_HASH_PREFIX_LENGTH]


def _call_digest(tool_name: str, args: Any) -> bytes:
    if not isinstance(tool_name, str):
        raise TypeError(f"call_hash: the tool name must be a str, got {type(tool_name).__name__}")
    return _digest(tool_name, args)


def _digest(tool_name: str, args: Any) -> bytes:
    """The SHA-256 digest of the call; raises TypeError or ValueError for unidentifiable args."""
    text = _fast_text(args)
    if text is None:
        text = _exact_text(args)
    else:
        try:
            if len(text) < _ONE_PIECE:
                return _sha256(f"{tool_name}\n{text}".encode()).digest()
            return _sha256_in_two_pieces(tool_name.encode(), text)
        except UnicodeEncodeError:
            # A surrogate code point, in the arguments or the tool name.
            text = _javascript_surrogates(text)
    # The canonical text is valid UTF-8 now; a tool name with unpaired surrogates (not valid
    # Unicode) keeps them distinct, as surrogatepass bytes, rather than merging them into one
    # U+FFFD.
    name = _javascript_surrogates(tool_name, escape=False)
    return _sha256_in_two_pieces(name.encode("utf-8", "surrogatepass"), text)


def _sha256_in_two_pieces(name: bytes, text: str) -> bytes:
    # A large call's text is not copied a third time to put the name in front of it.
    digest = _sha256(name + b"\n")
    digest.update(text.encode())
    return digest.digest()


_sha256: Final = hashlib.sha256
# Below this many characters a call is hashed as one string (one allocation, one update).
_ONE_PIECE: Final = 65536


def _refuse(value: Any) -> Any:
    raise _NotIdentifiable(
        f"canonical_json: a value of type {type(value).__name__!r} has no JSON form"
    )


_encode: Callable[[Any, bool], Iterable[str]]
try:
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - CPython always has it
    _c_make_encoder = None

if _c_make_encoder is not None:
    # Built once: json.dumps with keyword arguments builds a JSONEncoder on every call.
    _encode = _c_make_encoder(
        None,  # markers: _inspect admits no cycle (and one would end in RecursionError)
        _refuse,  # default: _inspect admits only JSON types
        json.encoder.encode_basestring,
        None,  # indent
        ":",
        ",",
        True,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan: _inspect swaps NaN and the infinities for None
    )
else:  # pragma: no cover - other Pythons: the same rules through the pure-Python encoder
    _encode = json.JSONEncoder(
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        check_circular=False,
        default=_refuse,
    ).iterencode

# How many containers _inspect looks at before leaving a value to the exact encoder. It bounds
# the walk on cycles, and the depth the C encoder (which recurses) is given.
_FAST_PATH_CONTAINERS: Final = 1000

_PLAIN: Final = 1  # the C encoder writes the value exactly as JSON.stringify does
_SWAP_FLOATS: Final = 2  # ...once integral and non-finite floats are swapped for int and None

_STR_ONLY: Final = frozenset({str})
_SCALARS: Final = frozenset({str, int, bool, type(None)})
_CONTAINERS: Final = frozenset({dict, list, tuple})
_JSON_TYPES: Final = _SCALARS | _CONTAINERS | {float}
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _fast_text(value: Any) -> str | None:
    """The canonical text via the C encoder, or ``None`` when the exact encoder must decide.

    The text may still hold raw surrogate code points (see ``_javascript_surrogates``).
    """
    if (
        type(value) is dict
        and _SCALARS.issuperset(map(type, value.values()))  # first: nested calls stop here
        and _STR_ONLY.issuperset(map(type, value))
    ):
        verdict: int | None = _PLAIN  # the usual call: one flat object; no walk needed
    else:
        verdict = _inspect(value)
        if verdict is None:
            return None
    try:
        if verdict == _SWAP_FLOATS:
            value = _with_javascript_floats(value)
        text = "".join(_encode(value, False))
    except (RecursionError, TypeError, ValueError):
        return None  # deeper than this stack allows, or a value changed under us
    if not text.isascii() and _has_astral_key(value):
        return None  # JavaScript orders such keys by UTF-16 code units, Python by code point
    return text


def _inspect(value: Any) -> int | None:
    """Whether the C encoder can write ``value``: ``_PLAIN``, ``_SWAP_FLOATS`` or ``None``.

    A container of str keys and plain scalars costs two passes in C; Python looks item by item
    only into containers that hold floats or other containers.
    """
    kind = type(value)
    if kind in _SCALARS:
        return _PLAIN
    if kind is float:
        return _float_verdict(value)
    if kind not in _CONTAINERS:
        return None
    verdict = _PLAIN
    pending = [value]
    budget = _FAST_PATH_CONTAINERS
    while pending:
        container = pending.pop()
        if type(container) is dict:
            if not _STR_ONLY.issuperset(map(type, container)):
                return None  # a non-str key (refused) or a str subclass (exact ordering)
            items = container.values()
        else:
            items = container
        if _SCALARS.issuperset(map(type, items)):
            continue
        for item in items:
            kind = type(item)
            if kind in _SCALARS:
                continue
            if kind in _CONTAINERS:
                budget -= 1
                if budget < 0:
                    return None  # large, deep or cyclic: the exact encoder decides
                pending.append(item)
            elif kind is float:
                item_verdict = _float_verdict(item)
                if item_verdict is None:
                    return None
                verdict = max(verdict, item_verdict)
            else:
                return None
    return verdict


def _float_verdict(number: float) -> int | None:
    if 1e-4 <= abs(number) < 1e16 and not number.is_integer():
        return _PLAIN  # repr and ECMAScript agree on these: plain decimals, shortest digits
    if not math.isfinite(number) or (number.is_integer() and abs(number) < 2**53):
        return _SWAP_FLOATS
    return None  # exponent notation or integral beyond 2**53: the exact encoder formats it


def _with_javascript_floats(value: Any) -> Any:
    """A copy of ``value`` (inspected: shallow, acyclic) with floats as JavaScript has them."""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {key: _with_javascript_floats(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_with_javascript_floats(item) for item in value]
    return value


def _has_astral_key(value: Any) -> bool:
    """Whether any object in ``value`` (already inspected) has a key above U+FFFF."""
    pending = [value]
    while pending:
        container = pending.pop()
        if type(container) is dict:
            keys = "".join(container)
            if not keys.isascii() and _ASTRAL.search(keys) is not None:
                return True
            container = container.values()
        if not _SCALARS.issuperset(map(type, container)):
            pending += [item for item in container if type(item) in _CONTAINERS]
    return False


def _javascript_surrogates(text: str, *, escape: bool = True) -> str:
    """``text`` as JavaScript reads it: a high and low surrogate side by side are one astral
    character, and (with ``escape``) each unpaired surrogate is written ``\\udxxx``."""
    if _SURROGATE.search(text) is None:
        return text
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if not escape:
        return paired
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", paired)


# Look the codecs up now: a first use would import a module, and a check must not touch files.
_javascript_surrogates("\ud800")
"".encode("utf-16-be", "surrogatepass")


@final
class _Text(str):
    """Output text on the exact encoder's stack, told apart from a str value by its type."""

    __slots__ = ()


@final
class _Leave(int):
    """On the exact encoder's stack: the container with this id is written and closed."""

    __slots__ = ()


_COMMA: Final = _Text(",")
_CLOSE_ARRAY: Final = _Text("]")
_CLOSE_OBJECT: Final = _Text("}")


def _exact_text(value: Any) -> str:
    """The exact encoder: iterative, so nesting depth is bounded by memory, not the C stack."""
    out: list[str] = []
    stack: list[Any] = [value]
    open_containers: set[int] = set()  # a container met again while it is open is a cycle
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Text:
            out.append(item)
        elif kind is _Leave:
            open_containers.discard(item)
        elif isinstance(item, (dict, list, tuple)):
            marker = id(item)
            if marker in open_containers:
                raise ValueError(
                    f"canonical_json: a {kind.__name__} contains itself (a cyclic structure has "
                    "no JSON form)"
                )
            open_containers.add(marker)
            stack.append(_Leave(marker))
            if isinstance(item, dict):
                out.append("{")
                stack.append(_CLOSE_OBJECT)
                stack += reversed(_object_entries(item))
            else:
                out.append("[")
                stack.append(_CLOSE_ARRAY)
                if item:
                    interleaved: list[Any] = [_COMMA] * (2 * len(item) - 1)
                    interleaved[::2] = item
                    stack += reversed(interleaved)
        else:
            out.append(_exact_scalar(item))
    return "".join(out)


def _object_entries(obj: dict[Any, Any]) -> list[Any]:
    """``obj`` as [key text, value, ',' key text, value, ...] in UTF-16 key order."""
    keys = list(dict.keys(obj))
    try:
        ascii_keys = "".join(keys).isascii()
    except TypeError:
        offender = next(key for key in keys if not isinstance(key, str))
        raise _NotIdentifiable(
            "canonical_json: object keys must be str, got a key of type "
            f"{type(offender).__name__!r}"
        ) from None
    if ascii_keys:
        keys.sort()  # code point order is UTF-16 order for these
        texts = [_exact_string(key) for key in keys]
    else:
        keys.sort(key=_utf16_order)
        texts = [_exact_string(key) for key in keys]
        if len(set(texts)) != len(texts):
            raise ValueError(
                "canonical_json: two keys of one object are the same key to JavaScript (a "
                "surrogate pair held as two code points equals the astral character)"
            )
    entries: list[Any] = []
    separator = ""
    for key, text in zip(keys, texts, strict=True):
        entries.append(_Text(separator + text + ":"))
        entries.append(dict.__getitem__(obj, key))
        separator = ","
    return entries


def _utf16_order(key: str) -> bytes:
    """Sort key comparing strings by UTF-16 code units, as JavaScript does."""
    return key.encode("utf-16-be", "surrogatepass")


def _exact_scalar(item: Any) -> str:
    if item is None:
        return "null"
    if item is True:
        return "true"
    if item is False:
        return "false"
    if isinstance(item, str):
        return _exact_string(item)
    if isinstance(item, int):
        return _exact_int(item)
    if isinstance(item, float):
        return _exact_float(item)
    raise _NotIdentifiable(
        f"canonical_json: a value of type {type(item).__name__!r} has no JSON form"
    )


def _exact_string(text: str) -> str:
    encoded: str = json.encoder.encode_basestring(text)
    return encoded if encoded.isascii() else _javascript_surrogates(encoded)


def _exact_int(number: int) -> str:
    try:
        return int.__repr__(number)
    except ValueError:
        raise ValueError(
            f"canonical_json: an int of {number.bit_length()} bits is beyond Python's limit for "
            "decimal conversion"
        ) from None


def _exact_float(number: float) -> str:
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
    number = _integer_value(value)
    if number is None or number < 1:
        raise InvalidMaxRepeatsError(value, source)
    return number


def _integer_value(value: object) -> int | None:
    """An int (not bool), an integral float or a plain decimal string as an int, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            try:
                # Without its leading zeros, so "0007" is 7 however many zeros it has.
                return int(text.lstrip("0") or "0")
            except ValueError:
                return None  # beyond Python's limit for decimal conversion (4300 digits)
    return None


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
    return _agent_session(_field(execution, "agent"))


def _agent_session(agent: object) -> str:
    """The agent's id as a session key, or "default" for no agent or an empty id."""
    if agent is None:
        return "default"
    # _field's usual case in place: this runs on every call's path.
    kind = type(agent)
    agent_id = getattr(agent, "id", None) if kind in _OBJECT_TYPES else _field(agent, "id")
    if type(agent_id) is str and agent_id:
        return agent_id  # the usual id, a plain string: no conversion
    return _session_of(agent_id)


def _session_of(agent_id: object) -> str:
    """An agent id already read, as a session key: ``str()`` of it, or "default" if none."""
    if type(agent_id) is str:
        return agent_id or "default"
    if agent_id is not None and agent_id != "":
        return str(agent_id)
    return "default"


def _field(source: Any, name: str) -> Any:
    """``source[name]`` when ``source`` is a mapping, else ``source.name``; ``None`` if absent."""
    kind = type(source)
    if kind in _OBJECT_TYPES:
        return getattr(source, name, None)
    if kind is dict or kind in _MAPPING_TYPES or _learn_is_mapping(source):
        return source.get(name)
    return getattr(source, name, None)


def _learn_is_mapping(source: object) -> bool:
    # An isinstance check against the Mapping ABC costs more than the rest of a field read, and
    # fields are read several times before every tool call; the type alone decides, so it is
    # asked once per type (and remembered for a bounded number of types, so hostile types
    # cannot grow the sets).
    is_mapping = isinstance(source, Mapping)
    known = _MAPPING_TYPES if is_mapping else _OBJECT_TYPES
    if len(known) < 256:
        known.add(type(source))
    return is_mapping


_MAPPING_TYPES: set[type] = {dict}
_OBJECT_TYPES: set[type] = {type(None)}
"""Types known to be read by key (mappings) and by attribute (everything else)."""


# --------------------------------------------------------------------------------------------
# The brake


# A session's streak is one int: the current call's SHA-256 digest in the low 256 bits and how
# many times in a row it was made above them. One small object per session (about 60 bytes) keeps
# 100,000 sessions within 256 bytes each, session-id string and dict slot included.
_STREAK_DIGEST_BITS: Final = 256
_STREAK_DIGEST_MASK: Final = (1 << _STREAK_DIGEST_BITS) - 1
_STREAK_COUNT_UNIT: Final = 1 << _STREAK_DIGEST_BITS
_int_from_bytes: Final = int.from_bytes  # looked up once, not on every call
# Where the hash prefix (its first 12 hex digits, 48 bits) sits in a streak.
_STREAK_PREFIX_SHIFT: Final = _STREAK_DIGEST_BITS - 4 * _HASH_PREFIX_LENGTH
_STREAK_PREFIX_MASK: Final = (1 << 4 * _HASH_PREFIX_LENGTH) - 1


@final
class LoopBrake:
    """Counts consecutive identical calls per session and denies the ``max_repeats``-th one."""

    __slots__ = ("_lock", "_max_repeats", "_streaks", "_warned")

    def __init__(self, max_repeats: int = DEFAULT_MAX_REPEATS) -> None:
        self._max_repeats = normalize_max_repeats(max_repeats, source="LoopBrake(max_repeats=...)")
        self._lock = threading.Lock()
        # session id -> its streak, packed in one int (see _STREAK_COUNT_UNIT)
        self._streaks: dict[str, int] = {}
        self._warned: set[str] = set()

    @property
    def max_repeats(self) -> int:
        """The streak length at which a call is denied."""
        return self._max_repeats

    def check(self, tool_name: str, args: Any, *, session_id: str = "default") -> int:
        """Count this call; return the streak, or raise ``LoopBrakeError`` when it is denied."""
        if type(tool_name) is not str and not isinstance(tool_name, str):
            raise TypeError(
                f"loop brake: the tool name must be a str, got {type(tool_name).__name__}"
            )
        try:
            digest = _digest(tool_name, args)
        except (TypeError, ValueError) as error:
            # Fail open: a brake must never block real work it cannot judge. The call is a
            # different call from whatever came before, so the streak ends here.
            with self._lock:
                self._streaks.pop(session_id, None)
            self._warn_unidentifiable(tool_name, error)
            return 0
        call = _int_from_bytes(digest, "big")
        lock = self._lock
        lock.acquire()  # rather than `with`, which costs twice as much on every call's path
        try:
            streak = self._streaks.get(session_id, 0)
            if streak & _STREAK_DIGEST_MASK != call:
                streak = call  # another call: a new streak, counted from zero
            streak += _STREAK_COUNT_UNIT
            self._streaks[session_id] = streak
        finally:
            lock.release()
        count = streak >> _STREAK_DIGEST_BITS
        if count >= self._max_repeats:
            raise LoopBrakeError(tool_name, count, self._max_repeats, digest.hex(), session_id)
        return count

    def streak(self, session_id: str) -> tuple[str, int] | None:
        """The session's current call (hash prefix) and its count, or ``None``."""
        # No lock: the streak is one immutable int, replaced whole, and one dict read is atomic.
        # (Replay reads the packed int the same way, in place, after every call.)
        streak = self._streaks.get(session_id)
        if streak is None:
            return None
        prefix = (streak >> _STREAK_PREFIX_SHIFT) & _STREAK_PREFIX_MASK
        return format(prefix, "012x"), streak >> _STREAK_DIGEST_BITS

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
    return _with_execute(definition, wrap_execute(execute, brake, tool=str(name)))


def _with_execute(definition: T, execute: Callable[..., Any]) -> T:
    """A copy of ``definition`` with ``execute`` in place of its own; every other field kept."""
    if isinstance(definition, Mapping):
        return {**definition, "execute": execute}  # type: ignore[return-value]
    if dataclasses.is_dataclass(definition) and not isinstance(definition, type):
        try:
            return dataclasses.replace(definition, execute=execute)
        except (TypeError, ValueError):
            pass  # execute is not an init field: fall back to a shallow copy
    if isinstance(definition, tuple) and hasattr(definition, "_replace"):
        # A NamedTuple: its fields are read-only properties that only _replace can set.
        replaced: T = definition._replace(execute=execute)
        return replaced
    duplicate = copy.copy(definition)
    object.__setattr__(duplicate, "execute", execute)
    return duplicate
