"""Stores that go away, are locked, corrupted, misconfigured or password-protected."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
from _redis_server import MakeRedisServer, RedisServer
from _sqlite_lock import write_lock_held

from dsh_loop_brake.stores import (
    MissingExtraError,
    RedisStore,
    SQLiteStore,
    StoreConfigError,
    StoreError,
    open_store,
)

A = hashlib.sha256(b"a").digest()
SECRET = "s3cret-Pa55"


def everything_shown(error: BaseException) -> str:
    """All an error can show: str, repr, args, url, and its whole traceback with causes."""
    return "\n".join(
        [
            str(error),
            repr(error),
            repr(error.args),
            str(getattr(error, "url", "")),
            "".join(traceback.format_exception(type(error), error, error.__traceback__)),
        ]
    )


# --- Redis ------------------------------------------------------------------------------------


def test_redis_killed_mid_run_fails_each_call_then_works_again_when_back(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server()
    store = open_store(server.url)
    assert store.advance_streak("s", A) == 1
    assert store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0) is None
    server.kill()
    for _ in range(2):  # each call tries again, and fails again while the server is away
        with pytest.raises(StoreError, match="cannot be reached") as raised:
            store.advance_streak("s", A)
        assert raised.value.url == server.url
        assert server.url in str(raised.value)
    with pytest.raises(StoreError):
        store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0)
    with pytest.raises(StoreError):
        store.ping()
    server.start()  # the same port, an empty server (persistence is off)
    assert store.advance_streak("s", A) == 1
    assert store.advance_streak("s", A) == 2
    assert store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0) is None


def test_an_unreachable_redis_is_a_store_error_when_opened(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server()
    url = server.url
    server.stop()
    with pytest.raises(StoreError, match="cannot be reached") as raised:
        open_store(url)
    assert not isinstance(raised.value, StoreConfigError)


def test_refused_credentials_are_a_store_error_that_never_shows_the_password(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server("--requirepass", SECRET)
    right = open_store(server.url)
    assert right.advance_streak("s", A) == 1
    assert SECRET not in repr(right) + str(right) + right.url
    assert str(right) == right.url == f"redis://:***@127.0.0.1:{server.port}/0"
    assert repr(right) == f"<RedisStore redis://:***@127.0.0.1:{server.port}/0>"
    for url in (
        f"redis://127.0.0.1:{server.port}/0",  # no password
        f"redis://:wrong-{SECRET}@127.0.0.1:{server.port}/0",
        f"redis://default:wrong-{SECRET}@127.0.0.1:{server.port}/0",
        f"redis://127.0.0.1:{server.port}/0?password=wrong-{SECRET}",
    ):
        with pytest.raises(StoreError, match="refused the credentials") as raised:
            open_store(url)
        assert SECRET not in everything_shown(raised.value), url
        if "wrong" in url:
            assert "***" in str(raised.value)


def test_a_password_is_never_shown_when_the_server_goes_away(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server("--requirepass", SECRET)
    store = open_store(server.url)
    server.kill()
    with pytest.raises(StoreError) as raised:
        store.advance_streak("s", A)
    assert SECRET not in everything_shown(raised.value)
    assert "redis://:***@" in str(raised.value)


def test_a_unix_socket_url_reaches_the_server(make_redis_server: MakeRedisServer) -> None:
    path = f"/tmp/dsh-redis-{os.getpid()}.sock"  # short: a socket path has at most 107 bytes
    server = make_redis_server("--unixsocket", path, "--unixsocketperm", "700")
    try:
        store = open_store(f"unix://{path}?db=1")
        assert store.advance_streak("s", A) == 1
        assert store.url == f"unix://{path}?db=1"
    finally:
        server.stop()
        Path(path).unlink(missing_ok=True)


def test_a_client_can_be_handed_in_and_is_left_open(redis_server: RedisServer) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=redis_server.port, password=None, db=2)
    store = RedisStore(client, prefix="handed:")
    assert store.advance_streak("s", A) == 1
    assert client.exists(b"handed:streak:s") == 1
    store.close()
    assert client.ping() is True  # not the store's to close
    assert store.url == f"redis://127.0.0.1:{redis_server.port}/2"
    client.close()


def test_a_client_that_decodes_responses_is_refused(redis_server: RedisServer) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=redis_server.port, decode_responses=True)
    with pytest.raises(StoreConfigError, match="decode_responses=False"):
        RedisStore(client)
    client.close()


def test_a_client_with_a_password_shows_it_as_stars(redis_server: RedisServer) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=redis_server.port, password=SECRET)
    store = RedisStore(client)
    assert SECRET not in repr(store) + store.url
    assert store.url.startswith("redis://:***@127.0.0.1:")
    client.close()


def test_keys_are_expired_by_the_server(redis_url: str) -> None:
    import redis

    store = RedisStore(redis_url, session_ttl=1000, prefix="ttl:")
    store.advance_streak("s", A)
    store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0)
    store.judge_call(None, None, duplicate_limit=3, window=5, cap=0)
    with redis.Redis.from_url(redis_url) as client:
        for key in (b"ttl:streak:s", b"ttl:agent:ag", b"ttl:no-agent"):
            assert 0 < client.ttl(key) <= 1000, key


def test_redis_forgets_state_left_alone_for_the_ttl(redis_url: str) -> None:
    store = RedisStore(redis_url, session_ttl=1)
    assert [store.advance_streak("s", A) for _ in range(3)] == [1, 2, 3]
    for _ in range(2):
        assert store.judge_call("ag", A, duplicate_limit=9, window=9, cap=2) is None
    # Wait (bounded) until the server has let the keys go; no assertion on how long it took.
    for _ in range(200):
        if store.read_streak("s") is None and store.breaker_calls("ag") == 0:
            break
        time.sleep(0.05)
    assert store.read_streak("s") is None
    assert store.advance_streak("s", A) == 1
    assert store.breaker_calls("ag") == 0
    denial = None
    for _ in range(3):
        denial = store.judge_call("ag", A, duplicate_limit=9, window=9, cap=2)
    assert denial is not None and denial.kind == "cap" and denial.first  # a fresh agent


# --- SQLite -----------------------------------------------------------------------------------


def test_a_file_locked_by_another_process_fails_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "brakes.sqlite3"
    store = SQLiteStore(path, busy_timeout=0.2)
    assert store.advance_streak("s", A) == 1
    with write_lock_held(path):
        with pytest.raises(StoreError, match="locked by another process") as raised:
            store.advance_streak("s", A)
        assert not isinstance(raised.value, StoreConfigError)
        with pytest.raises(StoreError, match="locked"):
            store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0)
        assert store.read_streak("s") == (A, 1)  # readers are never blocked (WAL)
    assert store.advance_streak("s", A) == 2  # the failed call counted nothing
    assert store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0) is None


def test_the_busy_timeout_is_at_most_two_seconds(tmp_path: Path) -> None:
    for bad in (0, -1, 2.5, True, "1"):
        with pytest.raises(StoreConfigError, match="busy_timeout"):
            SQLiteStore(tmp_path / "x.sqlite3", busy_timeout=bad)  # type: ignore[arg-type]


def corrupt(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        companion = Path(str(path) + suffix)
        if companion.exists():
            companion.write_bytes(os.urandom(companion.stat().st_size))


def test_a_file_corrupted_mid_run_fails_each_call_until_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "brakes.sqlite3"
    store = SQLiteStore(path)
    for number in range(100):
        store.advance_streak(f"s{number}", A)
    corrupt(path)
    for _ in range(3):
        with pytest.raises(StoreError, match="database"):
            store.advance_streak("s1", A)
    with pytest.raises(StoreError):
        store.judge_call("ag", A, duplicate_limit=3, window=5, cap=0)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    assert store.advance_streak("s1", A) == 1  # a new, empty store in its place


def test_a_corrupted_file_is_refused_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "brakes.sqlite3"
    with SQLiteStore(path) as store:
        store.advance_streak("s", A)
    corrupt(path)
    with pytest.raises(StoreConfigError, match="not a usable SQLite database") as raised:
        open_store(f"sqlite:{path}")
    assert f"sqlite:{path}" in str(raised.value)


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes, not a database\n" * 40)
    with pytest.raises(StoreConfigError, match="not a usable SQLite database") as raised:
        open_store(f"sqlite:{path}")
    assert str(path) in str(raised.value)
    assert path.read_text() == "my notes, not a database\n" * 40


def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    before = path.read_bytes()
    with pytest.raises(StoreConfigError, match="another program"):
        open_store(f"sqlite:{path}")
    assert path.read_bytes() == before
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_the_hooks_earlier_tables_share_the_file(tmp_path: Path) -> None:
    # Before it used this store, the coding-agent hook kept its counts in tables of its own in
    # the same default file; a file holding only those is a store's file, and they stay.
    path = tmp_path / "brakes.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE provisional_hook_streaks (session TEXT PRIMARY KEY)")
        db.execute("INSERT INTO provisional_hook_streaks VALUES ('kept')")
        db.execute("PRAGMA user_version = 1")
    with SQLiteStore(path) as store:
        assert store.advance_streak("s", A) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT session FROM provisional_hook_streaks").fetchall() == [("kept",)]


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "brakes.sqlite3"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreConfigError, match="newer dsh-loop-brake"):
        SQLiteStore(path)


def test_a_directory_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    url = f"sqlite:{tmp_path / 'a-file' / 'state' / 'brakes.sqlite3'}"
    with pytest.raises(StoreConfigError, match="cannot create the directory") as raised:
        open_store(url)
    assert url in str(raised.value)


def test_a_directory_at_the_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="cannot open the database file"):
        open_store(f"sqlite:{tmp_path}")


def test_the_file_is_owner_only_and_so_are_the_directories_made_for_it(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "one" / "two" / "brakes.sqlite3"
    store = open_store(f"sqlite:{path}")
    store.advance_streak("s", A)
    assert path.stat().st_mode & 0o777 == 0o600
    for companion in ("-wal", "-shm"):  # SQLite gives them the database's mode
        assert Path(str(path) + companion).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "one").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "one" / "two").stat().st_mode & 0o777 == 0o700
    assert tmp_path.stat().st_mode & 0o777 == 0o755  # an existing directory is left as it is
    store.close()


def test_no_argument_value_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "brakes.sqlite3"
    canary = "canary-7f3a9c"
    digest = hashlib.sha256(f'search\n{{"q":"{canary}"}}'.encode()).digest()
    with SQLiteStore(path) as store:
        store.advance_streak("session", digest)
        store.judge_call("agent", digest, duplicate_limit=3, window=5, cap=0)
    blob = b"".join(
        Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )
    assert canary.encode() not in blob
    assert digest in blob


# --- URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("postgres://db/x", "unknown store scheme postgres:"),
        ("file.sqlite3", "unknown store scheme"),
        ("", "empty"),
        (" memory:", "whitespace"),
        ("memory:x", "malformed"),
        ("sqlite:", "has no path"),
        ("sqlite:///var/x.sqlite3", "no //"),
        ("sqlite::memory:", "in-memory"),
        ("sqlite:a\x00b", "NUL"),
        ("redis:localhost", "malformed"),
        ("redis://localhost:port/0", "malformed"),
        ("redis://localhost:6379/zero", "not a number"),
        ("unix://", "no socket path"),
        ("redis://localhost:6379/0?socket_timeout=soon", "cannot be used"),
    ],
)
def test_urls_that_can_never_work_are_config_errors_naming_the_url(url: str, match: str) -> None:
    with pytest.raises(StoreConfigError, match=match) as raised:
        open_store(url)
    assert isinstance(raised.value, ValueError)
    shown = url.replace("\x00", "\\x00")
    assert shown in str(raised.value) or not url


def test_a_url_must_be_a_string() -> None:
    with pytest.raises(StoreConfigError, match="must be a string"):
        open_store(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -5, True, 1.5, "60", 10**12])
def test_a_bad_session_ttl_is_a_config_error(ttl: object, tmp_path: Path) -> None:
    for url in ("memory:", f"sqlite:{tmp_path / 'x.sqlite3'}"):
        with pytest.raises(StoreConfigError, match="session_ttl"):
            open_store(url, session_ttl=ttl)  # type: ignore[arg-type]


def test_a_relative_sqlite_path_is_under_the_dsh_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = open_store("sqlite:state/brakes.sqlite3", home=tmp_path / "given")
    assert given.url == f"sqlite:{tmp_path / 'given' / 'state' / 'brakes.sqlite3'}"
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "env"))
    from_env = open_store("sqlite:state/brakes.sqlite3")
    assert from_env.url == f"sqlite:{tmp_path / 'env' / 'state' / 'brakes.sqlite3'}"
    monkeypatch.setenv("DSH_HOME", "  ")  # blank counts as not set
    default = open_store("sqlite:brakes.sqlite3")
    assert default.url == f"sqlite:{Path.home() / '.dsh' / 'brakes.sqlite3'}"
    tilde = open_store("sqlite:~/elsewhere/b.sqlite3", home=tmp_path)
    assert tilde.url == f"sqlite:{Path.home() / 'elsewhere' / 'b.sqlite3'}"
    for store in (given, from_env, default, tilde):
        assert Path(store.url.removeprefix("sqlite:")).is_file()
        store.close()


def test_redis_urls_are_shown_without_their_password() -> None:
    from dsh_loop_brake.stores import redact_url

    cases = {
        f"redis://:{SECRET}@host:6379/0": "redis://:***@host:6379/0",
        f"redis://user:{SECRET}@host:6379/0": "redis://user:***@host:6379/0",
        f"rediss://user:{SECRET}@host/0?ssl_cert_reqs=none": "rediss://user:***@host/0?ssl_cert_reqs=none",
        f"redis://{SECRET}@host": "redis://***@host",
        f"redis://:p@ss/{SECRET}@host:1/0": "redis://:***@host:1/0",
        f"unix://:{SECRET}@/run/redis.sock?db=1": "unix://:***@/run/redis.sock?db=1",
        f"unix:///run/redis.sock?db=0&password={SECRET}": "unix:///run/redis.sock?db=0&password=***",
        f"redis://host?Password={SECRET}&db=1": "redis://host?Password=***&db=1",
        "redis://host:6379/0": "redis://host:6379/0",
        "sqlite:/var/x.sqlite3": "sqlite:/var/x.sqlite3",
        "memory:": "memory:",
    }
    for url, shown in cases.items():
        assert redact_url(url) == shown


def test_a_redis_url_without_the_extra_names_the_extra(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = """
import sys
sys.modules["redis"] = None  # as if the extra were not installed
from dsh_loop_brake.stores import MissingExtraError, StoreConfigError, open_store
try:
    open_store("redis://:pw@localhost:6379/0")
except MissingExtraError as error:
    assert isinstance(error, ImportError) and isinstance(error, StoreConfigError)
    assert "pw" not in str(error)
    print(error)
store = open_store("sqlite:" + sys.argv[1])
assert store.advance_streak("s", bytes(32)) == 1
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "state.sqlite3")],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "dsh-loop-brake[redis]"' in done.stdout
    assert "redis://:***@localhost:6379/0" in done.stdout


def test_opening_memory_or_sqlite_never_imports_redis(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = f"""
import sys
from dsh_loop_brake.stores import open_store
open_store("memory:").advance_streak("s", bytes(32))
open_store("sqlite:{tmp_path / "x.sqlite3"}").advance_streak("s", bytes(32))
assert "redis" not in sys.modules, "redis was imported"
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=cli_env, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_missing_extra_error_is_exported() -> None:
    assert issubclass(MissingExtraError, ImportError)
    assert issubclass(MissingExtraError, StoreConfigError)
