"""Per-call cost of call identity and the brake, side by side with the floor and rfc8785.

    python benchmarks/identity.py [--repeats N] [--loops N] [--detail] [--quick]

Prints, measured in one run:

* for one corpus of realistic tool-call arguments: the floor, ``sha256(name + "\\n" +
  json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False))`` -- hashing the
  same call with the standard library, not exactly right (Python float and key formatting) but
  the cheapest honest baseline; ``call_hash`` and ``LoopBrake.check`` (this package, exact); the
  ``rfc8785`` package (a peer JCS implementation) plus the same SHA-256;
* the same contenders on large arguments: 10,000 small objects in a list, and embeddings of
  1,536 floats of several magnitudes (the forms in which Python's repr and JavaScript's
  Number::toString differ);
* bytes per session held by a brake for 100,000 sessions (tracemalloc, session-id string included).

Every figure is a median over repeats; each repeat times every contender back to back, so the
ratios compare like with like. Targets (SPEC §7): call_hash <= 1.0x the floor and check <= 1.25x
on realistic calls, both <= 1.5x on the large arguments, <= 256 bytes per session.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_loop_brake import LoopBrake, call_hash

try:
    import rfc8785
except ImportError:  # pragma: no cover - optional peer
    rfc8785 = None

EDIT_OLD = """    def check(self, tool_name, args, *, session_id="default"):
        digest = _call_digest(tool_name, args)
        with self._lock:
            previous = self._streaks.get(session_id)
            count = previous[1] + 1 if previous and previous[0] == digest else 1
