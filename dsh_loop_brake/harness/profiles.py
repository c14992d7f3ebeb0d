"""Profiles: where they live, their bundle list, and installing or removing a bundle atomically.

``$DSH_HOME`` (default ``~/.dsh``) holds ``profiles/<name>/profile.yml`` (``bundles:``, the
ordered bundle list) and an optional ``profiles/<name>/cordis.patch.yml``. A profile that does
not exist is an empty one. Edits go through ruamel.yaml's round-trip mode, so the user's
comments, order and quoting survive, and the file is replaced atomically.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from dsh_loop_brake.harness.atomic import atomic_write
from dsh_loop_brake.harness.errors import HarnessError, PatchError
from dsh_loop_brake.harness.safe_yaml import (
    item_line,
    key_line,
    load_text,
    read_text,
    round_trip_yaml,
    to_plain,
)

__all__ = [
    "PATCH_FILE",
    "PROFILE_FILE",
    "ProfileChange",
    "add_bundle",
    "atomic_write",
    "default_home",
    "install",
    "profile_dir",
    "profile_names",
    "read_bundle_entries",
    "read_bundles",
    "remove_bundle",
    "resolve_home",
    "uninstall",
]

PROFILE_FILE = "profile.yml"
PATCH_FILE = "cordis.patch.yml"
HOME_ENV = "DSH_HOME"
PROFILE_KEYS = ("bundles", "description")
"""The keys a ``profile.yml`` may have; any other (a typo such as ``bundle:``) is an error.

