"""Call identity: ``canonical_json`` and the call hash, written exactly as JavaScript writes them.

A call is identified by ``sha256(tool_name + "\\n" + canonical_json(args))``. ``canonical_json``
is the text JavaScript's ``JSON.stringify`` gives for the same JSON value with the keys of every
object sorted by UTF-16 code units (RFC 8785, JCS), so a Python host and a JavaScript host log
the same hash for the same call. The rules, each implemented below where it is cited:

* no whitespace; object members sorted by their keys' UTF-16 code units (RFC 8785 §3.2.3);
* strings quoted as ``JSON.stringify`` quotes them (ECMA-262 QuoteJSONString, well-formed since
  ES2019): ``\\"`` ``\\\\`` ``\\b`` ``\\f`` ``\\n`` ``\\r`` ``\\t``, other code points below U+0020
  as ``\\u00xx``, a lone surrogate as ``\\udxxx``, everything else as it is;
* floats as ECMA-262 Number::toString writes them (RFC 8785 §3.2.2.3); NaN and the infinities
  as ``null`` (SerializeJSONProperty);
* Python ints exactly, in decimal, beyond 2**53 too (JavaScript would have lost those digits);
* ``dict`` is an object, ``list`` and ``tuple`` arrays, ``str``, ``bool`` and ``None`` as JSON. A
  subclass is written as its base type: a container as ``dict(value)`` or ``list(value)`` reads
  it, a scalar by its base type's own formatting (no overridden ``__repr__``, ``__str__`` or
  ``__lt__`` is ever called); a key is ordered and written by the text it holds;
* anything else, and a value that raises while it is read, is refused with ``TypeError`` or
  ``ValueError`` naming a type, never a value.

Two encoders write that text. The **exact encoder** (``_exact_text``) is the rules above, one
value at a time, iterative, so nesting is bounded by memory and never raises RecursionError. The
**fast path** (``_fast_text``) hands the whole value to the json module's C encoder when a survey
of its types (``_survey``) shows that the C encoder writes exactly what the exact encoder would.
The optimisations that earned their place, measured with ``benchmarks/identity.py`` against the
floor (``json.dumps`` with ``sort_keys`` plus SHA-256, see docs/performance.md):

* the C encoder built once (``_encode``): ``json.dumps`` builds an encoder per call, a third of
  the floor on a typical call — without it the fast path could not beat the floor;
* the survey one depth at a time, every test one C-level pass over all the containers at that
  depth: 10,000 small objects in a list cost 5.8x the floor through the exact encoder and 1.1x
  this way;
* an array of numbers written in one piece (``_number_list_text``): ``float.__repr__`` in C, then
  only the forms in which repr and Number::toString differ rewritten: an embedding of 1,536
  floats with some below 1e-4 cost 3.3x the floor item by item and 1.0x this way;
* a flat object of plain scalars (the usual call) skips the survey: two C passes, about 5% of the
  call.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from itertools import chain, compress, filterfalse
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
    """Raised inside canonical_json for a value that has no JSON form."""


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


def describe_unidentifiable(error: Exception) -> str:
    """What could not be identified, for a warning: our messages name types only; anything else
    is reduced to its type name."""
    message = str(error)
    if isinstance(error, _NotIdentifiable) or message.startswith("canonical_json: "):
        return json.encoder.encode_basestring_ascii(message.removeprefix("canonical_json: "))[1:-1]
    return type(error).__name__


def _sha256_in_two_pieces(name: bytes, text: str) -> bytes:
    # A large call's text is not copied a third time to put the name in front of it.
    digest = _sha256(name + b"\n")
    digest.update(text.encode())
    return digest.digest()


_sha256: Final = hashlib.sha256
# Below this many characters a call is hashed as one string (one allocation, one update).
_ONE_PIECE: Final = 65536


# --- The exact encoder -------------------------------------------------------------------------


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
_CONTAINER_BASES: Final = (dict, list, tuple)
_SCALAR_TYPES: Final = frozenset({str, int, float, bool, type(None)})


def _exact_text(value: Any) -> str:
    """The rules, one value at a time, with a stack of its own in place of recursion."""
    out: list[str] = []
    stack: list[Any] = [value]
    # id -> container, for the containers being written: one met again inside itself is a cycle
    # (held here, so that an id cannot be reused while its container is open).
    open_containers: dict[int, Any] = {}
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Text:
            out.append(item)
        elif kind is _Leave:
            del open_containers[item]
        elif kind in _SCALAR_TYPES:
            out.append(_scalar_text(item))
        elif kind is dict or kind is list or kind is tuple or issubclass(kind, _CONTAINER_BASES):
            marker = id(item)
            if marker in open_containers:
                raise ValueError(
                    f"canonical_json: a {kind.__name__} contains itself (a cyclic structure has "
                    "no JSON form)"
                )
            contents: Any = item if kind is dict or kind is list or kind is tuple else _read(item)
            if type(contents) is dict:
                open_containers[marker] = item
                out.append("{")
                stack += (_Leave(marker), _CLOSE_OBJECT, *reversed(_object_members(contents)))
            elif contents and _NUMBERS.issuperset(map(type, contents)):
                out.append(_number_list_text(contents))  # nothing inside: no cycle to look for
            else:
                open_containers[marker] = item
                out.append("[")
                stack += (_Leave(marker), _CLOSE_ARRAY)
                if contents:
                    interleaved: list[Any] = [_COMMA] * (2 * len(contents) - 1)
                    interleaved[::2] = contents
                    stack += reversed(interleaved)
        else:
            out.append(_scalar_text(item))
    return "".join(out)


def _read(container: Any) -> dict[Any, Any] | list[Any]:
    """A subclass of dict, list or tuple as Python's own ``dict()`` or ``list()`` reads it."""
    try:
        return dict(container) if isinstance(container, dict) else list(container)
    except Exception as error:
        raise _NotIdentifiable(
            f"canonical_json: a value of type {type(container).__name__!r} raised "
            f"{type(error).__name__} while being read"
        ) from None