"""
EDIT_NEW = EDIT_OLD.replace("previous[1] + 1", "previous[1] + 1  # the streak grows")
WRITE_CONTENT = "\n".join(
    f'def handler_{i}(request):\n    """Handle request {i}."""\n'
    f"    return {{'ok': True, 'n': {i}}}\n"
    for i in range(12)
)

# (tool, arguments): what agents actually send -- shell commands with descriptions, file paths and
# ranges, searches, edits with multi-line strings, nested options, floats, non-ASCII text.
CORPUS: list[tuple[str, Any]] = [
    (
        "Bash",
        {
            "command": "git status --porcelain && git diff --stat HEAD~1",
            "description": "Show working tree status and what the last commit changed",
            "timeout": 120000,
        },
    ),
    (
        "Bash",
        {
            "command": "pytest -q tests/test_loop_brake_counting.py -k streak",
            "description": "Run the streak tests",
            "run_in_background": False,
        },
    ),
    (
        "Read",
        {
            "file_path": "/home/dev/projects/dsh/dsh_loop_brake/loop_brake.py",
            "offset": 120,
            "limit": 80,
        },
    ),
    ("read_file", {"path": "src/app/routes/users.py", "start_line": 1, "end_line": 200}),
    (
        "Grep",
        {
            "pattern": r"def (check|reset)\(",
            "path": "dsh_loop_brake/",
            "glob": "*.py",
            "output_mode": "content",
            "-n": True,
            "-C": 2,
        },
    ),
    (
        "web_search",
        {
            "query": "python asyncio gather return_exceptions cancellation semantics",
            "max_results": 5,
            "recency_days": 365,
        },
    ),
    ("search", {"q": "weather"}),
    (
        "Edit",
        {
            "file_path": "/home/dev/projects/dsh/dsh_loop_brake/loop_brake.py",
            "old_string": EDIT_OLD,
            "new_string": EDIT_NEW,
            "replace_all": False,
        },
    ),
    ("Write", {"file_path": "/home/dev/projects/app/handlers.py", "content": WRITE_CONTENT}),
    (
        "http_request",
        {
            "url": "https://api.example.com/v2/orders",
            "method": "POST",
            "headers": {"Content-Type": "application/json", "X-Request-Id": "7f3a9c"},
            "body": {
                "items": [{"sku": "A-100", "qty": 2}, {"sku": "B-7", "qty": 1}],
                "coupon": None,
                "gift": False,
            },
            "retry": {"attempts": 3, "backoff": 1.5, "on": [502, 503, 504]},
        },
    ),
    (
        "generate_image",
        {
            "prompt": "a lighthouse at dusk, oil painting",
            "width": 1024,
            "height": 768,
            "guidance": 7.5,
            "steps": 30,
            "seed": 42,
        },
    ),
    (
        "get_forecast",
        {"latitude": 48.8566, "longitude": 2.3522, "days": 3, "units": "metric", "threshold": 0.25},
    ),
    (
        "llm_call",
        {
            "model": "deepseek-chat",
            "temperature": 0.7,
            "top_p": 1.0,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "Summarise the build log."}],
        },
    ),
    ("web_search", {"query": "m\u00e9t\u00e9o \u00e0 Paris demain", "lang": "fr"}),
    (
        "write_note",
        {
            "path": "/\u6570\u636e/\u62a5\u544a.md",
            "text": "\u4f60\u597d\uff0c\u4e16\u754c\u3002"
            "\u4eca\u5929\u7684\u4efb\u52a1\u5df2\u5b8c\u6210\u3002",
        },
    ),
    ("send_message", {"channel": "#ops", "text": "Deploy finished \u2705 \U0001f680 (build 1432)"}),
    (
        "TodoWrite",
        {
            "todos": [
                {
                    "content": "Write golden vectors",
                    "status": "completed",
                    "activeForm": "Writing vectors",
                },
                {
                    "content": "Benchmark call_hash",
                    "status": "in_progress",
                    "activeForm": "Benchmarking",
                },
                {
                    "content": "Document the library API",
                    "status": "pending",
                    "activeForm": "Documenting",
                },
            ]
        },
    ),
    ("list_directory", {"path": ".", "recursive": True, "ignore": ["node_modules", ".git"]}),
    ("noop", {}),
]


def large_arguments() -> list[tuple[str, str, Any]]:
    """(label, tool, arguments): large calls, generated the same way on every run."""
    rng = random.Random(2026)
    embedding = [rng.gauss(0, 0.025) for _ in range(1536)]  # like OpenAI's: a few below 1e-4
    return [
        (
            "10,000 small objects",
            "upsert_rows",
            {
                "table": "items",
                "rows": [
                    {
                        "id": i,
                        "name": f"item-{i}",
                        "done": i % 3 == 0,
                        "score": round(rng.random(), 4),
                    }
                    for i in range(10_000)
                ],
            },
        ),
        (
            "10,000 objects, any floats",
            "upsert_rows",
            {
                "table": "items",
                "rows": [
                    {"id": i, "p": rng.random() ** 3, "weight": float(i % 7)} for i in range(10_000)
                ],
            },
        ),
        ("embedding of 1,536 floats", "store_vector", {"id": "doc-7", "vector": embedding}),
        (
            "  the same, all below 1e-7",
            "store_vector",
            {"id": "doc-7", "vector": [x * 1e-7 for x in embedding]},
        ),
        (
            "  the same, of every magnitude",
            "store_vector",
            {"id": "doc-7", "vector": [x * 10.0 ** rng.randint(-10, 2) for x in embedding]},
        ),
        (
            "  the same, all 1e-6 to 1e-4",
            "store_vector",
            {"id": "doc-7", "vector": [x * 1e-3 for x in embedding]},
        ),
    ]


FLOOR = "floor (json.dumps + sha256)"
PEER = "rfc8785 + sha256"


def floor(tool: str, args: Any) -> str:
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((tool + "\n" + text).encode()).hexdigest()


def peer(tool: str, args: Any) -> str:
    assert rfc8785 is not None
    return hashlib.sha256(tool.encode() + b"\n" + rfc8785.dumps(args)).hexdigest()


Medians = dict[str, float]


def contenders() -> dict[str, Callable[[str, Any], Any]]:
    brake = LoopBrake(10**9)

    def check(tool: str, args: Any) -> int:
        return brake.check(tool, args, session_id="agent-1")

    named: dict[str, Callable[[str, Any], Any]] = {
        FLOOR: floor,
        "call_hash": call_hash,
        "LoopBrake.check": check,
    }
    if rfc8785 is not None:
        named[PEER] = peer
    return named


def time_contenders(repeats: int, loops: int) -> tuple[Medians, list[Medians]]:
    """Per contender, the median over ``repeats`` passes of the mean per-call CPU time over the
    corpus; and the same median for each corpus entry on its own.

    Contenders are interleaved call batch by call batch (each corpus entry is timed for every
    contender back to back), so load elsewhere on the machine touches all of them alike; CPU time
    of this process (``time.process_time``) rather than wall time keeps other processes out of it.
    """
    contenders_ = contenders()
    clock = time.process_time
    samples: dict[str, list[float]] = {name: [] for name in contenders_}
    entry_samples = [{name: [] for name in contenders_} for _ in CORPUS]
    gc.disable()
    try:
        for repeat in range(repeats + 1):
            spent = dict.fromkeys(contenders_, 0.0)
            for index, (tool, args) in enumerate(CORPUS):
                for name, function in contenders_.items():
                    started = clock()
                    for _ in range(loops):
                        function(tool, args)
                    seconds = clock() - started
                    spent[name] += seconds
                    if repeat:
                        entry_samples[index][name].append(seconds / loops)
            if repeat:  # the first pass only warms up
                for name, seconds in spent.items():
                    samples[name].append(seconds / (loops * len(CORPUS)))
    finally:
        gc.enable()
    overall = {name: statistics.median(values) for name, values in samples.items()}
    per_entry = [
        {name: statistics.median(values) for name, values in entry.items()}
        for entry in entry_samples
    ]
    return overall, per_entry


def time_large(repeats: int) -> list[tuple[float, Medians]]:
    """Per large argument: the floor's median CPU time per call, and each contender's median
    ratio to the floor, over ``repeats`` rounds in which every contender makes the call once,
    back to back (a ratio of one round's own times, so a slow spell touches both alike)."""
    contenders_ = contenders()
    clock = time.process_time
    results = []
    gc.disable()
    try:
        for _label, tool, args in large_arguments():
            times: dict[str, list[float]] = {name: [] for name in contenders_}
            for repeat in range(repeats + 1):
                for name, function in contenders_.items():
                    started = clock()
                    function(tool, args)
                    if repeat:  # the first round only warms up
                        times[name].append(clock() - started)
            ratios = {
                name: statistics.median(
                    spent / base for spent, base in zip(values, times[FLOOR], strict=True)
                )
                for name, values in times.items()
            }
            results.append((statistics.median(times[FLOOR]), ratios))
    finally:
        gc.enable()
    return results


def shape(args: Any) -> str:
    """How many containers (objects and arrays) a call's arguments hold, and whether floats."""
    containers, floats, pending = 0, False, [args]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            containers += 1
            pending += value
        floats = floats or isinstance(value, float)
    return f"{containers} container{'s' * (containers != 1)}" + (", floats" if floats else "")


def bytes_per_session(sessions: int, make_id: Callable[[int], str]) -> float:
    args = {"path": "src/app.py", "offset": 1, "limit": 200}
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        brake = LoopBrake()
        for index in range(sessions):
            brake.check("read_file", args, session_id=make_id(index))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(brake) == sessions
    return held / sessions


def check_agreement() -> None:
    # The floor is not exact (Python float formatting, code-point key order); say where it differs.
    differ = sum(floor(tool, args) != call_hash(tool, args) for tool, args in CORPUS)
    print(
        f"corpus: {len(CORPUS)} tool calls; the floor hashes {differ} of them differently "
        "(Python float formatting), call_hash is exact"
    )
    if rfc8785 is not None:
        same = sum(peer(tool, args) == call_hash(tool, args) for tool, args in CORPUS)
        print(f"rfc8785 agrees with call_hash on {same} of {len(CORPUS)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--loops", type=int, default=100)
    parser.add_argument("--large-repeats", type=int, default=21)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny numbers")
    parser.add_argument("--detail", action="store_true", help="also the ratios per corpus entry")
    options = parser.parse_args(argv)
    if options.quick:
        options.repeats, options.loops, options.sessions = 2, 3, 2_000
        options.large_repeats = 1

    print(f"Python {sys.version.split()[0]} on {sys.platform}")
    check_agreement()
    medians, per_entry = time_contenders(options.repeats, options.loops)
    floor_time = medians[FLOOR]
    print(
        f"\nper call (CPU time): median of {options.repeats} passes over the corpus, "
        f"{options.loops} calls of each entry per contender per pass"
    )
    print(f"{'':30} {'median':>10} {'vs floor':>9}")
    for name, seconds in medians.items():
        print(f"{name:30} {seconds * 1e6:8.2f}us {seconds / floor_time:8.2f}x")
    if PEER in medians:
        peer_time = medians[PEER]
        print(
            f"call_hash is {peer_time / medians['call_hash']:.2f}x faster than rfc8785; "
            f"check is {peer_time / medians['LoopBrake.check']:.2f}x faster"
        )

    if options.detail:
        print(f"\n{'entry':16} {'shape':22} {'floor':>8} {'call_hash':>10} {'check':>7}")
        for (tool, args), entry in zip(CORPUS, per_entry, strict=True):
            print(
                f"{tool:16} {shape(args):22} {entry[FLOOR] * 1e6:6.2f}us "
                f"{entry['call_hash'] / entry[FLOOR]:9.2f}x "
                f"{entry['LoopBrake.check'] / entry[FLOOR]:6.2f}x"
            )

    print(
        f"\nlarge arguments (CPU time): the floor's median per call, and the median over "
        f"{options.large_repeats} rounds of each contender's ratio to the floor in that round"
    )
    header = f"{'':30} {'floor':>9} {'call_hash':>10} {'check':>7}"
    print(header + (f" {'rfc8785':>8}" if rfc8785 is not None else ""))
    for (label, _tool, _args), (floor_time, ratios) in zip(
        large_arguments(), time_large(options.large_repeats), strict=True
    ):
        line = (
            f"{label:30} {floor_time * 1e3:7.2f}ms {ratios['call_hash']:9.2f}x "
            f"{ratios['LoopBrake.check']:6.2f}x"
        )
        print(line + (f" {ratios[PEER]:7.2f}x" if PEER in ratios else ""))

    print(f"\nmemory for {options.sessions:,} sessions (tracemalloc, session-id strings included)")
    for label, make_id in [
        ("uuid4 ids (36 chars)", lambda i: str(uuid.UUID(int=i + (1 << 120), version=4))),
        ("short ids ('agent-000042')", lambda i: f"agent-{i:06d}"),
    ]:
        print(f"{label:30} {bytes_per_session(options.sessions, make_id):8.1f} bytes/session")


if __name__ == "__main__":
    main()
