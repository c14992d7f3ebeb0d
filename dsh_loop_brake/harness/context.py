"""The context a plugin is applied with: the shared tool registry and the row's own fiber."""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from dsh_loop_brake.harness.fibers import Disposer, Fiber
from dsh_loop_brake.harness.tools import ToolRegistry

__all__ = ["Context"]


@final
class Context:
    """What ``dsh_apply(ctx, row)`` receives: ``.tools``, ``.effect(fn)`` and ``.fiber``."""

    __slots__ = ("fiber", "tools")

    def __init__(self, tools: ToolRegistry, fiber: Fiber) -> None:
        self.tools = tools
        self.fiber = fiber

    def __repr__(self) -> str:
        return f"<Context fiber={self.fiber.name!r}>"

    def effect(self, fn: Callable[[], Disposer | None]) -> Callable[[], None]:
        """Run ``fn`` now on this context's fiber; its returned disposer runs on dispose."""
        with self.fiber.activate():
            return self.fiber.effect(fn)