def _object_members(obj: dict[Any, Any]) -> list[Any]:
    """``obj`` as [key text, value, ',' key text, value, ...], members sorted by their keys'
    UTF-16 code units (RFC 8785 §3.2.3)."""
    keys = list(obj)
    plain = _STR_ONLY.issuperset(map(type, keys))
    if not plain:
        keys = [_key_text(key) for key in keys]  # str subclasses hold a str; anything else: refused
    ascii_keys = "".join(keys).isascii()
    # Code point order is UTF-16 order except above U+FFFF, which UTF-16 writes as a pair of
    # surrogates (U+D800..U+DFFF), below U+E000..U+FFFF. Only the keys decide (a stable sort).
    order = _first if ascii_keys else _utf16_order
    members = sorted(zip(keys, obj.values(), strict=True), key=order)
    texts = [_string_text(key) for key, _ in members]
    # Distinct str keys are distinct texts, unless they are subclasses (which may compare unequal
    # holding the same text) or hold surrogates (a pair held as two code points is the astral
    # character to JavaScript).
    if not (plain and ascii_keys) and len(set(texts)) != len(texts):
        raise ValueError(
            "canonical_json: two keys of one object are the same key to JavaScript (the same "
            "text, or a surrogate pair held as two code points and the astral character)"
        )
    entries: list[Any] = []
    separator = ""
    for text, (_, item) in zip(texts, members, strict=True):
        entries += (_Text(f"{separator}{text}:"), item)
        separator = ","
    return entries


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)  # the text a str subclass holds, whatever it overrides
    raise _NotIdentifiable(
        f"canonical_json: object keys must be str, got a key of type {type(key).__name__!r}"
    )


def _first(member: tuple[str, Any]) -> str:
    return member[0]


def _utf16_order(member: tuple[str, Any]) -> bytes:
    """Sort key comparing members' keys by UTF-16 code units, as JavaScript does."""
    return member[0].encode("utf-16-be", "surrogatepass")


def _scalar_text(item: Any) -> str:
    """A string, number, true, false or null (SerializeJSONProperty)."""
    if item is None:
        return "null"
    if item is True:
        return "true"
    if item is False:
        return "false"
    kind = type(item)
    if kind is str:
        return _string_text(item)
    if kind is int:
        return _int_text(item)
    if kind is float:
        return _number_text(item)
    # A subclass, converted by its base type's own method: an override is never called.
    if issubclass(kind, str):
        return _string_text(str.__str__(item))
    if issubclass(kind, int):
        return _int_text(int.__int__(item))
    if issubclass(kind, float):
        return _number_text(float.__float__(item))
    raise _NotIdentifiable(
        f"canonical_json: a value of type {type(item).__name__!r} has no JSON form"
    )


