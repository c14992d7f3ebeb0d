"""A worker process for the store tests: ``python _store_worker.py URL SPEC``.

It opens the store, prints ``ready``, waits for a line on standard input (so that every worker
starts at once), runs SPEC's operations and prints their results as one JSON line. SPEC is JSON:
``{"op": "advance", "session": ..., "calls": N}`` or ``{"op": "judge", "agent": ..., "calls": N,
"duplicate_limit": L, "window": W, "cap": C, "distinct": bool}`` on the store itself, or through
the brakes: ``{"op": "check", "session": ..., "calls": N, "max_repeats": M}`` (``LoopBrake.check``;
a result is the count returned, or ``["denied", count]``) and ``{"op": "check_call", "agent": ...,
"calls": N, "cap": C}`` (``CircuitBreaker.check_call`` of distinct calls; ``None`` or
``[kind, count]``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from dsh_loop_brake.stores import open_store


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def main() -> None:
    url, spec = sys.argv[1], json.loads(sys.argv[2])
    store = open_store(url)
    print("ready", flush=True)
    sys.stdin.readline()
    results: list[object] = []
    if spec["op"] == "check":
        from dsh_loop_brake import LoopBrake, LoopBrakeError

        brake = LoopBrake(spec["max_repeats"], store=store)
        for _ in range(spec["calls"]):
            try:
                results.append(brake.check("search", {"q": "weather"}, session_id=spec["session"]))
            except LoopBrakeError as denial:
                results.append(["denied", denial.count])
        assert brake.store_errors == 0
    elif spec["op"] == "check_call":
        from dsh_loop_brake.circuit_breaker import (
            CircuitBreaker,
            CircuitBreakerError,
            resolve_config,
        )

        breaker = CircuitBreaker(resolve_config({"maxCallsPerAgent": spec["cap"]}), store=store)
        for i in range(spec["calls"]):
            try:
                breaker.check_call("fetch", {"page": f"{os.getpid()} {i}"}, agent=spec["agent"])
                results.append(None)
            except CircuitBreakerError as denial:
                results.append([denial.kind, denial.count])
        assert breaker.store_errors == 0
    elif spec["op"] == "advance":
        digest = _digest('search\n{"q":"weather"}')
        for _ in range(spec["calls"]):
            results.append(store.advance_streak(spec["session"], digest))
    else:
        for i in range(spec["calls"]):
            call = f"call {os.getpid()} {i}" if spec["distinct"] else "the same call"
            denial = store.judge_call(
                spec["agent"],
                _digest(call),
                duplicate_limit=spec["duplicate_limit"],
                window=spec["window"],
                cap=spec["cap"],
            )
            results.append(
                None if denial is None else [denial.kind, denial.count, denial.limit, denial.first]
            )
    store.close()
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
