"""Bundle manifests: from a ``dsh`` entry point to its ``plugin.toml`` and its bundle patch.

The wheel carries ``plugin.toml`` and ``cordis.patch.yml`` inside the package directory. In an
editable install (or a source checkout) they are not there but at the repository root, which
is the package directory's parent; the manifest is looked for in both places, nearest first,
and only a manifest whose ``[dsh] name`` is the bundle's name is taken.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_loop_brake.harness.errors import ManifestError, PatchError
from dsh_loop_brake.harness.plugins import ENTRY_POINT_GROUP, plugin_module_name
from dsh_loop_brake.harness.types import Layer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["MANIFEST_NAME", "Manifest", "bundle_layer", "find_manifest", "read_manifest"]

MANIFEST_NAME = "plugin.toml"


@dataclass(frozen=True)
class Manifest:
    """A parsed ``plugin.toml``: the bundle's name and row id, its patch and host tools version."""

    path: Path
    name: str
    id: str | None
    patch: Path | None
    host_tools: str | None


def read_manifest(path: Path) -> Manifest:
    """Parse and check one ``plugin.toml``; the bundle patch path is made absolute."""
    try:
        with open(path, "rb") as stream:
            data = tomllib.load(stream)
    except OSError as exc:
        raise PatchError(f"cannot read the manifest ({exc.strerror or exc})", path) from None
    except tomllib.TOMLDecodeError as exc:
        raise PatchError(f"malformed TOML: {exc}", path) from None
    dsh = _table(data, "dsh", path)
    name = dsh.get("name")
    if not isinstance(name, str) or not name:
        raise PatchError("[dsh] name must be a non-empty string", path)
    row_id = dsh.get("id")
    if row_id is not None and not isinstance(row_id, str):
        raise PatchError("[dsh] id must be a string", path)
    patch: Path | None = None
    raw_patch = _table(dsh, "bundle", path).get("patch")
    if raw_patch is not None:
        if not isinstance(raw_patch, str) or not raw_patch or Path(raw_patch).is_absolute():
            raise PatchError(
                "[dsh.bundle] patch must be a file name relative to the manifest", path
            )
        patch = path.parent / raw_patch
    tools = _table(dsh, "host", path).get("tools")
    if tools is not None and not isinstance(tools, str):
        raise PatchError("[dsh.host] tools must be a version string", path)
    return Manifest(path=path, name=name, id=row_id, patch=patch, host_tools=tools)


def find_manifest(bundle: str) -> Manifest:
    """The manifest of the installed bundle ``bundle``, found through its ``dsh`` entry point."""
    module = plugin_module_name(bundle)
    if module is None:
        raise ManifestError(
            f"the bundle {bundle!r} is not installed (no entry point {bundle!r} in the "
            f"{ENTRY_POINT_GROUP!r} group); install its package, or remove it from the profile"
        )
    candidates = _candidate_paths(module)
    for candidate in candidates:
        if candidate.is_file():
            manifest = read_manifest(candidate)
            if manifest.name == bundle:
                return manifest
    looked = ", ".join(str(path) for path in candidates) or "nowhere (the module has no files)"
    raise ManifestError(
        f"the bundle {bundle!r} is installed (module {module}) but no {MANIFEST_NAME} naming it "
        f"was found (looked at {looked}); reinstall its package"
    )


def bundle_layer(bundle: str) -> Layer | None:
    """The layer the installed bundle ``bundle`` adds to a profile: its manifest's patch, or
    ``None`` when it has none. Raises ``ManifestError`` as :func:`find_manifest` does."""
    manifest = find_manifest(bundle)
    if manifest.patch is None:
        return None
    return Layer("bundle", manifest.patch, f"bundle {bundle}")


def _candidate_paths(module: str) -> list[Path]:
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return []
    if spec.submodule_search_locations:
        roots = [Path(location) for location in spec.submodule_search_locations]
    elif spec.origin:
        roots = [Path(spec.origin).parent]  # a single-module bundle: look beside it
    else:
        return []
    candidates = [root / MANIFEST_NAME for root in roots]
    # Editable install or source checkout: the force-included files are at the project root.
    candidates += [root.parent / MANIFEST_NAME for root in roots]
    return list(dict.fromkeys(candidates))


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise PatchError(f"[{key}] must be a table", path)
    return value
