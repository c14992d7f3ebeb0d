"""Patch files and their composition into rows, remembering which layer set each key.

A patch file is a YAML list. ``- insert: [rows]`` appends rows (an id that exists is an
error); ``- id: X`` with keys assigns each key over row X, so ``config:`` replaces the row's
whole config. A patch for an unknown id, or whose ``name`` differs from the row's, is skipped
with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_loop_brake.harness.errors import PatchError
from dsh_loop_brake.harness.safe_yaml import item_line, key_line, load_path, to_plain
from dsh_loop_brake.harness.types import Layer, Origin, Row, SkippedPatch

__all__ = ["ROW_KEYS", "Composition", "compose_layers", "read_patch_file"]

ROW_KEYS = ("id", "name", "config", "disabled")
_PATCH_FORMS = "`- insert: [rows]` or `- id: <row id>` followed by the keys to set"

logger = logging.getLogger("dsh_loop_brake.harness")


@dataclass(frozen=True)
class _Insert:
    rows: list[_Values]


@dataclass(frozen=True)
class _Assign:
    values: _Values


@dataclass(frozen=True)
class _Values:
    """The keys one row or patch spells out, with the line of each (config keys as config.K)."""

    id: str
    line: int | None
    values: dict[str, Any]
    lines: dict[str, int | None]


@dataclass(frozen=True)
class Composition:
    """The composed rows in order, the patches skipped on the way, and the layers read."""

    rows: tuple[Row, ...]
    skipped: tuple[SkippedPatch, ...] = ()
    layers: tuple[Layer, ...] = field(default=())

    def row(self, row_id: str) -> Row | None:
        """The composed row with this id, or None."""
        for row in self.rows:
            if row.id == row_id:
                return row
        return None


def read_patch_file(layer: Layer) -> list[_Insert | _Assign]:
    """Parse and validate one patch file; every mistake is a :class:`PatchError` with its line."""
    path = layer.path
    try:
        document = load_path(path)
    except OSError as exc:
        raise PatchError(f"cannot read the patch file ({exc.strerror or exc})", path) from None
    if document is None:
        return []
    if not isinstance(document, list):
        raise PatchError(
            f"a patch file is a YAML list of patches ({_PATCH_FORMS}), got {_kind(document)}",
            path,
            _line_of(document),
        )
    operations: list[_Insert | _Assign] = []
    for index, item in enumerate(document):
        line = item_line(document, index)
        if not isinstance(item, dict):
            raise PatchError(
                f"each patch is a mapping ({_PATCH_FORMS}), got {_kind(item)}", path, line
            )
        if "insert" in item:
            operations.append(_parse_insert(item, layer, line))
        elif "id" in item:
            operations.append(_Assign(_parse_values(item, layer, line, what="patch")))
        else:
            keys = ", ".join(repr(key) for key in item) or "no keys"
            raise PatchError(f"a patch is {_PATCH_FORMS}; this one has {keys}", path, line)
    return operations


def compose_layers(layers: Iterable[Layer]) -> Composition:
    """Apply each layer's patches in order over an empty row list."""
    rows: dict[str, dict[str, Any]] = {}
    sources: dict[str, dict[str, Origin]] = {}
    history: dict[str, dict[str, list[Origin]]] = {}  # per row and key: every layer that set it
    skipped: list[SkippedPatch] = []
    read: list[Layer] = []
    for layer in layers:
        read.append(layer)
        for operation in read_patch_file(layer):
            if isinstance(operation, _Insert):
                for spec in operation.rows:
                    if spec.id in rows:
                        raise PatchError(
                            f"row {spec.id!r} is already inserted (by "
                            f"{sources[spec.id]['id']}); to change it, patch it with "
                            f"`- id: {spec.id}` instead of inserting it again",
                            layer.path,
                            spec.line,
                        )
                    rows[spec.id] = {"config": None, "disabled": False, **spec.values}
                    sources[spec.id] = {
                        key: Origin(layer, spec.lines.get(key, spec.line)) for key in spec.lines
                    }
                    history[spec.id] = {key: [at] for key, at in sources[spec.id].items()}
                continue
            patch = operation.values
            row = rows.get(patch.id)
            reason = None
            if row is None:
                reason = (
                    "no row has this id (a patch changes an existing row, never inserts one); "
                    + _existing_ids(rows)
                )
            elif "name" in patch.values and patch.values["name"] != row["name"]:
                reason = (
                    f"its name {patch.values['name']!r} does not match the row's name "
                    f"{row['name']!r} (a patch's name only selects the row, it never renames it)"
                )
            if reason is not None:
                entry = SkippedPatch(layer, patch.id, reason, patch.line)
                logger.warning("%s", entry)
                skipped.append(entry)
                continue
            assert row is not None
            origin = sources[patch.id]
            earlier = history[patch.id]
            for key in ("config", "disabled"):
                if key in patch.values:
                    row[key] = patch.values[key]
                    origin[key] = Origin(layer, patch.lines.get(key))
                    earlier.setdefault(key, []).append(origin[key])
            if "config" in patch.values:
                # The whole config is replaced, so is the provenance of every key inside it
                # (the history keeps the earlier layers, so `config` can name them).
                for key in [key for key in origin if key.startswith("config.")]:
                    del origin[key]
                for key, line in patch.lines.items():
                    if key.startswith("config."):
                        origin[key] = Origin(layer, line)
                        earlier.setdefault(key, []).append(origin[key])
    composed = tuple(
        Row(
            id=row_id,
            name=values["name"],
            config=values["config"],
            disabled=values["disabled"],
            sources=dict(sources[row_id]),
            history={key: tuple(found) for key, found in history[row_id].items()},
        )
        for row_id, values in rows.items()
    )
    return Composition(composed, tuple(skipped), tuple(read))


