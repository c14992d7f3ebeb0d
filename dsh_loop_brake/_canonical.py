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
of its types (``_survey``) shows that the C encoder writes exactly what the exact encoder would,
or would after rewriting the few floats that Python's repr writes otherwise than JavaScript
(``_Rewrites``, which proves first that no string can be touched). The property tests hold the
two to each other and to Node's JSON.stringify.

The optimisations that earned their place, measured with ``benchmarks/identity.py`` against the
floor (``json.dumps`` with ``sort_keys`` plus SHA-256), in instructions per call from valgrind,
as times on a shared machine drift (docs/performance.md has both):

* the C encoder built once (``_encode``): ``json.dumps`` builds an encoder per call, a third of
  the floor on a typical call; with it ``call_hash`` costs 0.95x the floor on realistic calls;
* a flat object of plain scalars (the usual call) skips the survey: two C-level passes;
* small values are surveyed container by container (``_survey_small``), large ones one depth at
  a time with C-level passes over every container at that depth (``_survey_large``): 10,000
  small objects in a list cost 6.1x the floor when a container budget sent them to the exact
  encoder, and 1.41x now; the large walk alone made realistic calls 1.27x instead of 0.96x (it
  sets up its passes at every depth, however few the items);
* floats that repr writes otherwise than JavaScript (integral ones, those below 1e-4) rewritten
  in the C encoder's text rather than sent to the exact encoder: an embedding of 1,536 floats
  with a few below 1e-4 cost 2.97x the floor, and 1.21x now (1.26x when all are below 1e-7);
  10,000 objects holding such floats 5.24x, and 1.56x now. Floats from 1e-6 to 1e-4 are
  rewritten from the split of the text in C-level passes (``_each_float_ending``): an
  embedding made of nothing else cost 1.93x with Python code per float, and 1.71x now;
* arrays of numbers written in one piece by the exact encoder (``_number_list_text``) for the
  values that still go there.
