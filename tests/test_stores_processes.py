"""Exact counts under many processes: 8 processes of 200 checks each, on SQLite and on Redis --
on the stores themselves, and through the brakes that use them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dsh_loop_brake.stores import open_store

WORKER = Path(__file__).with_name("_store_worker.py")
PROCESSES = 8
CALLS = 200


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'state' / 'brakes.sqlite3'}"
    address: str = request.getfixturevalue("redis_url")
    return address


def run_workers(url: str, spec: dict[str, object], cli_env: dict[str, str]) -> list[list[object]]:
    """Start the workers, let them all go at once, and collect each one's results."""
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            ready = worker.stdout.readline()
            assert ready == "ready\n", (ready, worker.stderr.read() if worker.stderr else "")
        for worker in workers:  # every worker is waiting: release them together
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = []
        for worker in workers:
            out, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err
            results.append(json.loads(out))
        return results
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def test_each_count_of_one_streak_is_handed_out_exactly_once(
    url: str, cli_env: dict[str, str]
) -> None:
    open_store(url).close()  # the workers open an existing store, as hooks mostly do
    results = run_workers(url, {"op": "advance", "session": "one", "calls": CALLS}, cli_env)
    counts = [count for result in results for count in result]
    assert sorted(counts) == list(range(1, PROCESSES * CALLS + 1))
    for result in results:  # each worker saw its own counts rise
        assert result == sorted(result)
    with open_store(url) as store:
        streak = store.read_streak("one")
        assert streak is not None and streak[1] == PROCESSES * CALLS


def test_processes_opening_a_new_store_at_once_agree(url: str, cli_env: dict[str, str]) -> None:
    # No store file (or key) yet: the workers race to create it.
    results = run_workers(url, {"op": "advance", "session": "fresh", "calls": 20}, cli_env)
    assert sorted(c for result in results for c in result) == list(range(1, PROCESSES * 20 + 1))


def judge_spec(**settings: object) -> dict[str, object]:
    return {"op": "judge", "agent": "agent-1", "calls": CALLS, "distinct": False, **settings}


def test_the_cap_admits_exactly_cap_calls_from_all_processes(
    url: str, cli_env: dict[str, str]
) -> None:
    spec = judge_spec(distinct=True, duplicate_limit=2, window=50, cap=1000)
    answers = [a for result in run_workers(url, spec, cli_env) for a in result]
    denials = [a for a in answers if a is not None]
    assert len(answers) - len(denials) == 1000
    assert Counter((k, c, lim) for k, c, lim, _ in denials) == {("cap", 1000, 1000): 600}
    assert sum(first for *_, first in denials) == 1  # one incident for the agent
    with open_store(url) as store:
        assert store.breaker_calls("agent-1") == 1000


def test_the_duplicate_limit_admits_exactly_limit_minus_one(
    url: str, cli_env: dict[str, str]
) -> None:
    spec = judge_spec(duplicate_limit=50, window=2000, cap=0)
    answers = [a for result in run_workers(url, spec, cli_env) for a in result]
    denials = [a for a in answers if a is not None]
    assert len(answers) - len(denials) == 49
    assert Counter((k, c, lim) for k, c, lim, _ in denials) == {("duplicate", 50, 50): 1551}
    assert sum(first for *_, first in denials) == 1


def test_every_allowed_call_is_in_the_window_exactly_once(
    url: str, cli_env: dict[str, str]
) -> None:
    total = PROCESSES * CALLS
    spec = judge_spec(duplicate_limit=total + 1, window=total, cap=0)
    answers = [a for result in run_workers(url, spec, cli_env) for a in result]
    assert answers == [None] * total
    with open_store(url) as store:
        assert store.breaker_calls("agent-1") == total
        digest = hashlib.sha256(b"the same call").digest()
        # The window holds all 1600: one more is the 1601st, the limit.
        denial = store.judge_call("agent-1", digest, duplicate_limit=total + 1, window=total, cap=0)
        assert denial is not None and (denial.kind, denial.count) == ("duplicate", total + 1)
        # A window one smaller drops the oldest: now it is the 1600th.
        denial = store.judge_call("agent-1", digest, duplicate_limit=total, window=total - 1, cap=0)
        assert denial is not None and denial.count == total


# --- through the brakes -------------------------------------------------------------------------


def test_through_the_loop_brake_each_count_is_handed_out_exactly_once(
    url: str, cli_env: dict[str, str]
) -> None:
    # Half the calls are denied: the counts returned and the counts of the denials between them
    # are every count from 1 to 1600, each once.
    limit = PROCESSES * CALLS // 2 + 1
    spec = {"op": "check", "session": "one", "calls": CALLS, "max_repeats": limit}
    results = run_workers(url, spec, cli_env)
    allowed = [r for result in results for r in result if isinstance(r, int)]
    denied = [r[1] for result in results for r in result if isinstance(r, list)]
    assert sorted(allowed) == list(range(1, limit))
    assert sorted(denied) == list(range(limit, PROCESSES * CALLS + 1))
    assert all(r[0] == "denied" for result in results for r in result if isinstance(r, list))


def test_through_the_circuit_breaker_the_cap_admits_exactly_cap_calls(
    url: str, cli_env: dict[str, str]
) -> None:
    spec = {"op": "check_call", "agent": "agent-1", "calls": CALLS, "cap": 1000}
    answers = [a for result in run_workers(url, spec, cli_env) for a in result]
    assert answers.count(None) == 1000
    assert Counter(tuple(a) for a in answers if a is not None) == {("cap", 1000): 600}
