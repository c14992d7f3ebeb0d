"""The profile's ``loop-brake`` and ``circuit-breaker`` rows for the hook, composed once and cached.

Composing a profile takes the harness (ruamel.yaml, the ``dsh`` entry points): far more time
than the hook may spend on a call. So the composed rows are kept in
``$DSH_HOME/state/hook-profile-<profile>.json`` together with the identity (path, size,
``mtime_ns``, inode, ``ctime_ns``: a user can put an edited file's mtime back, never its
ctime) of every file the composition depended on: the profile's ``profile.yml``
and ``cordis.patch.yml``, ``$DSH_HOME/cordis.patch.yml`` (an absent file is recorded as absent,
so creating it counts as a change), each bundle's patch file and each bundle's manifest. A call
whose files all still match reads the cache; any difference, or a cache that cannot be read,
composes the profile again (:mod:`dsh_loop_brake.hooks._compose`) and rewrites the cache.
A cache that is not a plain regular file (a symlink, a FIFO, a device), larger than
:data:`CACHE_MAX_BYTES`, or nested too deep to parse is such a cache: it is composed again and
replaced, never followed, waited on or read without bound.

The rows are cached as composed, not resolved: what depends on the environment
(``DSH_LOOP_BRAKE_MAX_REPEATS``, ``DSH_LOOP_BRAKE_STORE``) is resolved on every call by the
plugins' own resolvers (:mod:`dsh_loop_brake.hooks._apply`), as the harness resolves it at apply.
"""

from __future__ import annotations

import json
import os

from dsh_loop_brake.hooks._paths import cache_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = [
    "CACHE_FORMAT",
    "CACHE_MAX_BYTES",
    "ProfileRows",
    "RowSettings",
    "file_identity",
    "load_profile",
    "write_cache",
]

#: Bumped whenever the cache's layout changes, so an old cache is composed again, not misread.
CACHE_FORMAT = 3

#: A cache is a few KiB; one larger than this is not ours and is composed again, unread.
CACHE_MAX_BYTES = 1 << 20

_CACHE_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)


class RowSettings:
    """One composed row as the profile gives it: its ``config`` (as composed, not yet resolved:
    each call resolves it with the plugin's own resolvers and the environment) and ``disabled``.
    """

    __slots__ = ("config", "disabled")

    def __init__(self, config: dict[str, Any] | None, disabled: bool = False) -> None:
        self.config = config
        self.disabled = disabled

    def as_json(self) -> dict[str, object]:
        """The row as the cache file keeps it."""
        return {"config": self.config, "disabled": self.disabled}


class ProfileRows:
    """The profile's ``loop-brake`` and ``circuit-breaker`` rows (``None``: it has no such row)."""

    __slots__ = ("circuit_breaker", "loop_brake")

    def __init__(self, loop_brake: RowSettings | None, circuit_breaker: RowSettings | None) -> None:
        self.loop_brake = loop_brake
        self.circuit_breaker = circuit_breaker


def load_profile(profile: str, home: str) -> ProfileRows:
    """The composed rows of ``profile`` under ``home``: from the cache when it is current.

    Raises :class:`~dsh_loop_brake.hooks._errors.HookError` when the profile cannot be composed.
    """
    path = cache_file(home, profile)
    cached = _read_cache(path)
    if cached is not None:
        return cached
    from dsh_loop_brake.hooks._compose import compose_for_hook

    files, rows = compose_for_hook(profile, home)
    write_cache(path, files, rows)
    return rows


def file_identity(path: str) -> list[object]:
    """``[path, size, mtime_ns, inode, ctime_ns]``, or ``[path, None]`` when there is no file
    there."""
    try:
        status = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return [path, None]
    return [path, status.st_size, status.st_mtime_ns, status.st_ino, status.st_ctime_ns]


def _read_bytes(path: str) -> bytes | None:
    """The cache file's bytes; ``None`` when it is not a regular file of at most
    :data:`CACHE_MAX_BYTES` (a symlink is not followed, a FIFO not waited on)."""
    import stat

    fd = os.open(path, _CACHE_OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = CACHE_MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            return None
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_cache(path: str) -> ProfileRows | None:
    try:
        data = _read_bytes(path)
        if data is None:
            return None
        payload = json.loads(data)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None  # absent, not a regular file, unreadable, too large or damaged: compose again
    if not isinstance(payload, dict) or payload.get("format") != CACHE_FORMAT:
        return None
    files = payload.get("files")
    if not isinstance(files, list) or not _all_current(files):
        return None
    try:
        return ProfileRows(_row(payload.get("loopBrake")), _row(payload.get("circuitBreaker")))
    except ValueError:  # not the shape this version writes: compose again
        return None


def _row(value: object) -> RowSettings | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("a row is an object")
    config = value.get("config")
    disabled = value.get("disabled")
    if not (config is None or isinstance(config, dict)) or not isinstance(disabled, bool):
        raise ValueError("a row's fields")
    return RowSettings(config, disabled)


def _all_current(files: Iterable[object]) -> bool:
    for entry in files:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            return False
        try:
            if file_identity(entry[0]) != entry:
                return False
        except OSError:  # e.g. a directory we may not read: let the composition say so
            return False
    return True


def write_cache(path: str, files: list[list[object]], rows: ProfileRows) -> None:
    """Replace the cache file atomically (owner-only); a cache that cannot be written is skipped.

    The hook then composes on every call: slower, never wrong.
    """
    import contextlib
    import tempfile

    payload = {
        "format": CACHE_FORMAT,
        "files": files,
        "loopBrake": None if rows.loop_brake is None else rows.loop_brake.as_json(),
        "circuitBreaker": None if rows.circuit_breaker is None else rows.circuit_breaker.as_json(),
    }
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".hook-profile-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            json.dump(payload, stream, ensure_ascii=False)
        os.replace(temp, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(temp)
