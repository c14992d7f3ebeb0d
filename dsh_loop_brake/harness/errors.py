"""Exceptions of the reference harness.

Every problem a user can cause and fix is a :class:`HarnessError` whose message is one
sentence that names the file, line, key or row involved; ``path`` and ``line`` say where (when
a file is involved), and ``str(error)`` then starts with ``path:line: ``::

    HarnessError            a user-facing harness problem (one sentence, no traceback needed)
     ├── PatchError         a patch, profile or manifest file is unreadable, unsafe or malformed
     ├── ManifestError      a bundle is not installed or its manifest cannot be used
     └── BootError          a row cannot be applied (no plugin claims it, or it is invalid)

Exceptions raised by a plugin's own ``apply`` keep their type (for example the core's
``LoopBrakeConfigError``); a configuration error among them is :func:`located` at the patch file
and line that supplied the value, and the boot rolls back and re-raises it.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["BootError", "HarnessError", "ManifestError", "PatchError", "locate"]

_E = TypeVar("_E", bound=BaseException)


class HarnessError(Exception):
    """A problem with the harness's input that the user can fix; the message says how.

    ``path`` and ``line`` name the file and 1-based line involved, when there is one.
    """

    def __init__(
        self,
        message: str,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line if self.path is not None else None
        super().__init__(_where(self.path, self.line) + message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.path, self.line))


class PatchError(HarnessError):
    """A patch, profile or manifest file is unreadable, unsafe or malformed (file and line)."""

    def __init__(self, message: str, file: str | os.PathLike[str], line: int | None = None) -> None:
        super().__init__(message, file, line)

    @property
    def file(self) -> str:
        """The file's path (the same as ``path``)."""
        return self.path or ""


class ManifestError(HarnessError):
    """A bundle named by a profile is not installed, or its ``plugin.toml`` cannot be used."""


class BootError(HarnessError):
    """A row cannot be applied: no installed plugin claims it, or the rows are inconsistent."""


def locate(error: _E, path: str | os.PathLike[str] | None, line: int | None = None) -> _E:
    """Say where ``error`` comes from: ``path`` and ``line`` set on it, its message prefixed.

    For exceptions the harness does not own (a plugin's configuration error), which keep their
    type so that ``except LoopBrakeConfigError`` still catches them. An error that already
    says where it comes from is left as it is.
    """
    if path is None or getattr(error, "path", None) is not None:
        return error
    where = _where(os.fspath(path), line)
    error.path = os.fspath(path)  # type: ignore[attr-defined]
    error.line = line  # type: ignore[attr-defined]
    first = str(error.args[0]) if error.args else str(error)
    error.args = (where + first, *error.args[1:])
    return error


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return ""
    return f"{path}: " if line is None else f"{path}:{line}: "
