"""Replacing a user's file all at once, with its permission bits, without touching the umask.

Used for ``profile.yml`` (and any settings file a command edits): a crash or a full disk
mid-write leaves the previous file intact, never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ["NEW_FILE_MODE", "atomic_write"]

NEW_FILE_MODE = 0o644
"""A new file's mode before the umask (which the kernel applies when the file is created)."""

_TRIES = 100


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: temp file in the same directory, fsync, rename.

    An existing file keeps its permission bits; a new one gets ``0644`` less the umask. The
    umask is never read by changing it (``os.umask`` sets it for every thread of the process,
    so a thread creating a file meanwhile could get a wider mode): the temporary file is
    created with mode ``0644`` and the kernel applies the umask. If anything fails the previous
    file is untouched and the temp file is removed. A symlink is written through.
    """
    target = Path(os.path.realpath(path))
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    fd, temp = _create_temp(directory, target.name)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            if mode is not None:
                os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """A new, exclusively created file beside the target (mode 0644 less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_TRIES):
        temp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(temp, flags, NEW_FILE_MODE), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {directory}")


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not possible everywhere (e.g. Windows), so best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
