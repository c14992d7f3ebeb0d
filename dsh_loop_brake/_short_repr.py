"""Showing values and names in messages: short reprs that never walk a huge value, and names as
JSON literals that cannot break a line."""

from __future__ import annotations

import itertools
import json
import reprlib

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = ["json_literal", "short_repr"]


def json_literal(text: str) -> str:
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


def short_repr(value: object, limit: int = 80) -> str:
    """A repr of at most ``limit`` characters that never walks a huge value, and never fails."""
    if isinstance(value, (bytes, bytearray)):
        text = repr(bytes(value[: limit + 1]))
    else:
        text = _SHORT_REPR.repr1(value, _SHORT_REPR.maxlevel)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
