"""The SHA-256 a call's identity is computed with: OpenSSL's, or CPython's own in a hook process.

Both compute SHA-256 (FIPS 180-4): the choice changes how long a hash takes, never a hash.

* OpenSSL's (``hashlib.sha256``) is the fastest per byte, but importing hashlib loads OpenSSL:
  10 M instructions, about 4 ms of a hook process of 40 to 45 (``benchmarks/hook.py``), a new
  process per tool call that hashes that one call and exits.
* CPython's own (``_sha256``; ``_sha2`` from Python 3.12: the one hashlib itself falls back to on
  a build without OpenSSL) loads in 0.1 M instructions and hashes 50 bytes as fast, 200 bytes at
  half the speed, large input five to eight times slower (1 MiB: about 4 ms against 0.7).

So every process gets OpenSSL's, unless it says, before the core is imported, that it is a hook
process with a small call to hash (:func:`hash_with_cpython_sha256`): for an event below 1 MiB,
hashing with CPython's own costs less than the 4 ms loading OpenSSL would.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from hashlib import _Hash

__all__ = ["CPYTHON_SHA256_BELOW", "hash_with_cpython_sha256", "sha256_constructor"]

#: The size of a hook's event (bytes) below which its call is hashed with CPython's own SHA-256.
#: The canonical text hashed is about the event's size: a few times more only for an event built
#: to be (numbers such as 1e20 are written out in digits), whose encoding then costs far more
#: than its hash.
CPYTHON_SHA256_BELOW = 1024 * 1024

_cpython_asked_for = False


def hash_with_cpython_sha256() -> None:
    """Have this process hash with CPython's own SHA-256; it takes effect only if called before
    the core (``dsh_loop_brake._canonical``) is imported, and only where CPython has one."""
    global _cpython_asked_for
    _cpython_asked_for = True


def sha256_constructor() -> Callable[[bytes], _Hash]:
    """``sha256``: CPython's own if this process asked for it and it exists, else OpenSSL's."""
    if _cpython_asked_for:
        # The module's name since Python 3.12; looking for the other one first would cost a
        # failed import, a search of every directory on sys.path.
        module = "_sha2" if sys.version_info >= (3, 12) else "_sha256"
        try:
            constructor: Callable[[bytes], _Hash] = __import__(module).sha256
            constructor(b"")  # a build in FIPS mode may have it and refuse to use it
        except (ImportError, ValueError):  # a build without it, or refusing it: OpenSSL's then
            pass
        else:
            return constructor
    from hashlib import sha256

    return sha256
