"""The reference Cordis-style harness: fibers, tools, pluggy hooks, patch layers, profiles."""

from dsh_loop_brake.harness.boot import Harness
from dsh_loop_brake.harness.context import Context
from dsh_loop_brake.harness.errors import BootError, HarnessError, ManifestError, PatchError
from dsh_loop_brake.harness.fibers import Disposer, Fiber, current_fiber
from dsh_loop_brake.harness.hookspecs import hookimpl, hookspec
from dsh_loop_brake.harness.layers import compose, profile_layers
from dsh_loop_brake.harness.manifest import Manifest, find_manifest, read_manifest
from dsh_loop_brake.harness.patches import Composition, compose_layers
from dsh_loop_brake.harness.profiles import (
    ProfileChange,
    add_bundle,
    atomic_write,
    default_home,
    install,
    profile_dir,
    read_bundles,
    remove_bundle,
    resolve_home,
    uninstall,
)
from dsh_loop_brake.harness.safe_yaml import load_path
from dsh_loop_brake.harness.tools import Guard, ToolRegistry
from dsh_loop_brake.harness.types import (
    Agent,
    Layer,
    Origin,
    Row,
    SkippedPatch,
    ToolDefinition,
    ToolExecution,
    ToolResult,
)

__all__ = [
    "Agent",
    "BootError",
    "Composition",
    "Context",
    "Disposer",
    "Fiber",
    "Guard",
    "Harness",
    "HarnessError",
    "Layer",
    "Manifest",
    "ManifestError",
    "Origin",
    "PatchError",
    "ProfileChange",
    "Row",
    "SkippedPatch",
    "ToolDefinition",
    "ToolExecution",
    "ToolRegistry",
    "ToolResult",
    "add_bundle",
    "atomic_write",
    "compose",
    "compose_layers",
    "current_fiber",
    "default_home",
    "find_manifest",
    "hookimpl",
    "hookspec",
    "install",
    "load_path",
    "profile_dir",
    "profile_layers",
    "read_bundles",
    "read_manifest",
    "remove_bundle",
    "resolve_home",
    "uninstall",
]
