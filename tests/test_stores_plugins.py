"""Both plugins keep their state in the store their row names: ``store`` and ``sessionTtl`` (or
``DSH_LOOP_BRAKE_STORE``), validated and opened at apply, closed on dispose -- and a shared store
outlives every harness that uses it. Real profile files, real SQLite files, a real redis-server.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from _redis_server import MakeRedisServer
from _sqlite_lock import open_files

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeConfigError, LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfigError
from dsh_loop_brake.harness import Agent, Harness, Row, ToolDefinition, ToolExecution
from dsh_loop_brake.harness.context import Context
from dsh_loop_brake.harness.fibers import Fiber
from dsh_loop_brake.harness.tools import ToolRegistry
from dsh_loop_brake.stores import MemoryStore, RedisStore, SQLiteStore, StoreError, open_store

ENV = "DSH_LOOP_BRAKE_STORE"


def write_profile(home: Path, loop_config: str, breaker_config: str | None = None) -> Path:
    """The default profile's patch: a loop-brake row (config lines from line 5) and, when
    given, a circuit-breaker row."""
    text = f"- insert:\n  - id: loop-brake\n    name: dsh-loop-brake\n    config:\n{loop_config}"
    if breaker_config is not None:
        text += (
            f"  - id: circuit-breaker\n    name: dsh-circuit-breaker\n    config:\n{breaker_config}"
        )
    path = home / "profiles" / "default" / "cordis.patch.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_lines(**keys: object) -> str:
    """Config lines of a row in the patch, each value written as raw YAML."""
    return "".join(f"      {key}: {value}\n" for key, value in keys.items())


def run(harness: Harness, calls: int, agent: str = "agent-1") -> list[object]:
    """The same search call ``calls`` times through the harness: each result's error code."""

    async def loop() -> list[object]:
        results = []
        for number in range(calls):
            execution = ToolExecution(f"c{number}", "search", {"q": "weather"}, Agent(agent))
            result = await harness.execute(execution)
            results.append(result.error["code"] if result.error else "ran")
        return results

    if harness.ctx.tools.get("search") is None:
        harness.ctx.tools.register(ToolDefinition("search", lambda args, execution: None))
    return asyncio.run(loop())


# --- the loop-brake row -----------------------------------------------------------------------


def test_a_relative_sqlite_store_lives_under_the_harness_home_and_two_harnesses_share_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_profile(home, config_lines(maxRepeats=3, store="sqlite:state/brakes.sqlite3"))
    first = Harness.boot("default", home=home)
    second = Harness.boot("default", home=home)  # another process, as far as the store goes
    try:
        brake = first.handle("loop-brake")
        assert isinstance(brake, LoopBrake) and isinstance(brake.store, SQLiteStore)
        assert brake.store.path == str(home / "state" / "brakes.sqlite3")
        assert (home / "state" / "brakes.sqlite3").stat().st_mode & 0o777 == 0o600
        assert brake.store.session_ttl == 86400
        assert run(first, 1) + run(second, 1) + run(first, 1) == ["ran", "ran", "LOOP_BRAKE"]
    finally:
        first.dispose()
        second.dispose()


def test_session_ttl_reaches_the_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_profile(home, config_lines(store="sqlite:brakes.sqlite3", sessionTtl=3600))
    with Harness.boot("default", home=home) as harness:
        assert harness.handle("loop-brake").store.session_ttl == 3600
        run(harness, 1)
    with sqlite3.connect(home / "brakes.sqlite3") as db:
        assert db.execute("SELECT expires - touched FROM streaks").fetchall() == [(3600,)]


