"""Exceptions of the reference harness.

Every problem a user can cause and fix is a :class:`HarnessError` whose message is one
sentence that names the file, line, key or row involved::

    HarnessError            a user-facing harness problem (one sentence, no traceback needed)
     ├── PatchError         a patch, profile or manifest file is unreadable, unsafe or malformed
     ├── ManifestError      a bundle is not installed or its manifest cannot be used
     └── BootError          a row cannot be applied (no plugin claims it, or it is invalid)

Exceptions raised by a plugin's own ``apply`` (for example the core's
``LoopBrakeConfigError``) are not wrapped: the boot rolls back and re-raises them unchanged.
"""

from __future__ import annotations

import os

__all__ = ["BootError", "HarnessError", "ManifestError", "PatchError"]


class HarnessError(Exception):
    """A problem with the harness's input that the user can fix; the message says how."""


class PatchError(HarnessError):
    """A patch, profile or manifest file is unreadable, unsafe or malformed (file and line)."""

    def __init__(self, message: str, file: str | os.PathLike[str], line: int | None = None) -> None:
        self.message = message
        self.file = os.fspath(file)
        self.line = line
        where = self.file if line is None else f"{self.file}:{line}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.file, self.line))


class ManifestError(HarnessError):
    """A bundle named by a profile is not installed, or its ``plugin.toml`` cannot be used."""


class BootError(HarnessError):
    """A row cannot be applied: no installed plugin claims it, or the rows are inconsistent."""