"""

from __future__ import annotations

import codecs
import enum
import functools
import json
import math
import re
from collections.abc import Callable, Collection, Iterable
from itertools import chain, compress, filterfalse, repeat

from dsh_loop_brake._digest import sha256_constructor

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final, final
else:
    from dsh_loop_brake._no_typing import final


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


# OpenSSL's SHA-256, or CPython's own in a hook process (why: dsh_loop_brake._digest).
_sha256: Final = sha256_constructor()
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
_CONTAINER_TYPES: Final = frozenset(_CONTAINER_BASES)
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
        elif kind in _CONTAINER_TYPES or issubclass(kind, _CONTAINER_BASES):
            marker = id(item)
            if marker in open_containers:
                raise ValueError(
                    f"canonical_json: a {kind.__name__} contains itself (a cyclic structure has "
                    "no JSON form)"
                )
            contents: Any = item if kind in _CONTAINER_TYPES else _read(item)
            if type(contents) is dict:
                open_containers[marker] = item
                out.append("{")
                stack.append(_Leave(marker))
                stack.append(_CLOSE_OBJECT)
                stack += reversed(_object_members(contents))
            elif len(contents) > 1 and _NUMBERS.issuperset(map(type, contents)):
                out.append(_number_list_text(contents))  # nothing inside: no cycle to look for
            else:
                open_containers[marker] = item
                out.append("[")
                stack.append(_Leave(marker))
                stack.append(_CLOSE_ARRAY)
                if contents:
                    interleaved: list[Any] = [_COMMA] * (2 * len(contents) - 1)
                    interleaved[::2] = contents
                    stack += reversed(interleaved)
        else:
            out.append(_scalar_text(item))  # a subclass of str, int or float, or refused
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
    keys: list[str] = list(obj)
    if _STR_ONLY.issuperset(map(type, keys)):
        unique = "".join(keys).isascii()  # distinct ASCII keys are distinct texts...
        keys.sort(key=None if unique else _utf16_order)  # ...in code point order, UTF-16's
        values = list(map(obj.__getitem__, keys))
    else:
        # A str subclass is ordered and written by the text it holds (its own __lt__ or __hash__
        # is never called); anything else is refused.
        members = sorted([(_key_text(key), item) for key, item in obj.items()], key=_by_key)
        keys = [key for key, _ in members]
        values = [item for _, item in members]
        unique = False
    texts = list(map(_string_text, keys))
    # Distinct str keys are distinct texts unless they hold surrogates (a pair held as two code
    # points is the astral character to JavaScript) or are subclasses (which may compare unequal
    # holding the same text).
    if not unique and len(set(texts)) != len(texts):
        raise ValueError(
            "canonical_json: two keys of one object are the same key to JavaScript (the same "
            "text, or a surrogate pair held as two code points and the astral character)"
        )
    entries: list[Any] = []
    separator = ""
    for text, item in zip(texts, values, strict=True):
        entries += (_Text(f"{separator}{text}:"), item)
        separator = ","
    return entries


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)  # the text a str subclass holds, whatever it overrides
    raise _NotIdentifiable(
        f"canonical_json: object keys must be str, got a key of type {type(key).__name__!r}"
    )


def _utf16_order(key: str) -> bytes:
    """Sort key comparing strings by UTF-16 code units, as JavaScript does. Code point order is
    the same except above U+FFFF, which UTF-16 writes as a pair of surrogates (U+D800..U+DFFF),
    below U+E000..U+FFFF."""
    return _utf_16_be(key, "surrogatepass")[0]


# The codec's C function itself: str.encode("utf-16-be") would import encodings.utf_16_be at its
# first use, and a check must not touch files.
_utf_16_be: Final = codecs.utf_16_be_encode


def _by_key(member: tuple[str, Any]) -> bytes:
    return _utf16_order(member[0])


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
    """An array of ints and floats (exact types): written by their own reprs in C, and then only
    the floats that repr writes otherwise than Number::toString rewritten (``_as_javascript``).

    The text holds nothing but numbers and commas, so no string can be rewritten by mistake.
    """
    try:
        text = ",".join(map(repr, numbers)) + ","  # a comma after every number, the last too
    except ValueError:  # an int beyond Python's decimal limit: _int_text says so
        return "[" + ",".join(map(_scalar_text, numbers)) + "]"
    if "e+1" in text or "e+2" in text or "n" in text:
        # From 1e16 (the exponents e+16 to e+20 are also the start of e+160 to e+209), or NaN or
        # an infinity: rare in arrays, written number by number.
        return "[" + ",".join(map(_scalar_text, numbers)) + "]"
    exponents = [e for e in _REPR_EXPONENTS if e in text] if "e-0" in text else ()
    text = _as_javascript(text, ",", exponents)
    if "-0," in text:
        # Step 2: -0.0 is 0 (by now "-0", without its ".0").
        text = _compiled(_NEGATIVE_ZERO).sub("0", text)
    return "[" + text[:-1] + "]"


_NUMBERS: Final = frozenset({int, float})
# In this order: e-05 and e-06 written in digits first, then the "e-0" left (e-07 to e-09).
_REPR_EXPONENTS: Final = ("e-05", "e-06", "e-0")
_NEGATIVE_ZERO: Final = "(?<![^,])-0(?=,)"


def _as_javascript(text: str, ends: str, exponents: Iterable[str]) -> str:
    """``text`` with the floats ``float.__repr__`` wrote in it as Number::toString writes them.

    For floats below 1e16 the two differ only where repr appends ".0" to an integral float,
    writes exponent notation from 1e-4 down (JavaScript from 1e-6 down) and pads an exponent to
    two digits: "e-05" to "e-09". The caller makes sure that every ".0" before one of ``ends`` in
    ``text`` ends such a float, and that every "e-0" does too; ``exponents`` are those of
    "e-05", "e-06" and "e-0" (for e-07 to e-09) that occur.
    """
    for end in ends:
        if ".0" + end in text:
            text = text.replace(".0" + end, end)  # step 6.a: 30.0 is 30
    for exponent in exponents:
        if exponent == "e-0":
            text = text.replace("e-0", "e-")  # steps 7-11: 1e-07 is 1e-7
        else:
            text = _each_float_ending(text, exponent)  # step 6.c: 1.5e-05 is 0.000015
    return text


def _each_float_ending(text: str, exponent: str) -> str:
    """``text`` with each float that ends in ``exponent`` (e-05 or e-06) written in digits.

    repr writes such a float as a digit, maybe a point and more digits, then the exponent
    (``1.5e-05``, ``-2e-06``), so each piece of the split ends with one of those mantissas,
    after its sign or a ``,`` ``:`` ``[``. Each step is one C-level pass over all the pieces:
    no Python code runs per float (a loop over the pieces took 1.93x the floor's instructions
    for an embedding of such floats, this 1.71x; valgrind, benchmarks/identity.py).
    """
    zeros = "0.0000" if exponent == "e-05" else "0.00000"  # 1.5e-05 is 0.000015
    pieces = text.split(exponent)
    last = pieces.pop()
    heads = list(map(str.rstrip, pieces, repeat(_DIGITS)))  # each piece up to its mantissa
    digits = map(str.replace, map(str.removeprefix, pieces, heads), repeat("."), repeat(""))
    return "".join(chain.from_iterable(zip(heads, repeat(zeros), digits))) + last


_DIGITS: Final = ".0123456789"


def _javascript_surrogates(text: str, *, escape: bool = True) -> str:
    """``text`` as JavaScript reads it: a high and low surrogate side by side are one astral
    character, and (with ``escape``) each unpaired surrogate is written ``\\udxxx`` (the
    well-formed JSON.stringify of ES2019)."""
    try:
        text.encode()  # UTF-8 has no form for a surrogate: this fails when text holds one
    except UnicodeEncodeError:
        pass
    else:
        return text
    # "utf-16" (its BOM written, then read) is one of the few codecs str.encode and bytes.decode
    # run without a lookup by name; "utf-16-le" would import a module at its first use, and a
    # check must not touch files.
    paired = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    if not escape:
        return paired
    return _compiled(_SURROGATE).sub(lambda match: f"\\u{ord(match.group()):04x}", paired)


_SURROGATE: Final = "[\ud800-\udfff]"
_ASTRAL: Final = "[\U00010000-\U0010ffff]"


@functools.cache
def _compiled(expression: str) -> re.Pattern[str]:
    """``expression`` compiled at its first use, then kept: most calls never need one, and the
    three compiled at import cost a hook process, a new one per tool call, 0.6 ms
    (benchmarks/hook.py). Kept here rather than in re's own cache, which a host can purge."""
    return re.compile(expression)


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
    """What the survey of a value's types found."""

    C_ENCODER = "the C encoder writes exactly what JSON.stringify writes"
    EXACT_ENCODER = "only the exact encoder writes it right, or it is not JSON"


# Module constants: an Enum member read from its class costs about 0.2 us on Python 3.11.
_C_ENCODER: Final = _Verdict.C_ENCODER
_EXACT_ENCODER: Final = _Verdict.EXACT_ENCODER


@final
class _Rewrites:
    """The third verdict: the C encoder's text, once the floats that repr writes otherwise than
    JavaScript are rewritten (``_as_javascript``): ``integral`` floats written "X.0", and
    ``exponents`` floats from 1e-9 to 1e-4 written with an exponent "e-05" to "e-09" (of which
    ``rewrites`` names the forms that occur).

    They are rewritten only when the text holds exactly as many ".0" before , } or ] and as
    many "e-0" as there are such floats: then every one of them belongs to such a float, and no
    string, key or other number holds one. A string that does ("version 1.0, final",
    "file-05") leaves the value to the exact encoder: it can never change what is written.
    """

    __slots__ = ("exponents", "integral", "rewrites")

    def __init__(self, integral: int, exponents: int, rewrites: tuple[str, ...]) -> None:
        self.integral = integral
        self.exponents = exponents
        self.rewrites = rewrites

    def apply(self, text: str) -> str | None:
        """``text`` with the floats rewritten, or ``None`` if that cannot be proved right."""
        if self.exponents and text.count("e-0") != self.exponents:
            return None
        if self.integral:
            found = 0
            for end in ",}]":  # step 6.a: 30.0 is 30 (each split is the count and the rewrite)
                pieces = text.split(".0" + end)
                found += len(pieces) - 1
                text = end.join(pieces)
            if found != self.integral:
                return None
        return _as_javascript(text, "", self.rewrites)


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
_SCALARS_AND_FLOAT: Final = _SCALARS | {float}


def _fast_text(value: Any) -> str | None:
    """The canonical text via the C encoder, or ``None`` when the exact encoder must decide.

    The text may still hold raw surrogate code points (see ``_javascript_surrogates``).
    """
    rewrites = None
    objects = None  # the objects whose keys are not yet checked (None: only ``value``'s)
    if not (
        type(value) is dict
        and _SCALARS.issuperset(map(type, value.values()))  # first: nested calls stop here
        and _STR_ONLY.issuperset(map(type, value))
    ):  # the usual call, one object of plain scalars, needs no survey
        verdict, objects = _survey(value)
        if verdict is _EXACT_ENCODER:
            return None
        if verdict is not _C_ENCODER:
            rewrites = verdict
    try:
        text = "".join(_encode(value, False))
    except (RecursionError, TypeError, ValueError):
        # Deeper than this stack allows, a NaN or an infinity, an int beyond the decimal limit,
        # or a value changed under us: the exact encoder decides.
        return None
    if rewrites is not None:
        rewritten = rewrites.apply(text)
        if rewritten is None:
            return None
        text = rewritten
    if not text.isascii():
        keys = "".join(value) if objects is None else "".join(chain.from_iterable(objects))
        if not keys.isascii() and _compiled(_ASTRAL).search(keys) is not None:
            return None  # JavaScript orders keys above U+FFFF by UTF-16 code units
    return text


def _survey(value: Any) -> tuple[_Verdict | _Rewrites, list[dict[Any, Any]]]:
    """Which encoder may write ``value``: a look at its types (``_survey_small``, or for a value
    too large for that, ``_survey_large``), and at its floats (``_float_verdict``). Also the
    objects met, whose keys must still be looked at for characters above U+FFFF if the text is
    not ASCII."""
    kind = type(value)
    objects: list[dict[Any, Any]] = []
    if kind in _SCALARS:
        return _C_ENCODER, objects
    if kind is float:
        return _float_verdict([value]), objects
    if kind is not dict and kind not in _ARRAYS:
        return _EXACT_ENCODER, objects  # a subclass or not JSON
    floats: list[float] = []
    verdict = _survey_small(value, floats, objects)
    if verdict is None:
        floats.clear()
        objects.clear()
        verdict = _survey_large(value, floats, objects)
    if verdict is _C_ENCODER and floats:
        return _float_verdict(floats), objects
    return verdict, objects


def _survey_small(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...],
    floats: list[float],
    objects: list[dict[Any, Any]],
) -> _Verdict | None:
    """The types of a small value, container by container (``None`` if it is not small): two
    C-level passes over each container, and Python code only for the items of one that holds
    containers or floats. Appends to ``floats`` those that repr may write otherwise than
    JavaScript (see _float_verdict), and to ``objects`` every object met."""
    pending = [value]
    budget = _FEW_ITEMS  # also bounds the depth the C encoder is given, and a cycle's walk
    while pending:
        container = pending.pop()
        if type(container) is dict:
            if not _STR_ONLY.issuperset(map(type, container)):
                return _EXACT_ENCODER  # a key that is not a str (refused) or a str subclass
            objects.append(container)
            items: Collection[Any] = container.values()
        else:
            items = container
        if _SCALARS.issuperset(map(type, items)):
            continue
        budget -= len(items)
        if budget < 0:
            return None
        for item in items:
            kind = type(item)
            if kind in _SCALARS:
                continue
            if kind is float:
                if item.is_integer() or not 1e-4 <= abs(item) < 1e16:
                    floats.append(item)
            elif kind is dict or kind in _ARRAYS:
                pending.append(item)
            else:
                return _EXACT_ENCODER  # a subclass or not JSON
    return _C_ENCODER


