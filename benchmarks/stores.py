"""What a check costs in each store, side by side with the cheapest thing the store can do.

    python benchmarks/stores.py [--rounds N] [--batch N] [--calls N] [--redis-url URL] [--quick]

Prints, measured in one run:

* memory: ``MemoryStore.advance_streak`` beside the streak update ``LoopBrake.check`` made
  inline before it had a store (a locked dict read and write of one packed int);
* SQLite: ``SQLiteStore.advance_streak`` (and ``judge_call``) beside one bare upsert statement
  (``INSERT ... ON CONFLICT DO UPDATE SET count = count + 1``) on the store's own connection, and
  a whole check through the brake, ``LoopBrake(store=SQLiteStore).check`` (hashing the call
  included; ``CircuitBreaker.check_call`` beside ``judge_call``), also beside hashing the call
  then the bare upsert (what no brake's check can do without); target: advance_streak and the
  brake's check <= 1.5x the bare upsert;
* Redis: ``RedisStore.advance_streak`` (and ``judge_call``) beside one bare round trip of a
  trivial script (``return 1``, by EVALSHA) on the store's own client, and the same checks through
  the brakes; target: advance_streak and the brake's check <= 1.25x;
* throughput with 1, 4 and 8 processes on each shared store, every process checking its own
  session as fast as it can.

Contenders are interleaved batch by batch in every round, and each ratio is the median of the
rounds' own ratios, so the shared machine's changes of speed fall on both sides alike. SQLite is
timed in CPU time of this process (its work is here, in the library and the kernel); Redis in
wall time, since a round trip is mostly waiting for the server. Without ``--redis-url`` the script
starts its own ``redis-server`` on a free loopback port, with persistence off.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_loop_brake import LoopBrake
from dsh_loop_brake._canonical import call_digest
from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
from dsh_loop_brake.stores import MemoryStore, RedisStore, SQLiteStore, Store, open_store

DIGESTS = [hashlib.sha256(f"call {n}".encode()).digest() for n in range(2)]
SESSIONS = [f"agent-{n:04d}" for n in range(1000)]
LIMITS = {"duplicate_limit": 10**9, "window": 200, "cap": 0}
# The same limits as a breaker's row, and the call the brakes check: a small, realistic one.
BREAKER = resolve_config({"duplicateLimit": 100_000, "window": 100_000, "maxCallsPerAgent": 0})
CALLS = [("search", {"q": "weather in Paris", "max_results": 5}), ("read", {"path": "a.py"})]
HASHED_UPSERT = "hashing the call, then the bare upsert"
HASHED_TRIP = "hashing the call, then the bare round trip"

Contenders = dict[str, Callable[[int], object]]


def interleaved(
    contenders: Contenders, rounds: int, batch: int, clock: Callable[[], float]
) -> dict[str, list[float]]:
    """Per contender, the cost per call of each round's batch (the first round only warms up)."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for round_number in range(rounds + 1):
        for name, work in contenders.items():
            started = clock()
            for number in range(batch):
                work(number)
            spent = (clock() - started) / batch
            if round_number:
                samples[name].append(spent)
    return samples


def report(
    title: str,
    samples: dict[str, list[float]],
    baseline: str,
    target: str = "",
    hashed: str | None = None,
) -> None:
    """Each contender's median and its ratio to ``baseline``; the checks through a brake also
    to ``hashed``, the same baseline with the call's hashing before it (what a brake's check
    cannot do without: identify the call, then one step in the store)."""
    print(f"\n{title}")
    print(f"  {'':52} {'median':>10} {'vs ' + baseline:>36}")
    base = samples[baseline]
    for name, values in samples.items():
        ratio = statistics.median(a / b for a, b in zip(values, base, strict=True))
        targeted = name.startswith(("advance", "LoopBrake"))
        mark = f"  (target {target})" if target and targeted else ""
        if hashed is not None and name.startswith(("LoopBrake", "CircuitBreaker")):
            floor = samples[hashed]
            own = statistics.median(a / b for a, b in zip(values, floor, strict=True))
            mark += f"; {own:.3f}x the hashing + {baseline}"
        print(f"  {name:52} {statistics.median(values) * 1e6:8.2f}us {ratio:35.3f}x{mark}")


