"""The stores against the mistakes and attacks of the people around them: closed while threads
check, forked mid-check, URLs with options they do not know, state files someone else owns or
can write, keys of ours holding what we never wrote there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

unix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a new interpreter; a crash (a signal) or an exception fails the test."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-3000:]}"
    return result.stdout.strip()


# --- closed while threads are inside a check -------------------------------------------------

CLOSE_WHILE_CHECKING = """
import itertools, sys, threading
from dsh_loop_brake import LoopBrake
from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
from dsh_loop_brake.stores import StoreError, open_store

store = open_store(sys.argv[1])
brake = LoopBrake(10**9, store=store)
limits = resolve_config({"duplicateLimit": 2, "window": 100, "maxCallsPerAgent": 0})
breaker = CircuitBreaker(limits, store=store)
numbers = itertools.count()
escaped = []  # what came out of the brakes other than a StoreError
threading.excepthook = lambda hook: escaped.append(hook.exc_type.__name__)
for _ in range(20):  # rounds: each a new set of threads checking while close() runs
    stop = threading.Event()
    def check():
        while not stop.is_set():
            brake.check("t", {}, session_id="s")
            breaker.check_call("t", {"n": next(numbers)}, agent="a")  # never a duplicate
            try:  # the reads raise what the store raises: a StoreError, nothing else
                brake.streak("s"), len(brake), breaker.calls("a"), len(breaker)
            except StoreError:
                pass
    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(200):
        store.close()
    stop.set()
    for thread in threads:
        thread.join()
counted = store.read_streak("s")[1]
print(counted > 0, escaped, store.count_streaks())
store.close()
"""


def test_closing_a_sqlite_store_while_threads_check_never_crashes(tmp_path: Path) -> None:
    # close() used to close every thread's connection under the thread using it: a segfault.
    out = run_python(CLOSE_WHILE_CHECKING, f"sqlite:{tmp_path / 's.sqlite3'}")
    assert out == "True [] 1"


def test_closing_a_redis_store_while_threads_check_never_crashes(redis_url: str) -> None:
    assert run_python(CLOSE_WHILE_CHECKING, redis_url) == "True [] 1"


DISPOSE_WHILE_CHECKING = """
import threading
from dsh_loop_brake import Brakes

for round_ in range(10):
    brakes = Brakes.from_profile()
    stop = threading.Event()
    def check():
        while not stop.is_set():
            try:
                brakes.check("t", {"q": 1}, session_id=f"s{round_}")
            except Exception:  # a denial, or a brake already disposed
                pass
    threads = [threading.Thread(target=check) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(10):
        brakes.close()  # dispose while calls are in flight
        brakes = Brakes.from_profile()
    stop.set()
    for thread in threads:
        thread.join()
    brakes.close()
print("survived")
"""


def test_disposing_brakes_from_a_profile_while_threads_check_never_crashes(
    dsh_home: Path,
) -> None:
    patch = dsh_home / "profiles" / "default" / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    patch.write_text(
        "- insert:\n  - id: loop-brake\n    name: dsh-loop-brake\n    config:\n"
        "      maxRepeats: 1000000\n      store: sqlite:state/brakes.sqlite3\n",
        encoding="utf-8",
    )
    env = {**os.environ, "DSH_HOME": str(dsh_home)}
    assert run_python(DISPOSE_WHILE_CHECKING, env=env) == "survived"


# --- forked while other threads check ---------------------------------------------------------

FORK_WHILE_CHECKING = """
import faulthandler, os, sys, threading
from dsh_loop_brake import LoopBrake
from dsh_loop_brake.stores import open_store

store = open_store(sys.argv[1])
brake = LoopBrake(10**9, store=store)
stop = threading.Event()
def check():
    while not stop.is_set():
        brake.check("t", {}, session_id="parent")
threads = [threading.Thread(target=check) for _ in range(3)]
for thread in threads:
    thread.start()
children = []
for number in range(40):
    pid = os.fork()
    if pid == 0:  # a child that hangs is stopped by faulthandler (a bound, not a timing test)
        faulthandler.dump_traceback_later(60, exit=True)
        counts = [brake.check("t", {}, session_id=f"child-{number}") for _ in range(5)]
        os._exit(0 if counts == [1, 2, 3, 4, 5] else 3)
    children.append(pid)
statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
stop.set()
for thread in threads:
    thread.join()
print(statuses == [0] * 40, brake.store_errors)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_child_forked_while_threads_check_counts_and_never_hangs(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A lock redis-py's pool held in another thread at the fork stayed held in the child.
    url = request.getfixturevalue("redis_url") if kind == "redis" else f"sqlite:{tmp_path / 's'}"
    assert run_python(FORK_WHILE_CHECKING, url) == "True 0"
