"""benchmarks/stores.py keeps running: a smoke run (nothing here is timed)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT


def test_the_stores_benchmark_runs_every_row_on_its_smoke_settings(
    redis_url: str, cli_env: dict[str, str]
) -> None:
    script = REPO_ROOT / "benchmarks" / "stores.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--redis-url", redis_url],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    for row in (
        "MemoryStore.advance_streak",
        "LoopBrake(store=SQLiteStore).check, same call",
        "CircuitBreaker(store=SQLiteStore).check_call",
        "LoopBrake(store=RedisStore).check, same call",
        "CircuitBreaker(store=RedisStore).check_call",
        "the hashing + bare",
    ):
        assert row in done.stdout, row
    assert "SQLite " in done.stdout.split("throughput:")[1]