def brakes_on(store: Store) -> tuple[Callable[[int], object], Callable[[int], object]]:
    """A whole check through each brake on ``store``: one session's same call, and 50 agents."""
    brake = LoopBrake(10**9, store=store)
    breaker = CircuitBreaker(BREAKER, store=store)

    def check(number: int) -> int:
        return brake.check(*CALLS[0], session_id="agent-0001")

    def check_call(number: int) -> None:
        tool, args = CALLS[number & 1]
        breaker.check_call(tool, args, agent=SESSIONS[number % 50])

    return check, check_call


def store_checks(
    store: Store,
) -> tuple[Callable[[int], object], Callable[[int], object], Callable[[int], object]]:
    """The store's own checks, the same work on every store: one session's same call again and
    again, sessions whose calls change, and 50 agents' calls judged."""

    def repeat(number: int) -> int:
        return store.advance_streak("agent-0001", DIGESTS[0])

    def mixed(number: int) -> int:
        return store.advance_streak(SESSIONS[number % 1000], DIGESTS[(number // 7) & 1])

    def judge(number: int) -> object:
        return store.judge_call(SESSIONS[number % 50], DIGESTS[number & 1], **LIMITS)

    return repeat, mixed, judge


# --- memory -----------------------------------------------------------------------------------


def memory(rounds: int, batch: int) -> None:
    store = MemoryStore()
    # What LoopBrake.check did inline before it had a store, step for step.
    lock, streaks = threading.Lock(), {}
    mask, unit = (1 << 256) - 1, 1 << 256

    def inline(number: int) -> int:
        session, call = SESSIONS[number % 1000], int.from_bytes(DIGESTS[number & 1], "big")
        lock.acquire()
        try:
            streak = streaks.get(session, 0)
            if streak & mask != call:
                streak = call
            streak += unit
            streaks[session] = streak
        finally:
            lock.release()
        return streak >> 256

    def advance(number: int) -> int:
        return store.advance_streak(SESSIONS[number % 1000], DIGESTS[number & 1])

    samples = interleaved(
        {
            "inline streak update (no store)": inline,
            "MemoryStore.advance_streak": advance,
        },
        rounds,
        batch * 10,
        time.process_time,
    )
    report("memory (CPU time per call)", samples, "inline streak update (no store)")


# --- SQLite -----------------------------------------------------------------------------------

BARE_TABLE = """CREATE TABLE IF NOT EXISTS bench_bare (
    session BLOB PRIMARY KEY, digest BLOB NOT NULL, count INTEGER NOT NULL, touched REAL NOT NULL
) WITHOUT ROWID"""
BARE_UPSERT = """INSERT INTO bench_bare (session, digest, count, touched) VALUES (?1, ?2, 1, ?3)
ON CONFLICT (session) DO UPDATE SET count = count + 1, touched = excluded.touched"""


def sqlite(directory: Path, rounds: int, batch: int) -> None:
    # The breaker's checks write several pages each; in a file of their own they do not make
    # the WAL checkpoint more often under the streak checks being compared.
    sqlite_group(directory / "streaks.sqlite3", "advance_streak", rounds, batch)
    sqlite_group(directory / "windows.sqlite3", "judge_call", rounds, batch)


def sqlite_group(path: Path, contender: str, rounds: int, batch: int) -> None:
    store = SQLiteStore(path)
    link, db = store._acquire()  # the store's own connection (this thread's): the same one
    store._release(link)
    db.execute(BARE_TABLE)
    keys = [s.encode() for s in SESSIONS]

    def bare(number: int) -> None:
        db.execute(BARE_UPSERT, (keys[number % 1000], DIGESTS[number & 1], time.time()))

    def hashed_bare(number: int) -> None:
        call_digest(*CALLS[number & 1])
        bare(number)

    repeat, mixed, judge = store_checks(store)
    check, check_call = brakes_on(store)
    contenders: Contenders = {"bare upsert statement": bare, HASHED_UPSERT: hashed_bare}
    if contender == "advance_streak":
        contenders["advance_streak, one session, same call"] = repeat
        contenders["advance_streak, 300 sessions, calls change"] = mixed
        contenders["LoopBrake(store=SQLiteStore).check, same call"] = check
    else:
        contenders["judge_call, 50 agents, window 200"] = judge
        contenders["CircuitBreaker(store=SQLiteStore).check_call"] = check_call
    for number in range(2000):  # every session exists: updates, not inserts, are measured
        for work in contenders.values():
            work(number)
    samples = interleaved(contenders, rounds, batch, time.process_time)
    report(
        f"SQLite {contender} (CPU time per call, WAL, synchronous=NORMAL)",
        samples,
        "bare upsert statement",
        "<= 1.5x",
        HASHED_UPSERT,
    )
    store.close()


# --- Redis ------------------------------------------------------------------------------------


def redis_store(url: str, rounds: int, batch: int) -> None:
    store = RedisStore(url, prefix="bench:")
    store.ping()
    trivial = store.client.register_script("return 1")
    trivial()

    def bare(number: int) -> object:
        return trivial()

    def hashed_bare(number: int) -> object:
        call_digest(*CALLS[number & 1])
        return trivial()

    repeat, mixed, judge = store_checks(store)
    check, check_call = brakes_on(store)
    for group in (
        {
            "advance_streak, one session, same call": repeat,
            "advance_streak, 300 sessions, calls change": mixed,
            "LoopBrake(store=RedisStore).check, same call": check,
        },
        {
            "judge_call, 50 agents, window 200": judge,
            "CircuitBreaker(store=RedisStore).check_call": check_call,
        },
    ):
        contenders: Contenders = {
            "bare script round trip (return 1)": bare,
            HASHED_TRIP: hashed_bare,
            **group,
        }
        for number in range(2000):
            for work in contenders.values():
                work(number)
        samples = interleaved(contenders, rounds, batch, time.perf_counter)
        what = (
            "advance_streak"
            if "LoopBrake(store=RedisStore).check, same call" in group
            else "judge_call"
        )
        report(
            f"Redis {what} (wall time per call, loopback)",
            samples,
            "bare script round trip (return 1)",
            "<= 1.25x",
            HASHED_TRIP,
        )
    store.forget_streaks()
    store.forget_breaker()
    store.close()


# --- throughput with several processes --------------------------------------------------------


def worker(url: str, session: str, calls: int) -> None:
    store = open_store(url)
    store.advance_streak(session, DIGESTS[0])  # connected and warm before the start
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.time()
    for _ in range(calls):
        store.advance_streak(session, DIGESTS[0])
    print(json.dumps([started, time.time()]), flush=True)


def throughput(url: str, processes: int, calls: int) -> float:
    """Calls per second of ``processes`` workers, each checking its own session."""
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url, f"worker-{n}", str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for process in workers:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    spans = [json.loads(process.communicate()[0]) for process in workers]
    return processes * calls / (max(end for _, end in spans) - min(start for start, _ in spans))


def throughputs(urls: dict[str, str], calls: int, repeats: int) -> None:
    print(
        f"\nthroughput: every process checks its own session, {calls} calls each"
        f" (median of {repeats} runs)"
    )
    print(f"  {'store':10} {'1 process':>14} {'4 processes':>14} {'8 processes':>14}")
    for name, url in urls.items():
        figures = []
        for processes in (1, 4, 8):
            runs = [throughput(url, processes, calls) for _ in range(repeats)]
            figures.append(f"{statistics.median(runs):,.0f}/s")
        print(f"  {name:10} {figures[0]:>14} {figures[1]:>14} {figures[2]:>14}")


# --- a redis-server of our own ----------------------------------------------------------------


def start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return server, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("redis-server did not start")


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["--worker"]:
        worker(arguments[1], arguments[2], int(arguments[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--calls", type=int, default=3000, help="per process, for throughput")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs per figure")
    parser.add_argument("--redis-url", help="an existing server to use (its keys bench:*)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny numbers")
    options = parser.parse_args(arguments)
    if options.quick:
        options.rounds, options.batch, options.calls, options.repeats = 2, 20, 50, 1

    print(f"Python {sys.version.split()[0]} on {sys.platform}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as directory:
        server: subprocess.Popen[bytes] | None = None
        url = options.redis_url
        if url is None:
            server, url = start_redis(directory)
        try:
            memory(options.rounds, options.batch)
            sqlite(Path(directory), options.rounds, options.batch)
            redis_store(url, options.rounds, options.batch)
            sqlite_url = f"sqlite:{Path(directory) / 'throughput.sqlite3'}"
            open_store(sqlite_url).close()
            throughputs({"SQLite": sqlite_url, "Redis": url}, options.calls, options.repeats)
        finally:
            if server is not None:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
