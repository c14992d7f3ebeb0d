"""The stores against hosts and surroundings that do not behave politely: threads that come and
go, links planted at the store's path, clients that retry, answers lost on the way back, URLs
typed wrong with a password in them."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _redis_server import MakeRedisServer, RedisServer

from dsh_loop_brake.stores import (
    RedisStore,
    SQLiteStore,
    StoreConfigError,
    StoreError,
    open_store,
)

A = hashlib.sha256(b"a").digest()
B = hashlib.sha256(b"b").digest()
SECRET = "s3cret-Pa55"

unix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")


# --- SQLite: threads that come and go ---------------------------------------------------------

THREAD_CHURN = """
import hashlib, os, resource, sys, threading
from dsh_loop_brake.stores import SQLiteStore

# A host that runs each request in a thread of its own (ThreadingHTTPServer, a thread per tool
# call), with a modest limit on open files, as many services run with.
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
store = SQLiteStore(sys.argv[1])
digest = hashlib.sha256(b"search").digest()
counts = []
for _ in range(400):
    thread = threading.Thread(target=lambda: counts.append(store.advance_streak("s", digest)))
    thread.start()
    thread.join()
with open(os.devnull) as still_possible:  # the host itself can still open a file
    pass
print(counts == list(range(1, 401)))
"""


def run_on_a_store_file(script: str, path: Path) -> str:
    """Run ``script`` in a new Python process with the store file's path; what it printed."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@unix_only
def test_threads_that_come_and_go_do_not_use_up_the_hosts_open_files(tmp_path: Path) -> None:
    assert run_on_a_store_file(THREAD_CHURN, tmp_path / "s.sqlite3") == "True"


def test_a_store_used_by_a_thread_that_ended_still_counts_and_closes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    for _ in range(3):
        thread = threading.Thread(target=store.advance_streak, args=("s", A))
        thread.start()
        thread.join()
    assert store.advance_streak("s", A) == 4
    store.close()
    assert store.read_streak("s") == (A, 4)
    store.close()


DROPPED_STORES = """
import gc, hashlib, os, resource, sys
from dsh_loop_brake.stores import SQLiteStore

# A host that opens a store per request and forgets to close it, under a modest file limit.
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
digest = hashlib.sha256(b"search").digest()
for number in range(200):
    store = SQLiteStore(sys.argv[1])
    store.advance_streak(f"request-{number}", digest)
    del store
    gc.collect()
with open(os.devnull) as still_possible:  # the host itself can still open a file
    pass
print("ok")
"""


@unix_only
def test_a_store_dropped_without_close_gives_its_files_back(tmp_path: Path) -> None:
    # Like a file object, a store that is garbage does not keep its file open for good.
    assert run_on_a_store_file(DROPPED_STORES, tmp_path / "s.sqlite3") == "ok"


# --- SQLite: fork ------------------------------------------------------------------------------

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def in_child(work: Any) -> str:
    """Run ``work()`` in a child made by ``os.fork`` and return what it printed (its result)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running the parent's clean-up
        os.close(read)
        try:
            outcome = repr(work())
        except BaseException as error:
            outcome = f"{type(error).__name__}: {error}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        result = answer.read().decode()
    os.waitpid(pid, 0)
    return result


def fresh_process_count(path: Path) -> str:
    """The session's count as a new process, that never shared anything with this one, reads it."""
    probe = (
        "import sys; from dsh_loop_brake.stores import SQLiteStore;"
        " print(SQLiteStore(sys.argv[1]).read_streak('s'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60
    )
    return result.stdout.strip() or result.stderr


@fork_only
def test_a_child_forked_while_the_parent_holds_the_store_open_shares_its_counts(
    tmp_path: Path,
) -> None:
    # A parent that keeps its store open and forks workers (a preloaded server, a pool on
    # Linux): the child's counts must land in the one file everyone reads, also once the parent
    # has closed its own connections (closing the last one checkpoints and removes the WAL).
    path = tmp_path / "s.sqlite3"
    store = SQLiteStore(path)
    assert store.advance_streak("s", A) == 1
    to_parent, to_child = os.pipe(), os.pipe()

    def child() -> list[int]:
        counts = [store.advance_streak("s", A) for _ in range(2)]
        os.write(to_parent[1], b"1")  # the parent closes its store now
        os.read(to_child[0], 1)
        return counts + [store.advance_streak("s", A) for _ in range(2)]

    results: list[str] = []
    waiter = threading.Thread(target=lambda: results.append(in_child(child)))
    waiter.start()
    assert os.read(to_parent[0], 1) == b"1"
    store.close()
    os.write(to_child[1], b"1")
    waiter.join(timeout=60)
    for fd in (*to_parent, *to_child):
        os.close(fd)
    assert results == ["[2, 3, 4, 5]"]
    assert fresh_process_count(path) == repr((A, 5))


