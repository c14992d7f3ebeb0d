"""Loading YAML safely: core tags only, and bounded size, nesting and node count.

The limits are checked on the parser's event stream before anything is constructed, so an
alias bomb ("billion laughs") is refused without being expanded: each anchored node's size is
memoised when it ends and an alias adds that size, so the count is the expanded one while the
work stays linear in the file.
"""

from __future__ import annotations

import io
import os
from typing import Any

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

from dsh_loop_brake.harness.errors import PatchError

__all__ = [
    "CORE_TAGS",
    "MAX_BYTES",
    "MAX_DEPTH",
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

_CORE = ("str", "int", "float", "bool", "null", "seq", "map")
CORE_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in _CORE)
"""The tags a file may spell out: YAML's core schema, ``!!str`` … ``!!map``."""


def round_trip_yaml() -> YAML:
    """A round-trip (comment- and order-preserving) loader/dumper; feed it checked text only."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's UTF-8 text; a file over ``MAX_BYTES`` is refused before it is read whole."""
    with open(path, "rb") as stream:
        data = stream.read(MAX_BYTES + 1)
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


def check_events(text: str, path: str | os.PathLike[str]) -> int:
    """Refuse non-core tags, nesting deeper than ``MAX_DEPTH`` and over ``MAX_NODES`` nodes.

    Returns the number of nodes, counting each alias as the nodes it stands for.
    """
    depth = 0
    total = 0
    sizes: dict[str, int] = {}
    defined: set[str] = set()
    open_anchors: list[tuple[str | None, int]] = []  # per open collection: anchor, total at start
    try:
        for event in YAML(typ="rt").parse(io.StringIO(text)):
            line = event.start_mark.line + 1
            if isinstance(event, NodeEvent):
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
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise PatchError(
                            f"the document nests deeper than {MAX_DEPTH} levels; refusing it",
                            path,
                            line,
                        )
                    open_anchors.append((_anchor(event), total - 1))
                elif isinstance(event, ScalarEvent) and event.anchor is not None:
                    sizes[str(event.anchor)] = 1
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
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