def test_the_environment_supplies_the_store_only_when_the_row_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv(ENV, f"sqlite:{tmp_path / 'from-env.sqlite3'}")
    write_profile(home, config_lines(maxRepeats=3))
    with Harness.boot("default", home=home) as harness:
        assert harness.handle("loop-brake").store.url == f"sqlite:{tmp_path / 'from-env.sqlite3'}"
    write_profile(home, config_lines(store='"memory:"'))  # the row says memory: it wins
    with Harness.boot("default", home=home) as harness:
        assert isinstance(harness.handle("loop-brake").store, MemoryStore)
    monkeypatch.setenv(ENV, "  ")  # blank: not set
    write_profile(home, config_lines(maxRepeats=3))
    with Harness.boot("default", home=home) as harness:
        assert isinstance(harness.handle("loop-brake").store, MemoryStore)


def test_dispose_closes_the_store_and_leaves_a_shared_one_as_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_profile(home, config_lines(maxRepeats=3, store="sqlite:brakes.sqlite3"))
    database = home / "brakes.sqlite3"
    harness = Harness.boot("default", home=home)
    assert run(harness, 2) == ["ran", "ran"]
    assert open_files(database) > 0
    harness.dispose()
    assert open_files(database) == 0  # what apply opened, dispose closed
    with Harness.boot("default", home=home) as again:
        # A shared store belongs to every process that uses it: the streak is still there.
        assert run(again, 1) == ["LOOP_BRAKE"]
        again.handle("loop-brake").reset()  # only an explicit reset erases it
        assert run(again, 1) == ["ran"]


def test_dispose_forgets_what_a_memory_store_held() -> None:
    row = Row(id="loop-brake", name="dsh-loop-brake", config={"maxRepeats": 2})
    harness = Harness.from_rows([row])
    brake = harness.handle("loop-brake")
    assert run(harness, 1) == ["ran"] and len(brake) == 1
    harness.dispose()
    assert len(brake) == 0


ROW_ERRORS = [
    ("ftp://host/x", "unknown store scheme ftp:"),
    ("redis://host:port/0", "malformed"),
    ('"sqlite:"', "has no path"),
    ("memory:x", "the memory store is just memory:"),
    ("[sqlite:x]", "store must be a store URL (memory:, sqlite:PATH, redis://"),
    ("''", "the URL is empty"),
]


@pytest.mark.parametrize(("store", "words"), ROW_ERRORS, ids=[s.strip('"') for s, _ in ROW_ERRORS])
def test_a_store_that_can_never_work_is_a_config_error_at_its_file_and_line(
    tmp_path: Path, store: str, words: str
) -> None:
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(maxRepeats=3, store=store))
    with pytest.raises(LoopBrakeConfigError) as caught:
        Harness.boot("default", home=home)
    message = str(caught.value)
    assert message.startswith(f"{patch}:6: loop brake: ")
    assert words in message and "(from the loop-brake patch row)" in message
    assert caught.value.key == "store" and caught.value.line == 6


def test_a_directory_that_cannot_be_created_or_a_file_that_is_no_database_is_a_config_error(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (tmp_path / "in-the-way").write_text("a file, not a directory")
    (tmp_path / "notes.sqlite3").write_text("not a database, and longer than a header " * 20)
    for url, words in [
        (f"sqlite:{tmp_path / 'in-the-way' / 'brakes.sqlite3'}", "cannot create the directory"),
        (f"sqlite:{tmp_path / 'notes.sqlite3'}", "not a usable SQLite database"),
    ]:
        patch = write_profile(home, config_lines(store=url))
        with pytest.raises(LoopBrakeConfigError) as caught:
            Harness.boot("default", home=home)
        assert str(caught.value).startswith(f"{patch}:5: loop brake: store sqlite:")
        assert words in str(caught.value)
    assert (tmp_path / "notes.sqlite3").read_text().startswith("not a database")  # left alone


def test_a_redis_url_without_the_redis_extra_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if the extra were not installed
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(store="redis://:hunter2@localhost:6379/0"))
    with pytest.raises(LoopBrakeConfigError) as caught:
        Harness.boot("default", home=home)
    message = str(caught.value)
    assert message.startswith(f"{patch}:5: loop brake: store redis://:***@localhost:6379/0: ")
    assert 'pip install "dsh-loop-brake[redis]"' in message and "hunter2" not in message