@fork_only
def test_a_child_forked_while_another_thread_is_mid_check_can_still_write(
    tmp_path: Path,
) -> None:
    # The fork copies the process as it is: a thread inside a check holds the file's write lock,
    # and the child's copy of SQLite's books says this process holds it -- for good, in the child.
    inside, release = threading.Event(), threading.Event()

    def clock() -> float:
        if threading.current_thread().name == "mid-check":
            inside.set()
            release.wait(30)
        return time.time()

    path = tmp_path / "s.sqlite3"
    store = SQLiteStore(path, clock=clock)
    checker = threading.Thread(
        target=store.judge_call,
        args=("agent", A),
        kwargs={"duplicate_limit": 5, "window": 5, "cap": 0},
        name="mid-check",
    )
    checker.start()
    assert inside.wait(30)  # the thread is inside its transaction now
    threading.Timer(0.3, release.set).start()  # it finishes a moment after the fork begins

    def child() -> tuple[int, int]:
        return store.advance_streak("s", A), SQLiteStore(path).advance_streak("s", A)

    started = time.monotonic()
    result = in_child(child)
    checker.join(timeout=60)
    assert result == "(1, 2)"
    assert time.monotonic() - started < 60  # bounded; the child did not give up on a lock
    assert store.breaker_calls("agent") == 1
    assert store.advance_streak("s", A) == 3


# --- SQLite: what is at the path --------------------------------------------------------------


@unix_only
def test_a_dangling_link_at_the_path_creates_no_file_where_it_points(tmp_path: Path) -> None:
    # Planted in a shared directory, a link would make the store create a file of the link's
    # choosing, with the user's rights.
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    path = tmp_path / "brakes.sqlite3"
    path.symlink_to(target)
    with pytest.raises(StoreConfigError, match="symbolic link"):
        SQLiteStore(path)
    assert not target.exists()
    with pytest.raises(StoreConfigError, match="symbolic link"):
        open_store(f"sqlite:{path}")
    assert not target.exists()


@unix_only
def test_a_link_to_another_file_leaves_that_file_alone(tmp_path: Path) -> None:
    other = tmp_path / "someone-elses-empty-file"
    other.write_bytes(b"")
    path = tmp_path / "brakes.sqlite3"
    path.symlink_to(other)
    with pytest.raises(StoreConfigError, match="symbolic link") as raised:
        SQLiteStore(path)
    assert other.read_bytes() == b""
    assert str(path) in str(raised.value)


