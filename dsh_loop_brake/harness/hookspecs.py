"""The pluggy hook specifications of the ``dsh`` project (the hooks a plugin may implement)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from dsh_loop_brake.harness.context import Context
    from dsh_loop_brake.harness.types import Row

__all__ = ["PROJECT", "dsh_apply", "hookimpl", "hookspec"]

PROJECT = "dsh"
"""The pluggy project name, which is also the entry-point group plugins are found through."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def dsh_apply(ctx: Context, row: Row) -> object | None:
    """Apply ``row`` to ``ctx`` if this plugin owns it and return its handle; else return None."""