Keys starting with ``x-`` are extension keys, left alone: the place for a YAML anchor that
``bundles:`` refers to (``x-defaults: &defaults [...]`` then ``bundles: *defaults``).
"""
EXTENSION_PREFIX = "x-"

_WIDTH = 1 << 30
"""The dumper's line width: never re-wrap a user's long line (ruamel's default is 80)."""

_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass(frozen=True)
class ProfileChange:
    """The outcome of an install or uninstall: the file and whether it (or the profile) changed."""

    path: Path
    changed: bool
    created: bool = False


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$DSH_HOME`` when set to a non-blank value, else ``~/.dsh``."""
    value = (os.environ if environ is None else environ).get(HOME_ENV, "")
    return _expand(Path(value) if value.strip() else Path("~/.dsh"))


def resolve_home(
    home: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """``home`` (``~`` expanded) when given, else :func:`default_home`."""
    return default_home(environ) if home is None else _expand(Path(home))


def _expand(path: Path) -> Path:
    """``path`` with ``~`` expanded; a home directory that cannot be found is one clear error."""
    try:
        return path.expanduser()
    except (RuntimeError, KeyError):  # no HOME, and no passwd entry for this user (or ~name)
        raise HarnessError(
            f"cannot find the home directory for {str(path)!r}: HOME is not set and the user "
            f"(uid {_uid()}) has no entry in the password database; set HOME or "
            f"{HOME_ENV}, or pass --home DIR"
        ) from None


def _uid() -> str:
    getuid = getattr(os, "getuid", None)
    return "?" if getuid is None else str(getuid())


def profile_dir(
    home: str | os.PathLike[str] | None,
    profile: str,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """``<home>/profiles/<profile>``; the name must be a plain file name, not a path."""
    if not isinstance(profile, str) or not _PROFILE_NAME.match(profile):
        raise HarnessError(
            f"invalid profile name {profile!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return resolve_home(home, environ) / "profiles" / profile


def profile_names(home: str | os.PathLike[str] | None = None) -> list[str]:
    """The profiles under ``home`` (directories of ``profiles/`` with a valid name), sorted."""
    try:
        entries = list(os.scandir(resolve_home(home) / "profiles"))
    except OSError:
        return []
    names = []
    for entry in entries:
        try:
            if entry.is_dir() and _PROFILE_NAME.match(entry.name):
                names.append(entry.name)
        except OSError:
            continue
    return sorted(names)


def read_bundles(path: Path) -> list[str]:
    """The ordered bundle list of a ``profile.yml``; a missing or empty file has none."""
    return [name for name, _ in read_bundle_entries(path)]


def read_bundle_entries(path: Path) -> list[tuple[str, int | None]]:
    """Each bundle of a ``profile.yml`` with its 1-based line, so errors can point at it."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise PatchError(f"cannot read the profile ({exc.strerror or exc})", path) from None
    document = load_text(text, path)
    bundles = _bundle_list(document, path)
    if bundles is None:
        return []
    line = key_line(document, "bundles")
    return [(str(name), item_line(bundles, index, line)) for index, name in enumerate(bundles)]


def install(
    bundle: str,
    profile: str = "default",
    home: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ProfileChange:
    """Add an installed bundle to a profile's bundle list, after checking its manifest and patch."""
    # Imported here: profiles are also read while composing, which these modules depend on.
    from dsh_loop_brake.harness.manifest import bundle_layer
    from dsh_loop_brake.harness.patches import read_patch_file

    path = profile_dir(home, profile, environ) / PROFILE_FILE
    layer = bundle_layer(bundle)
    if layer is not None:
        read_patch_file(layer)
    return add_bundle(path, bundle)


def uninstall(
    bundle: str,
    profile: str = "default",
    home: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ProfileChange:
    """Remove a bundle from a profile's bundle list (it need not be installed any more)."""
    return remove_bundle(profile_dir(home, profile, environ) / PROFILE_FILE, bundle)


def add_bundle(path: Path, bundle: str) -> ProfileChange:
    """Append ``bundle`` to the profile's bundle list (creating the profile); idempotent."""
    document, yaml, text = _load_for_edit(path)
    kept = ""
    if document is None:
        document = CommentedMap()
        # A file of only comments loads as None, comments and all: keep them above the new key.
        kept = "".join(
            line
            for line in (text or "").splitlines(keepends=True)
            if not line.strip() or line.lstrip().startswith("#")
        )
        if kept and not kept.endswith("\n"):
            kept += "\n"
    bundles = _bundle_list(document, path)
    if bundles is not None and bundle in bundles:
        return ProfileChange(path, changed=False)
    if bundles is None:
        document["bundles"] = CommentedSeq([bundle])
    elif _is_shared(bundles, document):
        # `bundles: *defaults`: appending would edit the anchor and every other alias of it.
        own = CommentedSeq([*bundles, bundle])
        _keep_anchor(bundles)
        document["bundles"] = own
    else:
        _append(bundles, bundle)
    _save(path, yaml, document, kept, crlf=_uses_crlf(text))
    return ProfileChange(path, changed=True, created=text is None)


def remove_bundle(path: Path, bundle: str) -> ProfileChange:
    """Remove ``bundle`` from the profile's bundle list; nothing happens when it is absent."""
    document, yaml, text = _load_for_edit(path)
    if document is None:
        return ProfileChange(path, changed=False)
    bundles = _bundle_list(document, path)
    if bundles is None or bundle not in bundles:
        return ProfileChange(path, changed=False)
    if _is_shared(bundles, document):
        _keep_anchor(bundles)
        bundles = document["bundles"] = CommentedSeq(list(bundles))
    for index in range(len(bundles) - 1, -1, -1):
        if bundles[index] == bundle:
            _delete(bundles, index)
    _save(path, yaml, document, crlf=_uses_crlf(text))
    return ProfileChange(path, changed=True)


def _load_for_edit(path: Path) -> tuple[Any, Any, str | None]:
    """The profile's document, a dumper keeping its style, and its text (None: no file)."""
    yaml = round_trip_yaml()
    yaml.width = _WIDTH
    try:
        text = read_text(path)
    except FileNotFoundError:
        yaml.indent(mapping=2, sequence=4, offset=2)
        return None, yaml, None
    except OSError as exc:
        raise PatchError(f"cannot read the profile ({exc.strerror or exc})", path) from None
    # Checked and loaded first: guessing the indentation parses the text unchecked.
    document = load_text(text, path, yaml)
    # Keep the user's indentation style.
    _, indent, block_seq_indent = load_yaml_guess_indent(text)
    mapping = _guess_mapping_indent(text) or 2
    if indent is not None:
        offset = block_seq_indent if block_seq_indent is not None else 0
        yaml.indent(mapping=mapping, sequence=indent, offset=offset)
    else:
        yaml.indent(mapping=mapping, sequence=mapping + 2, offset=mapping)
    return document, yaml, text


_BLOCK_KEY = re.compile(r"( *)[^\s#\-][^#]*:\s*(#.*)?\Z")


def _guess_mapping_indent(text: str) -> int | None:
    """How far the file indents a nested mapping (ruamel guesses only sequences)."""
    previous: re.Match[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        parent = -1 if previous is None else len(previous.group(1))
        if previous is not None and indent > parent and not stripped.startswith("-"):
            return indent - parent
        previous = _BLOCK_KEY.match(line)
    return None


def _bundle_list(document: Any, path: Path) -> Any:
    if document is None:
        return None
    if not isinstance(document, dict):
        raise PatchError(
            "a profile.yml is a mapping with a `bundles:` list of bundle names", path, 1
        )
    for key in document:
        if isinstance(key, str) and key.startswith(EXTENSION_PREFIX):
            continue
        if key not in PROFILE_KEYS:
            shown = repr(to_plain(key))
            shown = shown if len(shown) <= 60 else shown[:59] + "\u2026"
            raise PatchError(
                f"unknown key {shown} in the profile; the keys that exist are "
                f"{', '.join(PROFILE_KEYS)} (and {EXTENSION_PREFIX}... extension keys for "
                "anchors); check the spelling",
                path,
                key_line(document, key, 1),
            )
    description = to_plain(document.get("description"))
    if description is not None and not isinstance(description, str):
        raise PatchError(
            "description must be a string (what the profile is for)",
            path,
            key_line(document, "description", 1),
        )
    if "bundles" not in document or document["bundles"] is None:
        return None
    bundles = document["bundles"]
    line = key_line(document, "bundles")
    if not isinstance(bundles, list):
        raise PatchError("bundles must be a list of bundle names", path, line)
    seen: set[str] = set()
    for index, name in enumerate(bundles):
        entry_line = item_line(bundles, index, line)
        plain = to_plain(name)
        if not isinstance(plain, str) or not plain.strip():
            raise PatchError(
                f"each entry of bundles must be a bundle name, got {plain!r}", path, entry_line
            )
        if plain in seen:
            raise PatchError(
                f"the bundle {plain!r} is listed twice; list each bundle once", path, entry_line
            )
        seen.add(plain)
    return bundles


def _save(path: Path, yaml: Any, document: Any, prefix: str = "", *, crlf: bool = False) -> None:
    buffer = io.StringIO()
    buffer.write(prefix)
    yaml.dump(document, buffer)
    # ruamel writes "\n" but keeps a comment's own "\r\n": normalise, then use the file's ending.
    text = buffer.getvalue().replace("\r\n", "\n")
    if crlf:
        text = text.replace("\n", "\r\n")
    atomic_write(path, text.encode("utf-8"))


def _uses_crlf(text: str | None) -> bool:
    """Whether the file ends its lines with CRLF (most of them: a stray one does not count)."""
    if not text:
        return False
    crlf = text.count("\r\n")
    return crlf > 0 and crlf * 2 >= text.count("\n")


def _is_shared(bundles: Any, document: Any) -> bool:
    """Whether the ``bundles`` list is also reached from elsewhere (a YAML anchor and alias)."""
    return _contains(document, bundles, skip="bundles")


def _contains(node: Any, target: Any, *, skip: object = None) -> bool:
    """Whether ``target`` (by identity) is nested anywhere in ``node`` (``skip``: a top key)."""
    pending = [value for key, value in node.items() if key != skip]
    seen: set[int] = set()
    while pending:
        item = pending.pop()
        if item is target:
            return True
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _keep_anchor(node: Any) -> None:
    # Once bundles has its own list the anchored node may be referenced only once: ruamel
    # would then drop `&name`, changing the user's anchor. Keep it written.
    anchor = getattr(node, "anchor", None)
    name = getattr(anchor, "value", None)
    if name is not None:
        node.yaml_set_anchor(name, always_dump=True)


def _append(bundles: Any, bundle: str) -> None:
    """Append to a round-trip list so that comment lines below its last entry stay below it."""
    last = len(bundles) - 1
    bundles.append(bundle)
    if last < 0:
        return
    own, below = _split_comment(bundles, last)
    if below is None:
        return
    _set_comment(bundles, last, own)
    _set_comment(bundles, last + 1, "\n" + below)


def _delete(bundles: Any, index: int) -> None:
    """Delete an entry; comment lines below it move to the entry above (they follow the list)."""
    _, below = _split_comment(bundles, index)
    del bundles[index]
    if below is None or index == 0:
        return
    own, further = _split_comment(bundles, index - 1)
    _set_comment(bundles, index - 1, (own or "\n") + below + (further or ""))


def _split_comment(bundles: Any, index: int) -> tuple[str | None, str | None]:
    """The comment after entry ``index``: its own end-of-line part, and the lines below it."""
    entry = bundles.ca.items.get(index)
    token = entry[0] if entry else None
    if token is None:
        return None, None
    own, newline, below = str(token.value).partition("\n")
    return own + newline, (below or None)


def _set_comment(bundles: Any, index: int, value: str | None) -> None:
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    if value is None or value == "\n":
        bundles.ca.items.pop(index, None)
        return
    entry = bundles.ca.items.get(index)
    if entry and entry[0] is not None:
        entry[0].value = value
        return
    token = CommentToken(value, CommentMark(0), None)
    bundles.ca.items[index] = [token, None, None, None]
