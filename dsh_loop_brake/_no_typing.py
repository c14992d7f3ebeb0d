"""What the modules on a coding-agent hook's path take from ``typing`` at run time, without it.

Importing ``typing`` costs a hook process (a new one per tool call) 16M instructions, 0.4x a bare
interpreter start (``benchmarks/hook.py``). Those modules import it for type checkers only::

    TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
    if TYPE_CHECKING:
        from typing import final
    else:
        from dsh_loop_brake._no_typing import final
"""

from __future__ import annotations

__all__ = ["final"]


def final(cls: type) -> type:
    """``typing.final`` at run time: it only marks the class for type checkers."""
    return cls
