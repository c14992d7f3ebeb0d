"""Loading YAML safely: core tags only, and bounded size, nesting and node count.

The limits are checked on the parser's event stream before anything is constructed, so an
alias bomb ("billion laughs") is refused without being expanded: each anchored node's size is
memoised when it ends and an alias adds that size, so the count is the expanded one while the
work stays linear in the file. The same pass refuses, with its line, what would otherwise fail
later with a traceback: a key that is a list or a mapping, and an integer too large to convert
to decimal (and so to print). A file is read only when it is a regular file: a named pipe, a
directory or a device at the path is an error, never a hang.
"""

from __future__ import annotations

import errno
import io
import math
import os
import stat
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceStartEvent,
)
from ruamel.yaml.nodes import ScalarNode

from dsh_loop_brake.harness.errors import PatchError

__all__ = [
    "CORE_TAGS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INTEGER_DIGITS",
    "MAX_NODES",
    "check_events",
    "item_line",
    "key_line",
    "load_path",
    "load_text",
    "read_text",
    "round_trip_yaml",
    "to_plain",
]

MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_INTEGER_DIGITS = 4300
"""The most decimal digits an integer may have: Python's own limit for converting one to text."""

_INT_TAG: Final = "tag:yaml.org,2002:int"
_BASES: Final = {"0x": 16, "0o": 8, "0b": 2}

_CORE = ("str", "int", "float", "bool", "null", "seq", "map")
CORE_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in _CORE)
"""The tags a file may spell out: YAML's core schema, ``!!str`` … ``!!map``."""