# Up to this many items looked at one by one the small walk is the cheaper one (the corpus of
# benchmarks/identity.py: 3 to 25); past it the large walk's C-level passes are.
_FEW_ITEMS: Final = 256


def _survey_large(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...],
    floats: list[float],
    objects: list[dict[Any, Any]],
) -> _Verdict:
    """The types of a large value (10,000 objects in a list), one depth at a time: every test is
    one C-level pass over all the containers at that depth, with no Python code per item.
    Appends to ``floats`` the floats found, and to ``objects`` every object met."""
    dicts, arrays = ([value], []) if type(value) is dict else ([], [value])
    seen: set[int] = set()
    for _ in range(_MAX_DEPTH):
        if dicts:
            if not _STR_ONLY.issuperset(map(type, chain.from_iterable(dicts))):
                return _EXACT_ENCODER  # a key that is not a str (refused) or a str subclass
            objects += dicts
        items = list(_children(arrays, dicts))  # one pass over the containers, then C lists
        kinds = list(map(type, items))
        present = set(kinds)
        if _SCALARS.issuperset(present):
            break  # the deepest depth, usually
        if not _JSON_TYPES.issuperset(present):
            return _EXACT_ENCODER  # a subclass or not JSON
        if float in present:
            floats += items if len(present) == 1 else compress(items, map(_is_float, kinds))
            if _SCALARS_AND_FLOAT.issuperset(present):
                break  # the deepest depth, with floats in it (an embedding, say)
        # A container met twice (a cycle, or one object in two places) goes to the exact
        # encoder, which tells the two apart; without this a cycle would make the walk endless.
        # (Containers at the deepest depth hold none, so they cannot be on a cycle.)
        before = len(seen)
        seen.update(map(id, dicts), map(id, arrays))
        if len(seen) - before != len(dicts) + len(arrays):
            return _EXACT_ENCODER
        if len(present) == 1:  # one kind of value, a container (a list of objects)
            dicts, arrays = (items, []) if dict in present else ([], items)
            continue
        dicts = list(compress(items, map(_is_dict, kinds))) if dict in present else []
        arrays = list(compress(items, map(_is_array, kinds))) if present & _ARRAYS else []
    else:
        return _EXACT_ENCODER  # deeper than the C encoder is given
    return _C_ENCODER


