"""The stores against the mistakes and attacks of the people around them: closed while threads
check, forked mid-check, URLs with options they do not know, state files someone else owns or
can write, keys of ours holding what we never wrote there."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# --- URLs: options, and the password in a traceback rendered with its locals -------------------

CANARY = "Canary-Pw0rd-7731"


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?foo=1",
        f"redis://127.0.0.1:6379/0?pasword={CANARY}",
        f"redis://127.0.0.1:6379/0?PASSWORD={CANARY}",
        f"redis://127.0.0.1:6379/0?ssl_password={CANARY}",  # a TLS option, on a plain URL
        f"unix:///run/redis.sock?socket_keepalive=yes&password={CANARY}",
        f"redis://127.0.0.1:6379/0?foo=1;password={CANARY}",
    ],
)
def test_an_option_the_store_does_not_take_is_refused_when_the_store_is_made(url: str) -> None:
    # redis-py passes an unknown option on to the connection, which fails only when it first
    # connects: a store made without ping() would fail open on every check for good.
    from dsh_loop_brake.stores import RedisStore, StoreConfigError, open_store

    for make in (RedisStore, open_store):
        with pytest.raises(
            StoreConfigError, match=r"query option .* which the Redis store does not"
        ):
            make(url)
    with pytest.raises(StoreConfigError) as raised:
        RedisStore(url)
    assert CANARY not in str(raised.value) + repr(raised.value) + str(raised.value.url)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis://127.0.0.1:0/0", "port 0"),
        ("redis://127.0.0.1:6379/0#x", "fragment"),
        ("redis://127.0.0.1:6379/0?socket_timeout=abc", "Invalid value for 'socket_timeout'"),
        ("rediss://127.0.0.1:6379/0?ssl_cert_reqs=sometimes", "cannot be used"),
    ],
)
def test_a_url_redis_py_would_misread_or_fail_on_later_is_refused(url: str, match: str) -> None:
    from dsh_loop_brake.stores import RedisStore, StoreConfigError

    with pytest.raises(StoreConfigError, match=match):
        RedisStore(url)


def test_config_refuses_an_unknown_option_naming_it_and_its_source(
    run_cli: Any, dsh_home: Path
) -> None:
    patch = dsh_home / "profiles" / "default" / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    patch.write_text(
        "- insert:\n  - id: loop-brake\n    name: dsh-loop-brake\n    config:\n"
        f"      store: redis://127.0.0.1:6379/0?pasword={CANARY}\n",
        encoding="utf-8",
    )
    result = run_cli("config", "--home", str(dsh_home))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{patch}:5" in result.stderr
    assert 'query option "pasword"' in result.stderr
    assert CANARY not in result.stdout + result.stderr
    assert "pasword=***" in result.stderr


@pytest.mark.parametrize(
    ("option", "shown"),
    [
        (f"pasword={CANARY}", "pasword=***"),
        (f"PASSWORD={CANARY}", "PASSWORD=***"),
        (f"ssl_password={CANARY}", "ssl_password=***"),
        (f"password%00={CANARY}", "password%00=***"),
        ("db=3", "db=3"),
        ("socket_timeout=1.5", "socket_timeout=1.5"),
    ],
)
def test_only_option_values_known_to_hold_no_secret_are_shown(option: str, shown: str) -> None:
    from dsh_loop_brake.stores import redact_url

    assert redact_url(f"redis://h:6379/0?{option}") == f"redis://h:6379/0?{shown}"
    assert redact_url(f"redis://h:6379/0#{CANARY}") == "redis://h:6379/0#***"


WRONG_URLS = {
    "wrong password": "redis://:{pw}@127.0.0.1:{port}/0",
    "refused port": "redis://:{pw}@127.0.0.1:{closed}/0",
    "malformed": "redis://:{pw}@127.0.0.1:notaport/0",
    "unknown option": "redis://127.0.0.1:{port}/0?pasword={pw}",
    "bad value": "redis://:{pw}@127.0.0.1:{port}/0?socket_timeout=x",
}


def _raised(make: Any, kind: str, port: int, closed: int) -> BaseException:
    # The URL is built in the call, never held in a local of this frame (which is in the
    # traceback too).
    try:
        make(WRONG_URLS[kind].format(pw=CANARY, port=port, closed=closed))
    except Exception as error:
        return error
    raise AssertionError("no error")


@pytest.mark.parametrize("kind", sorted(WRONG_URLS))
def test_a_traceback_rendered_with_its_locals_never_shows_the_password(
    kind: str, make_redis_server: Any
) -> None:
    import socket
    import traceback

    from dsh_loop_brake.stores import RedisStore, StoreError, open_store

    server = make_redis_server("--requirepass", "the-right-one")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    makers = (
        [open_store] if kind in ("wrong password", "refused port") else [open_store, RedisStore]
    )
    for make in makers:
        error = _raised(make, kind, server.port, closed)
        assert isinstance(error, StoreError)
        rendered = "".join(
            traceback.TracebackException(
                type(error), error, error.__traceback__, capture_locals=True
            ).format()
        )
        assert CANARY not in rendered, rendered
        assert "***" in rendered


# --- Redis keys of ours holding what the store never wrote -------------------------------------

PLANTED_STREAKS = {
    "list": ("lpush", "x"),
    "hash": ("hset", "x", "y"),
    "short": ("set", "short"),
    "not a number": ("set", "x" * 40 + "notanumber"),
    "zero": ("set", "x" * 40 + "0"),
}


@pytest.mark.parametrize("planted", sorted(PLANTED_STREAKS))
def test_a_planted_streak_key_is_replaced_by_the_next_check_which_says_so(
    planted: str, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Failing open on that session for good was a bypass by anyone who could write one key.
    import redis

    from dsh_loop_brake import LoopBrake, LoopBrakeError
    from dsh_loop_brake.stores import StoreError, open_store

    key = "dsh-loop-brake:streak:s"
    command, *values = PLANTED_STREAKS[planted]
    with redis.Redis.from_url(redis_url) as client:
        getattr(client, command)(key, *values)
        store = open_store(redis_url, session_ttl=600)
        brake = LoopBrake(3, store=store)
        if planted in ("list", "hash", "short", "zero"):
            with pytest.raises(StoreError, match=r"did not write|WRONGTYPE"):
                brake.streak("s")  # a read says so; only a check replaces the value
        assert brake.check("search", {"q": 1}, session_id="s") == 1
        assert brake.check("search", {"q": 1}, session_id="s") == 2
        with pytest.raises(LoopBrakeError):
            brake.check("search", {"q": 1}, session_id="s")
        assert brake.store_errors == 0
        assert 0 < client.ttl(key) <= 600  # it expires like any key of the store's
        store.close()
    warnings = [r.getMessage() for r in caplog.records if "did not write" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "a session's key held a value the store did not write" in warnings[0]


PLANTED_AGENTS = {
    "a string": ("set", "str"),
    "calls not a number": ("hset", {"calls": "abc", "next": "0", "head": "0"}),
    "a window without digests": ("hset", {"next": "3", "head": "0"}),
    "a bound far below zero": ("hset", {"head": "-1000000000000000", "next": "0"}),
    "a bound that is a fraction": ("hset", {"head": "0.5", "next": "2"}),
}


@pytest.mark.parametrize("planted", sorted(PLANTED_AGENTS))
def test_a_planted_agent_key_is_replaced_by_the_next_check(
    planted: str, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # "a bound far below zero" must not keep the script evicting for ever (the server stuck).
    import redis

    from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
    from dsh_loop_brake.stores import open_store

    key = "dsh-loop-brake:agent:A"
    command, value = PLANTED_AGENTS[planted]
    with redis.Redis.from_url(redis_url) as client:
        if command == "set":
            client.set(key, value)
        else:
            client.hset(key, mapping=value)
        store = open_store(redis_url, session_ttl=600)
        breaker = CircuitBreaker(resolve_config({"duplicateLimit": 3, "window": 3}), store=store)
        breaker.check_call("t", {"a": 1}, agent="A")
        breaker.check_call("t", {"a": 2}, agent="A")
        assert breaker.calls("A") == 2
        assert breaker.store_errors == 0
        assert 0 < client.ttl(key) <= 600
        store.close()
    warnings = [r.getMessage() for r in caplog.records if "did not write" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "an agent's key held a value the store did not write" in warnings[0]


def test_reading_an_agents_calls_that_the_store_did_not_write_is_a_store_error(
    redis_url: str,
) -> None:
    import redis

    from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
    from dsh_loop_brake.stores import StoreError, open_store

    with redis.Redis.from_url(redis_url) as client:
        client.hset("dsh-loop-brake:agent:B", mapping={"calls": "abc"})
    store = open_store(redis_url)
    breaker = CircuitBreaker(resolve_config({}), store=store)
    with pytest.raises(StoreError, match="did not write"):
        breaker.calls("B")
    with pytest.raises(StoreError, match="did not write"):
        store.breaker_calls("B")
    store.close()


# --- Redis: whose keys, and which server -------------------------------------------------------


def test_an_empty_prefix_is_refused(redis_url: str) -> None:
    # With no prefix, forgetting every session deleted any key named streak:*, another
    # program's too.
    from dsh_loop_brake.stores import RedisStore, StoreConfigError

    with pytest.raises(StoreConfigError, match="prefix must be a non-empty str"):
        RedisStore(redis_url, prefix="")


def test_forgetting_everything_deletes_only_the_stores_own_keys(redis_url: str) -> None:
    import redis

    from dsh_loop_brake import LoopBrake
    from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
    from dsh_loop_brake.stores import RedisStore

    others = [
        "streak:app-data",
        "agent:app-data",
        "app:streak:x",
        "ab:streak:x",  # matched by the unescaped glob a*:streak:*
        "a*:streakx",
        "a*:agent",
        "a*:no-agentx",
    ]
    with redis.Redis.from_url(redis_url) as client:
        for key in others:
            client.set(key, "theirs")
        store = RedisStore(redis_url, prefix="a*:")
        brake = LoopBrake(5, store=store)
        breaker = CircuitBreaker(resolve_config({}), store=store)
        brake.check("t", {}, session_id="s")
        breaker.check_call("t", {}, agent="A")
        breaker.check_call("t", {"b": 1})
        assert sorted(client.keys("a\\*:*")) == [
            b"a*:agent",
            b"a*:agent:A",
            b"a*:no-agent",
            b"a*:no-agentx",
            b"a*:streak:s",
            b"a*:streakx",
        ]
        brake.reset()
        breaker.reset()
        left = sorted(key.decode() for key in client.keys("*"))
        store.close()
    assert left == sorted(others)


def test_a_cluster_clients_store_names_the_node_it_talks_to(
    make_redis_server: Any, tmp_path: Path
) -> None:
    import time

    import redis
    from redis.cluster import RedisCluster

    from dsh_loop_brake import LoopBrake
    from dsh_loop_brake.stores import RedisStore

    server = make_redis_server(
        "--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf")
    )
    with redis.Redis(port=server.port) as node:
        node.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        for _ in range(2000):  # a bound, not a timing test: the cluster comes up at once
            if b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO"):
                break
            time.sleep(0.01)
    client = RedisCluster(host="127.0.0.1", port=server.port)
    store = RedisStore(client)
    assert store.url == f"redis://127.0.0.1:{server.port} (RedisCluster)"
    brake = LoopBrake(5, store=store)
    assert [brake.check("t", {}, session_id=f"s{n % 3}") for n in range(6)] == [1, 1, 1, 2, 2, 2]
    brake.reset()  # keys on every node, deleted slot by slot
    assert len(brake) == 0
    client.close()


# --- SQLite: whose file, and who else may write it ---------------------------------------------

as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (to chown a file)"
)
OTHER_UID = 65534  # nobody


@as_root
@pytest.mark.parametrize("which", ["", "-wal", "-shm"])
def test_a_state_file_of_another_user_is_refused_and_left_alone(which: str, tmp_path: Path) -> None:
    # A nobody-owned file in a directory anyone may write was used by root without a word.
    from dsh_loop_brake.stores import SQLiteStore, StoreConfigError

    path = tmp_path / "s.sqlite3"
    planted = Path(f"{path}{which}")
    planted.write_bytes(b"")
    os.chown(planted, OTHER_UID, OTHER_UID)
    os.chmod(planted, 0o666)
    with pytest.raises(StoreConfigError) as raised:
        SQLiteStore(path)
    message = str(raised.value)
    assert f"{planted} belongs to another user (uid {OTHER_UID})" in message
    assert "chown it to this user" in message
    assert planted.stat().st_uid == OTHER_UID and planted.stat().st_mode & 0o777 == 0o666


@unix_only
@pytest.mark.parametrize("mode", [0o644, 0o666, 0o640, 0o604], ids=lambda mode: f"{mode:04o}")
def test_a_state_file_others_may_read_or_write_is_made_owner_only(
    mode: int, tmp_path: Path
) -> None:
    from dsh_loop_brake.stores import SQLiteStore

    path = tmp_path / "s.sqlite3"
    path.touch()
    os.chmod(path, mode)  # a file touched (0644 under the usual umask) before the store made it
    with SQLiteStore(path) as store:
        assert store.advance_streak("s", b"d" * 32) == 1
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert name.stat().st_mode & 0o777 == 0o600, name
    wal = Path(f"{path}-wal")  # and a -wal file left so (an empty one is a valid, empty log)
    wal.touch()
    os.chmod(wal, 0o666)
    with SQLiteStore(path) as store:
        assert store.advance_streak("s", b"d" * 32) == 2
        assert Path(f"{path}-wal").stat().st_mode & 0o777 == 0o600


@unix_only
def test_a_read_only_state_file_stays_read_only(tmp_path: Path) -> None:
    # Owner-only means clearing the group's and others' bits, never adding the owner's.
    from dsh_loop_brake.stores import SQLiteStore, StoreError

    path = tmp_path / "s.sqlite3"
    path.touch()
    os.chmod(path, 0o444)
    with contextlib.suppress(StoreError):  # refused, when this user cannot write it (root can)
        SQLiteStore(path).close()
    assert path.stat().st_mode & 0o777 == 0o400


@unix_only
@pytest.mark.parametrize("which", ["-wal", "-shm"])
def test_a_link_planted_as_the_wal_or_shm_file_is_named_as_the_cause(
    which: str, tmp_path: Path
) -> None:
    # SQLite refuses it, and the message used to say the database itself was unusable.
    from dsh_loop_brake.stores import SQLiteStore, StoreConfigError

    path = tmp_path / "s.sqlite3"
    target = tmp_path / "elsewhere"
    target.write_text("precious\n", encoding="utf-8")
    Path(f"{path}{which}").symlink_to(target)
    with pytest.raises(StoreConfigError) as raised:
        SQLiteStore(path)
    message = str(raised.value)
    assert f"{path}{which}, where SQLite keeps the database's {which[1:]} file" in message
    assert "is a symbolic link" in message and "remove it" in message
    assert "move the file away" not in message
    assert target.read_text(encoding="utf-8") == "precious\n"


def _python_for_nobody() -> str | None:
    """An interpreter the user nobody can run (the venv's may live under /root)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sqlite3"], user=OTHER_UID, capture_output=True
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    return None


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A temporary directory other users can reach (pytest's own is the owner's only)."""
    base = Path(tempfile.mkdtemp(prefix="dsh-loop-brake-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


@as_root
def test_a_directory_this_user_cannot_write_is_named_as_the_cause(public_tmp: Path) -> None:
    # SQLite creates the -wal and -shm files beside the database: the fix is the directory's
    # permissions, not moving the file away.
    python = _python_for_nobody()
    if python is None:
        pytest.skip("no Python interpreter the user nobody can run")
    directory = public_tmp / "read-only"
    directory.mkdir(mode=0o755)
    path = directory / "s.sqlite3"
    path.touch()
    os.chown(path, OTHER_UID, OTHER_UID)
    os.chmod(path, 0o666)
    code = (
        "import sys\nfrom dsh_loop_brake.stores import SQLiteStore\n"
        "try:\n    SQLiteStore(sys.argv[1])\nexcept Exception as error:\n    print(error)\n"
    )
    result = subprocess.run(
        [python, "-c", code, str(path)],
        user=OTHER_UID,
        group=OTHER_UID,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent), "HOME": "/"},
    )
    assert f"this user cannot write to the directory {directory}" in result.stdout, result
    assert "make the directory writable" in result.stdout
    assert "move the file away" not in result.stdout


def test_a_newline_in_a_sqlite_path_is_escaped_where_the_store_is_shown(tmp_path: Path) -> None:
    from dsh_loop_brake import LoopBrake
    from dsh_loop_brake.stores import SQLiteStore

    path = tmp_path / "two\nlines.sqlite3"
    with SQLiteStore(path) as store:
        for text in (store.url, repr(store), str(store), repr(LoopBrake(3, store=store))):
            assert "\n" not in text and "two\\x0alines.sqlite3" in text, text
        assert store.path == str(path)  # the file itself is where it was asked to be
    assert path.exists()
