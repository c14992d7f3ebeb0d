"""Call identity: ``canonical_json`` (JSON.stringify with sorted keys, RFC 8785) and the call hash.

Two encoders give the same text. The fast one is the json module's C encoder, used when a look
at the value's types shows it will write exactly what JSON.stringify writes: str keys sorted by
code point (the same order as UTF-16 unless a key holds an astral character), str, int, bool,
None, and floats whose Python repr is ECMAScript's too. Integral floats and non-finite ones are
swapped for the int or null JavaScript writes. Everything else, and anything deeper or larger
than the look is willing to walk, goes to the exact encoder: pure Python, iterative, so nesting
is bounded by memory and never raises RecursionError.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Final, final

__all__ = [
    "HASH_PREFIX_LENGTH",
    "call_digest",
    "call_hash",
    "canonical_json",
    "describe_unidentifiable",
    "hash_prefix",
]

HASH_PREFIX_LENGTH: Final = 12


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
    if not isinstance(tool_name, str):
        raise TypeError(f"call_hash: the tool name must be a str, got {type(tool_name).__name__}")
    return call_digest(tool_name, args).hex()


def hash_prefix(call_hash: str) -> str:
    """The first 12 hex characters of a call hash, and no more."""
    return call_hash[:HASH_PREFIX_LENGTH]


def call_digest(tool_name: str, args: Any) -> bytes:
    """The SHA-256 digest of the call; raises TypeError or ValueError for unidentifiable args.

    ``tool_name`` must already be known to be a ``str``.
    """
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


def describe_unidentifiable(error: Exception) -> str:
    """What could not be identified, for a warning: our messages name types only; anything else
    is reduced to its type name."""
    message = str(error)
    if message.startswith("canonical_json: "):
        return json.encoder.encode_basestring_ascii(message.removeprefix("canonical_json: "))[1:-1]
    return type(error).__name__
