"""The value types the harness and its plugins exchange: tools, executions, results, rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Agent",
    "Layer",
    "LayerKind",
    "Origin",
    "Row",
    "SkippedPatch",
    "ToolDefinition",
    "ToolExecution",
    "ToolResult",
]


@dataclass(eq=False)
class Agent:
    """The agent making calls; compared by identity, because state is kept per agent object."""

    id: str


@dataclass
class ToolDefinition:
    """A tool: its name and the body the registry calls as ``execute(arguments, execution)``."""

    name: str
    execute: Callable[..., Any]
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolExecution:
    """One call of a tool by an agent, as the model asked for it."""

    call_id: str
    name: str
    arguments: Any
    agent: Agent | None = None


@dataclass
class ToolResult:
    """What the model reads back: the body's result, or an error it can act on."""

    content: Any
    is_error: bool = False
    error: dict[str, str] | None = None


LayerKind = Literal["bundle", "profile", "home", "patch", "api"]


@dataclass(frozen=True)
class Layer:
    """One patch file in the composition stack, and why it is there."""

    kind: LayerKind
    path: Path
    label: str

    def __str__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class Origin:
    """Where a row's key was set: the layer and the 1-based line in its file."""

    layer: Layer
    line: int | None = None

    @property
    def path(self) -> str:
        """The patch file's path, as shown by ``config``."""
        return str(self.layer.path)

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Row:
    """One composed row: a plugin instance (``name``) under a unique ``id`` with its config.

    ``sources`` maps each key (``id``, ``name``, ``config``, ``disabled`` and, for the keys
    inside the config, ``config.<key>``) to the :class:`Origin` of the layer that set it last.
    ``history`` maps the same keys to every layer that set them, oldest first — also a
    ``config.<key>`` that a later layer's ``config:`` replaced away.
    """

    id: str
    name: str
    config: dict[str, Any] | None = None
    disabled: bool = False
    sources: Mapping[str, Origin] = field(default_factory=dict, compare=False, repr=False)
    history: Mapping[str, tuple[Origin, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def overridden(self, key: str) -> tuple[Origin, ...]:
        """The layers that set ``key`` before the one whose value stands (oldest first).

        For a key that no longer stands (a later ``config:`` left it out): every layer that
        set it.
        """
        found = self.history.get(key, ())
        current = self.sources.get(key)
        if current is not None and found and found[-1] == current:
            return found[:-1]
        return found

    def config_origin(self, key: str | None) -> Origin | None:
        """Where the config key ``key`` was set (else where the whole config was set), or None."""
        if key is not None and f"config.{key}" in self.sources:
            return self.sources[f"config.{key}"]
        return self.sources.get("config")

    def as_dict(self) -> dict[str, Any]:
        """The row as ``config --json`` prints it."""
        return {"id": self.id, "name": self.name, "config": self.config, "disabled": self.disabled}


@dataclass(frozen=True)
class SkippedPatch:
    """A patch that composition skipped with a warning (unknown id, or a name mismatch)."""

    layer: Layer
    id: str
    reason: str
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The entry as ``config --json`` prints it under ``skipped``."""
        return {
            "layer": str(self.layer.path),
            "line": self.line,
            "id": self.id,
            "reason": self.reason,
        }

    def __str__(self) -> str:
        where = str(self.layer.path) if self.line is None else f"{self.layer.path}:{self.line}"
        return f"{where}: patch for row {self.id!r} skipped: {self.reason}"
