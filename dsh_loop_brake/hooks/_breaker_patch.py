"""``hook install --with-circuit-breaker``: the ``circuit-breaker`` row in the profile's patch file.

The loop brake counts identical calls in a row. Claude Code's most common loop is the same
``Bash`` command with its ``description`` (a note for the user, not part of the command)
rewritten every time: to the loop brake these are all different calls. The circuit breaker drops
``ignoreArgs`` (``description`` among them) before comparing calls and counts duplicates in a
window of recent calls, so it sees that loop. This module inserts its row into
``$DSH_HOME/profiles/<profile>/cordis.patch.yml`` with a round-trip YAML edit: the file's
comments, order and quoting survive, and it is replaced atomically with its mode kept.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from dsh_loop_brake.harness.errors import PatchError
from dsh_loop_brake.harness.layers import compose
from dsh_loop_brake.harness.profiles import PATCH_FILE, atomic_write, profile_dir
from dsh_loop_brake.harness.safe_yaml import load_text, read_text, round_trip_yaml

__all__ = ["BreakerPatch", "add_circuit_breaker"]

ROW_ID = "circuit-breaker"
PLUGIN = "dsh-circuit-breaker"
COMMENT = (
    "added by `dsh-loop-brake hook install --with-circuit-breaker`: the circuit breaker drops\n"
    "ignoreArgs (description among them) before comparing calls, so it also stops the same\n"
    "command repeated with only its description rewritten"
)


class BreakerPatch:
    """What ``add_circuit_breaker`` did: the patch file, and whether it changed."""

    __slots__ = ("changed", "existing", "path")

    def __init__(self, path: Path, changed: bool, existing: str | None = None) -> None:
        self.path = path
        self.changed = changed
        self.existing = existing  # where the profile's circuit-breaker row already comes from


def has_circuit_breaker(profile: str, home: Path) -> str | None:
    """Where the profile's composed ``circuit-breaker`` row is inserted, or ``None``."""
    row = compose(profile, home).row(ROW_ID)
    if row is None:
        return None
    origin = row.sources.get("id")
    return str(origin) if origin is not None else "the profile"


def add_circuit_breaker(profile: str, home: Path) -> BreakerPatch:
    """Insert the ``circuit-breaker`` row into the profile's patch file, unless it has one."""
    from dsh_loop_brake._breaker_config import DEFAULTS

    path = profile_dir(home, profile) / PATCH_FILE
    existing = has_circuit_breaker(profile, home)  # also checks every file of the profile
    if existing is not None:
        return BreakerPatch(path, changed=False, existing=existing)
    yaml = round_trip_yaml()
    yaml.width = 4096  # never re-wrap the user's long lines
    try:
        text: str | None = read_text(path)
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise PatchError(f"cannot read the patch file ({exc.strerror or exc})", path) from None
    document: Any = None if text is None else load_text(text, path, yaml)
    kept = ""
    if document is None:  # no file, an empty one, or only comments: keep those above the row
        document = CommentedSeq()
        kept = "".join(
            line
            for line in (text or "").splitlines(keepends=True)
            if not line.strip() or line.lstrip().startswith("#")
        )
        if kept and not kept.endswith("\n"):
            kept += "\n"
    if not isinstance(document, list):
        raise PatchError(
            "a patch file is a YAML list of patches; this one is not, so the circuit-breaker "
            "row was not added (add it by hand, see docs/hooks.md)",
            path,
            1,
        )
    offset = _sequence_offset(text or "")
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    config = CommentedMap()
    config["ignoreArgs"] = CommentedSeq(DEFAULTS["ignoreArgs"])
    row = CommentedMap()
    row["id"] = ROW_ID
    row["name"] = PLUGIN
    row["config"] = config
    item = CommentedMap()
    item["insert"] = CommentedSeq([row])
    patches: Any = document
    patches.append(item)
    patches.yaml_set_comment_before_after_key(len(patches) - 1, before=COMMENT, indent=0)
    buffer = io.StringIO()
    yaml.dump(patches, buffer)
    # ruamel indents a top-level sequence by the offset too; the file's own items start at 0.
    margin = " " * offset
    dumped = "".join(
        line[offset:] if line.startswith(margin) else line
        for line in buffer.getvalue().splitlines(keepends=True)
    )
    if text is not None and "\r\n" in text:
        dumped = dumped.replace("\r\n", "\n").replace("\n", "\r\n")
    os.makedirs(path.parent, exist_ok=True)
    atomic_write(path, (kept + dumped).encode("utf-8"))
    return BreakerPatch(path, changed=True)


_NESTED_ITEM = re.compile(r"( *)- ")
_KEY_LINE = re.compile(r"( *)(- +)?[^\s#][^#]*:\s*(#.*)?$")


def _sequence_offset(text: str) -> int:
    """How far the file indents a nested sequence's dash past its key (``offset``); default 2."""
    previous: tuple[int, str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        item = _NESTED_ITEM.match(line)
        if item is not None and indent > 0 and previous is not None:
            parent_indent, parent = previous
            key_column = parent_indent + (len(parent) - len(parent.lstrip("- ")))
            if _KEY_LINE.match(parent) and parent.rstrip().endswith(":"):
                return max(0, indent - key_column)
        previous = (indent, line.strip())
    return 2
