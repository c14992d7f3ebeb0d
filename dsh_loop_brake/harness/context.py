"""The context a plugin is applied with: the shared tool registry and the row's own fiber."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import final

from dsh_loop_brake.harness.fibers import Disposer, Fiber
from dsh_loop_brake.harness.tools import ToolRegistry

__all__ = ["Context"]


@final
class Context:
    """What ``dsh_apply(ctx, row)`` receives: ``.tools``, ``.effect(fn)``, ``.fiber`` and
    ``.home`` (the harness's ``DSH_HOME``, under which a plugin resolves relative paths such as
    a ``sqlite:`` store's; ``None`` when the harness was given none)."""

    __slots__ = ("fiber", "home", "tools")

    def __init__(self, tools: ToolRegistry, fiber: Fiber, home: Path | None = None) -> None:
        self.tools = tools
        self.fiber = fiber
        self.home = home

    def __repr__(self) -> str:
        return f"<Context fiber={self.fiber.name!r}>"

    def effect(self, fn: Callable[[], Disposer | None]) -> Callable[[], None]:
        """Run ``fn`` now on this context's fiber; its returned disposer runs on dispose."""
        with self.fiber.activate():
            return self.fiber.effect(fn)