def test_a_bad_store_from_the_environment_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "postgres://db/brakes")
    with pytest.raises(LoopBrakeConfigError) as caught:
        loop_brake_plugin.apply(host_context(), {"maxRepeats": 3})
    assert f"(from the environment variable {ENV})" in str(caught.value)
    assert caught.value.key is None


@pytest.mark.parametrize(
    ("value", "words"),
    [("0", "got 0"), ("-5", "got -5"), ("soon", "got 'soon'"), (f"{2**62}", "100 years")],
)
def test_a_bad_session_ttl_is_a_config_error(tmp_path: Path, value: str, words: str) -> None:
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(sessionTtl=value))
    with pytest.raises(LoopBrakeConfigError) as caught:
        Harness.boot("default", home=home)
    assert str(caught.value).startswith(f"{patch}:5: loop brake: sessionTtl must be an integer")
    assert words in str(caught.value)


def host_context() -> Context:
    fiber = Fiber("row")
    return Context(ToolRegistry(fiber), fiber)


def test_a_store_that_cannot_be_reached_is_a_store_error_at_apply_and_nothing_is_patched(
    tmp_path: Path,
) -> None:
    ctx = host_context()
    register = ctx.tools.register
    with pytest.raises(StoreError) as caught:
        loop_brake_plugin.apply(ctx, {"store": "redis://:hunter2@127.0.0.1:1/0"})
    assert "cannot be reached" in str(caught.value) and "hunter2" not in str(caught.value)
    assert str(caught.value).startswith("loop brake: store redis://:***@127.0.0.1:1/0: ")
    assert caught.value.key == "store"
    assert ctx.tools.register == register and "register" not in vars(ctx.tools)
    # Through the harness, the error names the patch file and line that configured the store.
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(store="redis://127.0.0.1:1/0"))
    with pytest.raises(StoreError) as located:
        Harness.boot("default", home=home)
    assert str(located.value).startswith(f"{patch}:5: loop brake: store redis://127.0.0.1:1/0: ")


def test_a_server_that_refuses_the_credentials_is_a_store_error_at_apply(
    make_redis_server: MakeRedisServer,
) -> None:
    server = make_redis_server("--requirepass", "the-right-one")
    url = f"redis://:the-wrong-one@127.0.0.1:{server.port}/0"
    with pytest.raises(StoreError) as caught:
        loop_brake_plugin.apply(host_context(), {"store": url})
    assert "the-wrong-one" not in str(caught.value)
    assert "refused the credentials" in str(caught.value) or "answered with an error" in str(
        caught.value
    )


def test_a_redis_store_is_shared_by_two_harnesses_and_keeps_its_password_out_of_sight(
    make_redis_server: MakeRedisServer, tmp_path: Path
) -> None:
    server = make_redis_server("--requirepass", "pw-CANARY")
    home = tmp_path / "home"
    write_profile(home, config_lines(maxRepeats=2, store=server.url))
    with Harness.boot("default", home=home) as first, Harness.boot("default", home=home) as second:
        brake = first.handle("loop-brake")
        assert isinstance(brake.store, RedisStore)
        assert "pw-CANARY" not in repr(brake) and "***" in repr(brake)
        assert run(first, 1) + run(second, 1) == ["ran", "LOOP_BRAKE"]


# --- the circuit-breaker row ------------------------------------------------------------------


def test_the_breakers_row_takes_a_store_and_keys_agents_by_id_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_profile(
        home,
        config_lines(maxRepeats=100),
        config_lines(maxCallsPerAgent=3, store="sqlite:state/brakes.sqlite3", sessionTtl=600),
    )
    with Harness.boot("default", home=home) as first, Harness.boot("default", home=home) as second:
        breaker = first.handle("circuit-breaker")
        assert isinstance(breaker, CircuitBreaker) and isinstance(breaker.store, SQLiteStore)
        assert breaker.store.session_ttl == 600
        # Two agent objects, in two harnesses, with one id: one agent to a shared store.
        results = run(first, 2) + run(second, 2)
        assert results == ["ran", "ran", "ran", "CIRCUIT_BREAKER"]
        assert run(second, 1, agent="agent-2") == ["ran"]  # another id: its own cap
        assert breaker.calls("agent-1") == 3
    with Harness.boot("default", home=home) as again:  # dispose left the shared store alone
        assert run(again, 1) == ["CIRCUIT_BREAKER"]