def _string_text(text: str) -> str:
    """QuoteJSONString (ECMA-262 §25.5.2.3): the json module writes the same escapes, lowercase
    hex included; a lone surrogate is escaped as JavaScript escapes it (see below)."""
    quoted: str = json.encoder.encode_basestring(text)
    return quoted if quoted.isascii() else _javascript_surrogates(quoted)


def _int_text(number: int) -> str:
    try:
        return int.__repr__(number)
    except ValueError:
        raise ValueError(
            f"canonical_json: an int of {number.bit_length()} bits is beyond Python's limit for "
            "decimal conversion"
        ) from None


def _number_text(number: float) -> str:
    """ECMA-262 Number::toString(x) (§6.1.6.1.20); NaN and the infinities become null."""
    if not math.isfinite(number):
        return "null"  # SerializeJSONProperty: a Number that is not finite is "null"
    if number == 0:
        return "0"  # step 2: +0 and -0 are "0"
    # Step 5: n, k, s with k as small as possible: Python's repr has the same shortest digits.
    text = float.__repr__(abs(number))
    mantissa, _, exponent_text = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    significant = digits.rstrip("0")
    exponent = int(exponent_text or 0) - len(fraction) + (len(digits) - len(significant))
    k = len(significant)
    n = k + exponent  # the value is 0.<significant> * 10**n
    if k <= n <= 21:
        body = significant + "0" * (n - k)  # step 6.a: an integer, in digits
    elif 0 < n <= 21:
        body = significant[:n] + "." + significant[n:]  # step 6.b
    elif -6 < n <= 0:
        body = "0." + "0" * -n + significant  # step 6.c: down to 0.000001
    else:
        e = n - 1  # steps 7-11: exponent notation, no leading zero in the exponent
        head = significant[0] + ("." + significant[1:] if k > 1 else "")
        body = f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"
    return "-" + body if number < 0 else body  # step 3


def _number_list_text(numbers: list[Any] | tuple[Any, ...]) -> str:
    """An array of ints and floats (exact types), written by their own reprs in C, and then only
    the forms in which ``float.__repr__`` and Number::toString differ rewritten.

    With ``n`` as in ``_number_text`` (the value is 0.<digits> * 10**n), repr writes exponent
    notation for n <= -4 and n > 16, JavaScript for n <= -6 and n > 21; repr also appends ".0"
    to an integral float and pads an exponent to two digits. The text holds nothing but numbers
    and commas, so rewriting it cannot touch a string; each test below is one C-level search.
    """
    try:
        text = ",".join(map(repr, numbers)) + ","  # a comma after every token, the last one too
    except ValueError:  # an int beyond Python's decimal limit: _int_text says so
        return "[" + ",".join(map(_scalar_text, numbers)) + "]"
    if ".0," in text:
        text = text.replace(".0,", ",")  # step 6.a: 30.0 is 30
        if "-0," in text:
            text = _NEGATIVE_ZERO.sub("0", text)  # step 2: -0.0 is 0
    if "n" in text:  # inf, -inf, nan (SerializeJSONProperty)
        text = text.replace("-inf", "null").replace("inf", "null").replace("nan", "null")
    if "e" in text:
        for suffix in _REPR_EXPONENTS_WRITTEN_IN_DIGITS:
            if suffix in text:  # rare, or an array of such numbers: Python per token
                text = _each_token_ending(text, suffix, _javascript_number)
        text = text.replace("e-0", "e-")  # steps 7-11: 1e-07 is 1e-7
    return "[" + text[:-1] + "]"


_NUMBERS: Final = frozenset({int, float})
_NEGATIVE_ZERO: Final = re.compile("(?<![^,])-0(?=,)")
# Step 6: n from -5 to 21 is written in digits: repr's e-05, e-06 (n = -4, -5) and e+16 to e+20.
_REPR_EXPONENTS_WRITTEN_IN_DIGITS: Final = ("e-05,", "e-06,", *(f"e+{e}," for e in range(16, 21)))


