"""The core's part of the stores (``_store.py``): no I/O, small state (its standard-library-only
imports are walked with the core's, in test_loop_brake_exports.py)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tracemalloc
import uuid

from dsh_loop_brake._store import DIGEST_SIZE, STREAK_DIGEST_BITS, MemoryStore
from dsh_loop_brake.stores import Store

AUDITED = """
import sys
events = []
def hook(event, args):
    path = str(args[0]) if event == "open" else ""
    if event == "open" and not path.endswith((".py", ".pyc")) and "__pycache__" not in path:
        events.append((event, path))
    elif event.startswith(("socket.", "subprocess.", "os.system", "os.exec", "os.fork")):
        events.append((event, ""))
sys.addaudithook(hook)
import dsh_loop_brake._store as core
import dsh_loop_brake.stores
store = core.MemoryStore()
digest = bytes(range(32))
for _ in range(3):
    store.advance_streak("s", digest)
store.read_streak("s")
store.judge_call("a", digest, duplicate_limit=2, window=3, cap=0)
store.forget_streaks()
store.forget_breaker()
assert "sqlite3" not in sys.modules and "redis" not in sys.modules
print(events)
"""


def test_importing_and_using_the_memory_store_does_no_io(cli_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AUDITED], capture_output=True, text=True, env=cli_env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_memory_store_keeps_a_session_within_256_bytes() -> None:
    store = MemoryStore()
    digests = [hashlib.sha256(str(n).encode()).digest() for n in range(1000)]
    sessions = [str(uuid.uuid4()) for _ in range(100_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number, session in enumerate(sessions):
            store.advance_streak(session, digests[number % 1000])
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The session-id strings were made before tracing; count them as a session's too.
    per_session = used / len(sessions) + sys.getsizeof(sessions[0])
    assert per_session <= 256, per_session


def test_the_memory_store_reads_a_streak_back_as_it_was_advanced() -> None:
    store = MemoryStore()
    digest = hashlib.sha256(b"x").digest()
    store.advance_streak("s", digest)
    assert store.advance_streak("s", digest) == 2
    assert store.read_streak("s") == (digest, 2)
    assert len(digest) == DIGEST_SIZE and STREAK_DIGEST_BITS == 8 * DIGEST_SIZE


def test_the_memory_store_bounds_the_agents_it_keys_by_id() -> None:
    store = MemoryStore(max_agents=3)
    digest = hashlib.sha256(b"x").digest()
    for agent in ("a", "b", "c"):
        store.judge_call(agent, digest, duplicate_limit=5, window=5, cap=0)
    store.judge_call("a", digest, duplicate_limit=5, window=5, cap=0)  # "a" is recent again
    store.judge_call("d", digest, duplicate_limit=5, window=5, cap=0)  # "b" is dropped
    assert [store.breaker_calls(a) for a in "abcd"] == [2, 0, 1, 1]
    assert store.count_agents() == 3


def test_every_store_is_a_store() -> None:
    # The protocol is structural; this is what mypy checks too, spelt out for readers.
    store: Store = MemoryStore()
    assert store.url == "memory:"