def test_the_breakers_store_errors_name_the_breaker_and_its_row(tmp_path: Path) -> None:
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(), config_lines(store="nope:x"))
    with pytest.raises(CircuitBreakerConfigError) as caught:
        Harness.boot("default", home=home)
    assert str(caught.value).startswith(f"{patch}:8: circuit breaker: store nope:x: unknown")
    assert "(from the circuit-breaker patch row)" in str(caught.value)


def test_with_the_memory_store_the_breaker_keeps_agent_objects_apart() -> None:
    # The memory store keeps an agent object's state with the object: two agents with one id
    # are two agents (they cannot be the same process's one agent twice).
    row = Row(id="circuit-breaker", name="dsh-circuit-breaker", config={"maxCallsPerAgent": 1})
    with Harness.from_rows([row]) as harness:
        assert run(harness, 2) == ["ran", "ran"]  # a new Agent("agent-1") object per call


# --- Brakes.from_profile, replay and the MCP proxy ----------------------------------------------


def test_two_brakes_from_one_profile_share_the_counts_of_a_sqlite_store(
    dsh_home: Path, tmp_path: Path
) -> None:
    write_profile(dsh_home, config_lines(maxRepeats=3, store="sqlite:state/brakes.sqlite3"))
    with Brakes.from_profile() as first, Brakes.from_profile() as second:
        first.check("search", {"q": "weather"}, session_id="s")
        second.check("search", {"q": "weather"}, session_id="s")
        with pytest.raises(LoopBrakeError) as caught:
            first.check("search", {"q": "weather"}, session_id="s")
        assert caught.value.count == 3
    assert (dsh_home / "state" / "brakes.sqlite3").exists()
    # home= instead of $DSH_HOME: the relative path is under that home.
    other = tmp_path / "other-home"
    write_profile(other, config_lines(store="sqlite:state/brakes.sqlite3"))
    with Brakes.from_profile(home=other) as brakes:
        assert brakes.loop_brake is not None
        assert brakes.loop_brake.store.url == f"sqlite:{other / 'state' / 'brakes.sqlite3'}"