def round_trip_yaml() -> YAML:
    """A round-trip (comment- and order-preserving) loader/dumper; feed it checked text only."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's UTF-8 text; a file over ``MAX_BYTES`` is refused before it is read whole.

    Only a regular file (or a symbolic link to one) is read: a named pipe, a directory, a socket
    or a device at the path is a :class:`PatchError`. The file is opened without blocking, so
    a pipe nobody writes to cannot hang the command. A missing file raises ``FileNotFoundError``
    (callers decide whether that means "no file"), but a symbolic link to nothing (or to
    itself) is a :class:`PatchError`: the user meant a file there. Other OS errors propagate.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP) and os.path.islink(path):
            # A link left behind when its file moved: not "no file" (which a caller may take
            # as an empty layer), but a file the user meant and that cannot be read.
            raise PatchError(_broken_link(path, exc), path) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise PatchError(
                f"this is {_file_kind(mode)}, not a file; a patch or profile file must be a "
                "regular file (move it away, or point at the real file)",
                path,
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as stream:
            fd = -1  # the stream owns it now
            data = stream.read(MAX_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_BYTES:
        raise PatchError(
            f"the file is larger than {MAX_BYTES // (1024 * 1024)} MiB, which is more than any "
            "patch or profile needs; refusing to load it",
            path,
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PatchError("the file is not UTF-8 text", path, line) from None


def _broken_link(path: str | os.PathLike[str], error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return (
            "this is a symbolic link that leads back to itself (a loop); point it at the real "
            "file, or remove it"
        )
    try:
        target = os.readlink(path)
    except OSError:
        target = "a file"
    return (
        f"this is a symbolic link to {target}, which does not exist; point it at the real "
        "file, or remove it"
    )


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_events(text: str, path: str | os.PathLike[str]) -> int:
    """Refuse what cannot be loaded safely or used, each with its line, before constructing.

    Non-core tags, nesting deeper than ``MAX_DEPTH``, over ``MAX_NODES`` nodes, a key that is a
    list or a mapping (or an alias to one), and an integer of more than ``MAX_INTEGER_DIGITS``
    decimal digits. Returns the number of nodes, counting each alias as the nodes it stands for.
    """
    depth = 0
    total = 0
    sizes: dict[str, int] = {}
    defined: set[str] = set()
    collections: set[str] = set()  # anchors of lists and mappings
    open_anchors: list[tuple[str | None, int]] = []  # per open collection: anchor, total at start
    # Per open collection: None for a list; for a mapping, whether its next node is a key.
    key_next: list[bool | None] = []
    yaml = YAML(typ="rt")
    try:
        for event in yaml.parse(io.StringIO(text)):
            line = event.start_mark.line + 1
            if isinstance(event, NodeEvent):
                is_key = bool(key_next) and key_next[-1] is True
                if key_next and key_next[-1] is not None:
                    key_next[-1] = not key_next[-1]  # a mapping's nodes alternate: key, value
                if isinstance(event, AliasEvent):
                    anchor = str(event.anchor)
                    if anchor not in sizes:
                        if any(name == anchor for name, _ in open_anchors):
                            raise PatchError(
                                f"the alias *{anchor} refers to a node that contains it "
                                "(a recursive structure); write the value out instead",
                                path,
                                line,
                            )
                        raise PatchError(f"the alias *{anchor} has no anchor &{anchor}", path, line)
                    if is_key and anchor in collections:
                        raise _collection_key(path, line)
                    total += sizes[anchor]
                else:
                    _check_tag(getattr(event, "tag", None), path, line)
                    total += 1
                    if event.anchor is not None:
                        if str(event.anchor) in defined:
                            raise PatchError(
                                f"the anchor &{event.anchor} is defined twice; give each "
                                "anchor its own name",
                                path,
                                line,
                            )
                        defined.add(str(event.anchor))
                if total > MAX_NODES:
                    raise PatchError(
                        f"the document has more than {MAX_NODES:,} nodes (counting each alias "
                        "as the nodes it stands for); refusing to load it",
                        path,
                        line,
                    )
                if isinstance(event, (SequenceStartEvent, MappingStartEvent)):
                    if is_key:
                        raise _collection_key(path, line)
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise PatchError(
                            f"the document nests deeper than {MAX_DEPTH} levels; refusing it",
                            path,
                            line,
                        )
                    anchor_name = _anchor(event)
                    if anchor_name is not None:
                        collections.add(anchor_name)
                    open_anchors.append((anchor_name, total - 1))
                    key_next.append(True if isinstance(event, MappingStartEvent) else None)
                elif isinstance(event, ScalarEvent):
                    if event.anchor is not None:
                        sizes[str(event.anchor)] = 1
                    _check_scalar(event, yaml, path, line)
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
                key_next.pop()
                ended, start = open_anchors.pop()
                if ended is not None:
                    sizes[ended] = total - start
    except MarkedYAMLError as exc:
        raise _malformed(exc, path) from None
    except YAMLError as exc:
        raise PatchError(f"malformed YAML: {_one_line(str(exc))}", path) from None
    return total


def load_text(text: str, path: str | os.PathLike[str], yaml: YAML | None = None) -> Any:
    """Check ``text`` (see :func:`check_events`) and load it with a round-trip loader."""
    check_events(text, path)
    try:
        return (yaml or round_trip_yaml()).load(text)
    except MarkedYAMLError as exc:
        raise _malformed(exc, path) from None
    except YAMLError as exc:
        raise PatchError(f"malformed YAML: {_one_line(str(exc))}", path) from None
    except (ValueError, TypeError, OverflowError, ArithmeticError, LookupError) as exc:
        # A value the checks above let through but the constructor cannot build: still the
        # file's problem, so one line naming it rather than a traceback.
        raise PatchError(
            f"cannot load the YAML ({type(exc).__name__}: {_one_line(str(exc))[:200]})", path
        ) from None


def load_path(path: str | os.PathLike[str], yaml: YAML | None = None) -> Any:
    """Read, check and load one YAML file (round-trip types, so keys keep their line numbers)."""
    return load_text(read_text(path), path, yaml)


def to_plain(value: Any) -> Any:
    """Round-trip types (``CommentedMap``, ``ScalarInt`` …) as plain dicts, lists and scalars."""
    if isinstance(value, dict):
        return {to_plain(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    if isinstance(value, TaggedScalar):  # the round-trip loader keeps ``!!str 5`` tagged
        return str(value.value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def key_line(mapping: object, key: object, default: int | None = None) -> int | None:
    """The 1-based line of ``key`` in a round-trip mapping, else ``default``."""
    try:
        return int(mapping.lc.key(key)[0]) + 1  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError, IndexError):
        return default


def item_line(sequence: object, index: int, default: int | None = None) -> int | None:
    """The 1-based line of item ``index`` of a round-trip sequence, else ``default``."""
    try:
        return int(sequence.lc.item(index)[0]) + 1  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError, IndexError):
        return default


def _collection_key(path: str | os.PathLike[str], line: int) -> PatchError:
    return PatchError(
        "a key here is a list or a mapping; a key must be a plain value such as a name",
        path,
        line,
    )


def _check_scalar(event: ScalarEvent, yaml: YAML, path: str | os.PathLike[str], line: int) -> None:
    """Refuse an integer with more decimal digits than Python converts (or json can print)."""
    value = str(event.value)
    if len(value) <= MAX_INTEGER_DIGITS // 4:  # cheap: no integer this short is too large
        return
    tag = getattr(event, "tag", None)
    if tag is not None:
        tag = str(getattr(tag, "value", tag))
    elif event.style is None:  # a plain scalar: resolved the way the loader will resolve it
        tag = str(yaml.resolver.resolve(ScalarNode, value, event.implicit))
    if tag != _INT_TAG:
        return
    digits = _decimal_digits(value)
    if digits > MAX_INTEGER_DIGITS:
        raise PatchError(
            f"an integer of about {digits:,} decimal digits is too large to use (at most "
            f"{MAX_INTEGER_DIGITS:,} digits); write a smaller number",
            path,
            line,
        )


def _decimal_digits(text: str) -> int:
    """How many decimal digits the YAML integer ``text`` has (an upper bound for other bases)."""
    text = text.replace("_", "").lstrip("+-")
    base = _BASES.get(text[:2].lower(), 10)
    digits = (text[2:] if base != 10 else text).lstrip("0")
    if base == 10:
        return len(digits)
    bits = len(digits) * int(math.log2(base))
    return int(bits * math.log10(2)) + 1


def _anchor(event: NodeEvent) -> str | None:
    return None if event.anchor is None else str(event.anchor)


def _check_tag(tag: object, path: str | os.PathLike[str], line: int) -> None:
    if tag is None:
        return
    text = str(getattr(tag, "value", tag))
    if text in CORE_TAGS:
        return
    prefix = "tag:yaml.org,2002:"
    shown = "!!" + text[len(prefix) :] if text.startswith(prefix) else text
    raise PatchError(
        f"the tag {_one_line(shown)[:80]} is not allowed; only the YAML core tags "
        "(!!str, !!int, !!float, !!bool, !!null, !!seq, !!map) are accepted",
        path,
        line,
    )


def _malformed(exc: MarkedYAMLError, path: str | os.PathLike[str]) -> PatchError:
    mark = exc.problem_mark or exc.context_mark
    line = None if mark is None else mark.line + 1
    parts = [part for part in (exc.context, exc.problem) if part]
    problem = ", ".join(parts) or "not valid YAML"
    return PatchError(f"malformed YAML: {_one_line(str(problem))}", path, line)


def _one_line(text: str) -> str:
    return " ".join(text.split())