def _parse_insert(item: Mapping[Any, Any], layer: Layer, line: int | None) -> _Insert:
    path = layer.path
    if "id" in item:
        raise PatchError(
            "group inserts (`id` together with `insert`) are not supported; insert the rows "
            "with `- insert: [rows]` and change them with `- id: <row id>`",
            path,
            key_line(item, "id", line),
        )
    for key in item:
        if key != "insert":
            raise PatchError(
                f"unknown key {_show(key)} in an insert patch; an insert patch has only the "
                "key insert (a list of rows)",
                path,
                key_line(item, key, line),
            )
    rows = item["insert"]
    insert_line = key_line(item, "insert", line)
    if rows is None:
        return _Insert([])
    if not isinstance(rows, list):
        raise PatchError(f"insert takes a list of rows, got {_kind(rows)}", path, insert_line)
    specs: list[_Values] = []
    for index, row in enumerate(rows):
        row_line = item_line(rows, index, insert_line)
        if not isinstance(row, dict):
            raise PatchError(f"each inserted row is a mapping, got {_kind(row)}", path, row_line)
        spec = _parse_values(row, layer, row_line, what="row")
        if "name" not in spec.values:
            raise PatchError(
                f"row {spec.id!r} needs a name (the plugin that applies it)", path, row_line
            )
        specs.append(spec)
    return _Insert(specs)


def _parse_values(item: Mapping[Any, Any], layer: Layer, line: int | None, *, what: str) -> _Values:
    path = layer.path
    for key in item:
        if key not in ROW_KEYS:
            subject = (
                f"row {_show(item.get('id'))}"
                if what == "row"
                else (f"the patch for {_show(item.get('id'))}")
            )
            raise PatchError(
                f"unknown key {_show(key)} in {subject}; the keys that exist are "
                f"{', '.join(ROW_KEYS)}",
                path,
                key_line(item, key, line),
            )
    values: dict[str, Any] = {}
    lines: dict[str, int | None] = {}
    for key in ROW_KEYS:
        if key not in item:
            continue
        raw = item[key]
        at = key_line(item, key, line)
        value = to_plain(raw)
        if key in ("id", "name") and (not isinstance(value, str) or not value.strip()):
            raise PatchError(f"{key} must be a non-empty string, got {_show(value)}", path, at)
        if key == "config":
            if value is not None and not isinstance(value, dict):
                raise PatchError(
                    f"config must be a mapping (or null for no config), got {_kind(raw)}",
                    path,
                    at,
                )
            if isinstance(raw, dict):
                for inner in raw:
                    lines[f"config.{inner}"] = key_line(raw, inner, at)
        if key == "disabled" and not isinstance(value, bool):
            raise PatchError(f"disabled must be true or false, got {_show(value)}", path, at)
        values[key] = value
        lines[key] = at
    if "id" not in values:
        raise PatchError(f"a {what} needs an id (a non-empty string)", path, line)
    row_id = values.pop("id")
    return _Values(row_id, line, values, lines)


def _existing_ids(rows: Mapping[str, object]) -> str:
    # A skipped patch is most often a typo in its id: list what it could have meant.
    if not rows:
        return (
            "no row has been inserted yet (is the bundle that inserts it in the profile's "
            "bundles list?)"
        )
    return "the ids that exist are " + ", ".join(repr(row_id) for row_id in rows)


def _line_of(node: object) -> int | None:
    lc = getattr(node, "lc", None)
    line = getattr(lc, "line", None)
    return line + 1 if isinstance(line, int) else 1


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    return f"a {type(value).__name__}"


def _show(value: object) -> str:
    text = repr(to_plain(value))
    return text if len(text) <= 60 else text[:59] + "\u2026"