def _each_token_ending(text: str, suffix: str, rewrite: Callable[[str], str]) -> str:
    """``text`` (tokens each followed by a comma) with each token ending in ``suffix`` (its comma
    included) rewritten."""
    pieces = text.split(suffix)
    out = []
    for piece in pieces[:-1]:
        head, comma, start = piece.rpartition(",")
        out.append(f"{head}{comma}{rewrite(start + suffix[:-1])},")
    out.append(pieces[-1])
    return "".join(out)


def _javascript_number(token: str) -> str:
    """A float's repr in exponent notation as Number::toString writes it (step 6)."""
    if token.endswith(("e-05", "e-06")):
        # Step 6.c: "0.", -n zeros, the digits: 1.5e-05 (n = -4) is 0.000015.
        sign, mantissa = ("-", token[1:-4]) if token[0] == "-" else ("", token[:-4])
        zeros = "0.0000" if token[-1] == "5" else "0.00000"
        return sign + zeros + mantissa.replace(".", "")
    return _number_text(float(token))  # repr's digits read back: the same float


def _javascript_surrogates(text: str, *, escape: bool = True) -> str:
    """``text`` as JavaScript reads it: a high and low surrogate side by side are one astral
    character, and (with ``escape``) each unpaired surrogate is written ``\\udxxx`` (the
    well-formed JSON.stringify of ES2019)."""
    if _SURROGATE.search(text) is None:
        return text
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if not escape:
        return paired
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", paired)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")

# Look the codecs up now: a first use would import a module, and a check must not touch files.
_javascript_surrogates("\ud800")
"".encode("utf-16-be", "surrogatepass")


# --- The fast path: the json module's C encoder -----------------------------------------------


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
        None,  # markers: the survey admits no container twice, so no cycle
        _refuse,  # default: the survey admits only JSON types
        json.encoder.encode_basestring,  # the escapes of QuoteJSONString; see _string_text
        None,  # indent
        ":",
        ",",
        True,  # sort_keys: code point order, which the survey makes sure is UTF-16 order
        False,  # skipkeys
        False,  # allow_nan: NaN or an infinity the survey let through raises ValueError
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


class _Verdict(enum.Enum):
    """What the survey of a value's types found: which encoder writes it right."""

    C_ENCODER = "the C encoder writes exactly what JSON.stringify writes"
    C_ENCODER_AFTER_INT_SWAP = "the same, once each integral float is swapped for its int"
    EXACT_ENCODER = "only the exact encoder writes it right, or it is not JSON"


# Module constants: an Enum member read from its class costs about 0.2 us on Python 3.11.
_C_ENCODER: Final = _Verdict.C_ENCODER
_C_ENCODER_AFTER_INT_SWAP: Final = _Verdict.C_ENCODER_AFTER_INT_SWAP
_EXACT_ENCODER: Final = _Verdict.EXACT_ENCODER

# The C encoder recurses into nested containers; past this depth the exact encoder takes over,
# far beyond real arguments and well inside any interpreter's recursion limit.
_MAX_DEPTH: Final = 256

_STR_ONLY: Final = frozenset({str})
_SCALARS: Final = frozenset({str, int, bool, type(None)})  # exact types: no subclass
_ARRAYS: Final = frozenset({list, tuple})
_JSON_TYPES: Final = _SCALARS | _ARRAYS | {dict, float}
_is_dict: Final = frozenset({dict}).__contains__
_is_array: Final = _ARRAYS.__contains__
_is_float: Final = frozenset({float}).__contains__


def _fast_text(value: Any) -> str | None:
    """The canonical text via the C encoder, or ``None`` when the exact encoder must decide.

    The text may still hold raw surrogate code points (see ``_javascript_surrogates``).
    """
    flat = (
        type(value) is dict
        and _SCALARS.issuperset(map(type, value.values()))  # first: nested calls stop here
        and _STR_ONLY.issuperset(map(type, value))
    )
    if flat:
        verdict = _C_ENCODER  # the usual call: one object of plain scalars, no survey needed
    else:
        verdict = _survey(value)
        if verdict is _EXACT_ENCODER:
            return None
    try:
        if verdict is _C_ENCODER_AFTER_INT_SWAP:
            value = _with_integral_floats_as_ints(value)
        text = "".join(_encode(value, False))
    except (RecursionError, TypeError, ValueError):
        # Deeper than this stack allows, a NaN or an infinity, an int beyond the decimal limit,
        # or a value changed under us: the exact encoder decides.
        return None
    if flat and not text.isascii():
        keys = "".join(value)  # the survey looks at the keys of everything else
        if not keys.isascii() and _ASTRAL.search(keys) is not None:
            return None  # JavaScript orders keys above U+FFFF by UTF-16 code units
    return text