def _children(arrays: list[Any], dicts: list[dict[Any, Any]]) -> Iterable[Any]:
    return chain(chain.from_iterable(arrays), chain.from_iterable(map(dict.values, dicts)))


def _float_verdict(floats: list[float]) -> _Verdict | _Rewrites:
    """How the C encoder's ``float.__repr__`` of these floats becomes Number::toString's.

    They agree on every float that is not integral from 1e-4 up (from 2**52 up every float is
    integral). Integral floats below 1e16, and floats from 1e-9 up to 1e-4, are rewritten in the
    C encoder's text (``_Rewrites``; below 1e-9 the two agree again). The rest go to the exact
    encoder: integral floats from 1e16 and -0.0 (both rare), and NaN and the infinities, for
    which the C encoder raises (allow_nan=False).
    """
    whole = list(filter(float.is_integer, floats))
    fractional = list(filterfalse(float.is_integer, floats)) if whole else floats
    small = []  # the magnitudes of the fractional floats below 1e-4
    if fractional:
        magnitudes = list(map(abs, fractional))
        if not min(magnitudes) >= 1e-4:  # `not >=`: NaN fails it too
            small = list(compress(magnitudes, map(_below_1e_4, magnitudes)))
    if not whole and not small:
        return _C_ENCODER
    if whole and (not max(map(abs, whole)) < 1e16 or (0.0 in whole and "-0.0" in map(repr, whole))):
        return _EXACT_ENCODER
    # repr's exponent is the float's own, to the digit (a float below 1e-5 is never written
    # 1e-05): e-05 from 1e-5 to 1e-4, e-06 from 1e-6, e-07 to e-09 from 1e-9.
    rewrites: tuple[str, ...] = ()
    exponents = 0
    if small:
        lowest, highest = min(small), max(small)
        rewrites = tuple(
            exponent
            for exponent, low, high in _EXPONENT_BANDS
            if _any_within(small, lowest, highest, low, high)
        )
        exponents = len(small) if lowest >= 1e-9 else sum(map(_at_least_1e_9, small))
    return _Rewrites(len(whole), exponents, rewrites)


def _any_within(
    magnitudes: list[float], lowest: float, highest: float, low: float, high: float
) -> bool:
    """Whether any of ``magnitudes`` (from ``lowest`` to ``highest``) is from ``low`` up to
    ``high`` (excluded); C-level passes, and none when the range decides it."""
    if highest < low or lowest >= high:
        return False
    if lowest >= low and highest < high:
        return True
    return any(map(low.__le__, compress(magnitudes, map(high.__gt__, magnitudes))))


_below_1e_4: Final = (1e-4).__gt__
_at_least_1e_9: Final = (1e-9).__le__
_EXPONENT_BANDS: Final = (("e-05", 1e-5, 1e-4), ("e-06", 1e-6, 1e-5), ("e-0", 1e-9, 1e-6))
