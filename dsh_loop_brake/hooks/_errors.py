"""The hook's own failures: each is one line on standard error and exit code 1 (fail open)."""

from __future__ import annotations

__all__ = ["HookError", "HookUsageError"]


class HookError(Exception):
    """The hook cannot judge this call; the message is one sentence saying what and where.

    The host treats exit code 1 as a non-blocking error: it shows the line and runs the call.
    """


class HookUsageError(HookError):
    """``dsh-loop-brake hook`` was given an unknown host or option (still exit 1, never 2)."""
