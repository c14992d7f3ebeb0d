"""The layer stack of a profile, and composing it: bundles → profile → $DSH_HOME → --patch files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from dsh_loop_brake.harness.errors import ManifestError
from dsh_loop_brake.harness.manifest import bundle_layer
from dsh_loop_brake.harness.patches import Composition, compose_layers
from dsh_loop_brake.harness.profiles import (
    PATCH_FILE,
    PROFILE_FILE,
    profile_dir,
    read_bundle_entries,
    resolve_home,
)
from dsh_loop_brake.harness.types import Layer

__all__ = ["compose", "profile_layers"]


def profile_layers(
    profile: str = "default",
    home: str | os.PathLike[str] | None = None,
    patches: Iterable[str | os.PathLike[str]] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> list[Layer]:
    """The patch files composed for ``profile``, in order (absent optional files left out).

    Each bundle of the profile's ``bundles:`` list (its manifest's patch), then
    ``profiles/<profile>/cordis.patch.yml``, then ``$DSH_HOME/cordis.patch.yml``, then each
    ``patches`` file (these must exist).
    """
    base = resolve_home(home, environ)
    directory = profile_dir(base, profile)
    layers: list[Layer] = []
    profile_file = directory / PROFILE_FILE
    for bundle, line in read_bundle_entries(profile_file):
        try:
            layer = bundle_layer(bundle)
        except ManifestError as exc:
            # The fix is in the profile (or an install), so point at the entry that names it.
            raise ManifestError(exc.message, profile_file, line) from None
        if layer is not None:
            layers.append(layer)
    for kind, path, label in (
        ("profile", directory / PATCH_FILE, f"profile {profile}"),
        ("home", base / PATCH_FILE, "$DSH_HOME"),
    ):
        if path.exists() or path.is_symlink():  # a link to nothing is an error, not no file
            layers.append(Layer(kind, path, label))  # type: ignore[arg-type]
    layers.extend(Layer("patch", Path(path), "--patch") for path in patches)
    return layers


def compose(
    profile: str = "default",
    home: str | os.PathLike[str] | None = None,
    patches: Iterable[str | os.PathLike[str]] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> Composition:
    """Compose the profile's layers into rows; skipped patches are returned and logged."""
    return compose_layers(profile_layers(profile, home, patches, environ=environ))