def _survey(value: Any) -> _Verdict:
    """Which encoder may write ``value``: a walk over its containers one depth at a time, where
    every test is one C-level pass over all the containers at that depth (no Python code runs
    per item)."""
    kind = type(value)
    if kind in _SCALARS:
        return _C_ENCODER
    if kind is float:
        return _float_verdict([value])
    if kind is dict:
        dicts, arrays = [value], []
    elif kind in _ARRAYS:
        dicts, arrays = [], [value]
    else:
        return _EXACT_ENCODER  # a subclass or not JSON
    floats: list[float] = []
    seen: set[int] = set()
    for _ in range(_MAX_DEPTH):
        if dicts:
            keys = list(chain.from_iterable(dicts))
            if not _STR_ONLY.issuperset(map(type, keys)):
                return _EXACT_ENCODER  # a key that is not a str (refused) or a str subclass
            text = "".join(keys)
            if not text.isascii() and _ASTRAL.search(text) is not None:
                return _EXACT_ENCODER  # above U+FFFF, UTF-16 and code point order differ
        children = chain(chain.from_iterable(arrays), chain.from_iterable(map(dict.values, dicts)))
        if _SCALARS.issuperset(map(type, children)):
            break  # the deepest level, usually: one pass, nothing kept
        # A container met twice (a cycle, or one object in two places) goes to the exact
        # encoder, which tells the two apart; without this a cycle would make the walk endless.
        # (Containers at the deepest level hold none, so they cannot be on a cycle.)
        before = len(seen)
        seen.update(map(id, dicts), map(id, arrays))
        if len(seen) - before != len(dicts) + len(arrays):
            return _EXACT_ENCODER
        items = [*chain.from_iterable(arrays), *chain.from_iterable(map(dict.values, dicts))]
        kinds = list(map(type, items))
        present = set(kinds)
        if not _JSON_TYPES.issuperset(present):
            return _EXACT_ENCODER  # a subclass or not JSON
        if len(present) == 1:  # one kind of value (a list of objects, an embedding): no sorting
            dicts, arrays = (items, []) if dict in present else ([], items)
            if float in present:
                floats += items
                break
            continue
        if float in present:
            floats += compress(items, map(_is_float, kinds))
        dicts = list(compress(items, map(_is_dict, kinds))) if dict in present else []
        arrays = list(compress(items, map(_is_array, kinds))) if present & _ARRAYS else []
        if not dicts and not arrays:
            break
    else:
        return _EXACT_ENCODER  # deeper than the C encoder is given
    return _float_verdict(floats) if floats else _C_ENCODER


def _float_verdict(floats: list[float]) -> _Verdict:
    """Whether ``float.__repr__`` (what the C encoder writes) is Number::toString for each float.

    It is for a float that is not integral from 1e-4 up (below, the two switch to exponent
    notation at different points, see ``_number_list_text``; from 2**52 up every float is
    integral). An integral float is written right once swapped for the int with its digits,
    exact below 2**53, where repr writes them all. NaN and the infinities go to the exact
    encoder: the comparisons below fail for them, or the C encoder raises (allow_nan=False).
    """
    fractional = list(filterfalse(float.is_integer, floats))
    if fractional and not min(map(abs, fractional)) >= 1e-4:  # `not >=`: NaN fails it too
        return _EXACT_ENCODER
    if len(fractional) == len(floats):
        return _C_ENCODER
    if not max(map(abs, floats)) < 2**53:
        return _EXACT_ENCODER
    return _C_ENCODER_AFTER_INT_SWAP


def _with_integral_floats_as_ints(value: Any) -> Any:
    """A copy of ``value`` (surveyed: exact types, acyclic) with integral floats as ints."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {key: _with_integral_floats_as_ints(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_with_integral_floats_as_ints(item) for item in value]
    return value