@unix_only
def test_a_named_pipe_or_a_directory_at_the_path_is_refused_at_once(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.sqlite3"
    os.mkfifo(pipe)
    with pytest.raises(StoreConfigError, match="not a regular file"):
        SQLiteStore(pipe)
    directory = tmp_path / "dir.sqlite3"
    directory.mkdir()
    with pytest.raises(StoreConfigError, match="directory"):
        SQLiteStore(directory)


# --- Redis: a client that retries, an answer lost on the way back -----------------------------


class AnswerLosingProxy:
    """A TCP relay to a real redis-server that loses the server's answer to the first ``lose``
    EVALSHA commands: the script has run on the server, and the client sees the connection drop
    before the answer arrives (a network blip, a failover, a load balancer's idle cut)."""

    def __init__(self, port: int, *, lose: int) -> None:
        self.target = ("127.0.0.1", port)
        self.lose = lose
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        # redis-py sends one command and waits for its answer: one request, one reply.
        with client, server:
            try:
                while request := client.recv(65536):
                    server.sendall(request)
                    answer = server.recv(65536)
                    if b"EVALSHA" in request.upper() and self.lose > 0:
                        self.lose -= 1
                        return  # the answer never reaches the client
                    client.sendall(answer)
            except OSError:
                return

    def close(self) -> None:
        self.stopped = True
        self.listener.close()


@pytest.fixture
def lossy(redis_server: RedisServer) -> Iterator[AnswerLosingProxy]:
    proxy = AnswerLosingProxy(redis_server.port, lose=1)
    try:
        yield proxy
    finally:
        proxy.close()


def retrying_client(port: int) -> object:
    """A client that retries a command whose connection failed, as redis-py's default client
    does since redis-py 6 (three retries)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 3))


def test_a_retried_streak_check_whose_answer_was_lost_counts_once(
    lossy: AnswerLosingProxy,
) -> None:
    client = retrying_client(lossy.port)
    store = RedisStore(client, prefix="lost-streak:")  # type: ignore[arg-type]
    store.ping()  # the scripts are loaded: the next command is the check's EVALSHA
    assert store.advance_streak("s", A) == 1  # its first answer was lost, and it was retried
    assert lossy.lose == 0
    assert store.read_streak("s") == (A, 1)
    assert store.advance_streak("s", A) == 2
    assert store.advance_streak("s", B) == 1
    client.close()  # type: ignore[attr-defined]


def test_a_retried_breaker_check_whose_answer_was_lost_counts_once(
    lossy: AnswerLosingProxy,
) -> None:
    client = retrying_client(lossy.port)
    store = RedisStore(client, prefix="lost-judge:")  # type: ignore[arg-type]
    store.ping()
    assert store.judge_call("ag", A, duplicate_limit=2, window=5, cap=0) is None
    assert lossy.lose == 0
    assert store.breaker_calls("ag") == 1
    denial = store.judge_call("ag", A, duplicate_limit=2, window=5, cap=0)
    assert denial is not None and (denial.kind, denial.count, denial.first) == (
        "duplicate",
        2,
        True,
    )
    client.close()  # type: ignore[attr-defined]


def test_a_retried_denial_whose_answer_was_lost_is_still_the_first(
    lossy: AnswerLosingProxy,
) -> None:
    # The incident log is written for the denial marked first: a retry must not lose the mark.
    lossy.lose = 0  # the allowed call's answer arrives
    client = retrying_client(lossy.port)
    store = RedisStore(client, prefix="lost-first:")  # type: ignore[arg-type]
    store.ping()
    assert store.judge_call("ag", None, duplicate_limit=2, window=5, cap=1) is None
    lossy.lose = 1  # the denial's answer is lost, and the client retries
    denial = store.judge_call("ag", None, duplicate_limit=2, window=5, cap=1)
    assert lossy.lose == 0
    assert denial is not None and (denial.kind, denial.count, denial.first) == ("cap", 1, True)
    denial = store.judge_call("ag", None, duplicate_limit=2, window=5, cap=1)
    assert denial is not None and (denial.kind, denial.count, denial.first) == ("cap", 1, False)
    assert store.breaker_calls("ag") == 1
    client.close()  # type: ignore[attr-defined]


def test_a_url_store_whose_answer_was_lost_fails_once_and_counts_the_call_once(
    redis_server: RedisServer,
) -> None:
    proxy = AnswerLosingProxy(redis_server.port, lose=1)
    try:
        store = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", prefix="lost-url:")
        store.ping()
        with pytest.raises(StoreError, match="cannot be reached"):
            store.advance_streak("s", A)  # a URL's client never retries: the check fails open
        assert store.read_streak("s") == (A, 1)  # the server ran it once
        assert store.advance_streak("s", A) == 2
        store.close()
    finally:
        proxy.close()


# --- passwords in URLs typed wrong, or spelled with escapes -----------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"redis:/:{SECRET}@127.0.0.1:6379/0",  # one slash short
        f"redis::{SECRET}@127.0.0.1:6379/0",  # no slashes
        f"rediss:/user:{SECRET}@127.0.0.1:6379/0",
        f"unix:/:{SECRET}@/run/redis.sock",
        f"redsi:/:{SECRET}@127.0.0.1:6379/0",  # and the scheme mistyped too
        f"redis:{SECRET}@127.0.0.1",  # user info without a colon may be a password
    ],
)
def test_a_mistyped_url_with_a_password_never_shows_it(url: str) -> None:
    with pytest.raises(StoreConfigError) as raised:
        open_store(url)
    error = raised.value
    shown = "\n".join([str(error), repr(error), repr(error.args), str(error.url)])
    assert SECRET not in shown
    assert "***" in str(error)


@pytest.mark.parametrize("name", ["pa%73sword", "%70assword"])
def test_a_password_query_option_spelled_with_escapes_is_hidden(name: str) -> None:
    # redis-py reads the option's name unescaped: pa%73sword= is its password.
    store = RedisStore(f"redis://127.0.0.1:6379/0?{name}={SECRET}&db=0")
    assert SECRET not in repr(store) + str(store) + store.url
    assert store.url == f"redis://127.0.0.1:6379/0?{name}=***&db=0"


def test_an_escaped_password_option_is_the_password_redis_py_uses(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server("--requirepass", SECRET)
    store = open_store(f"redis://127.0.0.1:{server.port}/0?pa%73sword={SECRET}")
    assert store.advance_streak("s", A) == 1  # it authenticated with it
    assert SECRET not in repr(store) + store.url
    store.close()
    with pytest.raises(StoreError, match="refused the credentials") as raised:
        open_store(f"redis://127.0.0.1:{server.port}/0?pa%73sword=wrong-{SECRET}")
    assert SECRET not in str(raised.value) + repr(raised.value) + str(raised.value.url)