def test_replay_keeps_a_fresh_memory_store_whatever_the_row_says(
    run_cli: Any, dsh_home: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "calls.jsonl"
    transcript.write_text('{"tool": "search", "args": {"q": "x"}}\n' * 3, encoding="utf-8")
    row_store, env_store = tmp_path / "row.sqlite3", tmp_path / "env.sqlite3"
    for config, env in [
        (config_lines(maxRepeats=2, store=f"sqlite:{row_store}"), {}),
        (config_lines(maxRepeats=2), {ENV: f"sqlite:{env_store}"}),
    ]:
        write_profile(dsh_home, config)
        for _ in range(2):  # a store would remember the first replay's streak in the second
            done = run_cli("replay", str(transcript), "--json", "--home", str(dsh_home), env=env)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["totals"]["denied"] == 2
    assert not row_store.exists() and not env_store.exists()


def test_mcp_proxy_max_repeats_keeps_the_rows_store_and_session_ttl(tmp_path: Path) -> None:
    from tests.mcp_proxy_support import RawProxy, echo_server, proxy_argv, proxy_env

    home = tmp_path / "dsh-home"
    write_profile(home, config_lines(store="sqlite:state/brakes.sqlite3", sessionTtl=120))
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s","arguments":{}}}\n'
    argv = proxy_argv("--max-repeats", "2", server=echo_server(tmp_path / "record"))
    proxy = RawProxy(argv, proxy_env(home), tmp_path)
    proxy.send(call + call)
    assert proxy.finish() == 0, proxy.errors
    assert b'"isError":true' in proxy.output.replace(b" ", b"")  # the second: denied at 2
    with open_store(f"sqlite:{home / 'state' / 'brakes.sqlite3'}") as store:
        assert store.count_streaks() == 1
    with sqlite3.connect(home / "state" / "brakes.sqlite3") as db:
        assert db.execute("SELECT count, expires - touched FROM streaks").fetchall() == [(2, 120)]


# --- config shows where the state lives ---------------------------------------------------------


def test_config_shows_each_store_with_its_source_and_never_a_password(
    run_cli: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    patch = write_profile(
        home,
        config_lines(store="redis://:row-CANARY@db:6379/0", sessionTtl=600),
        config_lines(duplicateLimit=4),
    )
    env = {ENV: "rediss://agents:env-CANARY@cache:6380/1"}
    text = run_cli("config", "--home", str(home), env=env)
    shown = run_cli("config", "--home", str(home), "--json", env=env)
    for done in (text, shown):
        assert done.returncode == 0, done.stderr
        assert "CANARY" not in done.stdout + done.stderr
    assert (
        f"store: redis://:***@db:6379/0 (from {patch}:5; "
        f'{ENV}="rediss://agents:***@cache:6380/1" is ignored)\n'
    ) in text.stdout
    assert f"sessionTtl: 600 (from {patch}:6)\n" in text.stdout
    assert (
        '  store: "rediss://agents:***@cache:6380/1" (from the environment variable'
        f" {ENV}; the row does not set it)\n"
    ) in text.stdout
    document = json.loads(shown.stdout)
    assert document["store"] == "redis://:***@db:6379/0"
    assert document["row"]["config"]["store"] == "redis://:***@db:6379/0"
    assert document["ignoredEnv"] == [ENV]
    breaker = document["circuitBreaker"]
    assert breaker["config"]["store"] == "rediss://agents:***@cache:6380/1"
    assert breaker["config"]["sessionTtl"] == 86400
    assert breaker["sources"]["store"] == f"env {ENV}"
    assert breaker["sources"]["sessionTtl"] == "default"


def test_config_shows_a_sqlite_stores_file_and_opens_nothing(run_cli: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_profile(home, config_lines(store="sqlite:state/brakes.sqlite3"))
    done = run_cli("config", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert f"the file {home / 'state' / 'brakes.sqlite3'})\n" in done.stdout
    assert "sessionTtl: 86400 (the default)\n" in done.stdout
    assert not (home / "state").exists()


def test_config_refuses_a_store_that_can_never_work_with_its_file_and_line(
    run_cli: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    patch = write_profile(home, config_lines(maxRepeats=3, store="mongodb://:pw-CANARY@x/y"))
    done = run_cli("config", "--home", str(home))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {patch}:6: loop brake: store mongodb://:***@x/y: ")
    assert "unknown store scheme mongodb:" in done.stderr and "CANARY" not in done.stderr
    env_done = run_cli("config", "--home", str(home), env={ENV: "nope"})
    assert env_done.returncode == 2  # the row's store is still the one refused


def test_an_unreachable_store_is_one_line_and_exit_2_for_the_commands_that_apply_rows(
    tmp_path: Path,
) -> None:
    from tests.mcp_proxy_support import RawProxy, echo_server, proxy_argv, proxy_env

    home = tmp_path / "dsh-home"
    patch = write_profile(home, config_lines(store="redis://:pw-CANARY@127.0.0.1:1/0"))
    proxy = RawProxy(proxy_argv(server=echo_server(tmp_path / "record")), proxy_env(home), tmp_path)
    assert proxy.finish() == 2
    errors = proxy.errors
    assert errors.startswith(f"error: {patch}:5: loop brake: store redis://:***@127.0.0.1:1/0: ")
    assert "cannot be reached" in errors and errors.count("\n") == 1 and "CANARY" not in errors
    assert not (tmp_path / "record").exists()  # the server was never started
