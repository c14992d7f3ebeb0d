"""The SHA-256 a call's identity is computed with: OpenSSL's, or CPython's own in a hook process.

Both compute SHA-256 (FIPS 180-4): the choice changes how long a hash takes, never a hash.

* OpenSSL's (``hashlib.sha256``) is the fastest per byte, but importing hashlib loads OpenSSL:
  10 M instructions, about 4 ms of a hook process's 40 (``benchmarks/hook.py``), which is a new
  process per tool call that hashes that one call and exits.
* CPython's own (``_sha256``; ``_sha2`` from Python 3.12: the one hashlib itself falls back to on
  a build without OpenSSL) loads in 0.1 M instructions and hashes 50 bytes as fast, but 200
  bytes at half the speed and large input at a fifth.

So every process gets OpenSSL's, unless it says, before the core is imported, that it is a hook
process with a small call to hash (:func:`hash_with_cpython_sha256`): below 1 MiB CPython's own
costs less than loading OpenSSL (4 ms) would save.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from hashlib import _Hash

__all__ = ["CPYTHON_SHA256_BELOW", "hash_with_cpython_sha256", "sha256_constructor"]

#: The size of input (bytes) below which a hook process hashes with CPython's own SHA-256.
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
        except ImportError:  # a build without it (some distributions): OpenSSL's then
            pass
        else:
            return constructor
    from hashlib import sha256

    return sha256
