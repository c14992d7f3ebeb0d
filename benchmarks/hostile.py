"""Hostile arguments: the brake's cost grows linearly with the size of what it is handed.

    python benchmarks/hostile.py [--repeats N]

Times ``LoopBrake.check`` on huge strings (ASCII, and non-ASCII with escapes) and on deep nesting
at several sizes, side by side with the standard-library floor (``json.dumps`` + sha256, which
cannot do deep nesting at all: it raises ``RecursionError``), and prints the cost per unit of size.
Linear time shows as a flat cost per MB (or per level of nesting) across sizes. Peak memory
relative to the input (the string's own size in memory) is printed for the strings (tracemalloc).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_loop_brake import LoopBrake

MB = 1024 * 1024


def floor(name: str, args: Any) -> str:
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((name + "\n" + text).encode()).hexdigest()


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def nested(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth - 1):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def check_once(args: Any) -> Callable[[], object]:
    brake = LoopBrake(max_repeats=1_000_000)
    return lambda: brake.check("write_file", args)


def peak_ratio(args: Any, size: int) -> float:
    brake = LoopBrake(max_repeats=1_000_000)
    brake.check("write_file", args)
    tracemalloc.start()
    tracemalloc.reset_peak()
    brake.check("write_file", args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / size


def strings(repeats: int) -> None:
    print("Huge strings: LoopBrake.check vs the floor (json.dumps + sha256), per MB")
    print(f"{'input':<28}{'check':>12}{'per MB':>12}{'floor':>12}{'ratio':>8}{'peak/input':>12}")
    for label, unit in (("ASCII", "x"), ("non-ASCII + escapes", 'ü\n"€😀')):
        for megabytes in (1, 2, 5, 10):
            text = unit * (megabytes * MB // len(unit.encode()))
            args = {"content": text, "path": "/tmp/big.txt"}
            ours = median_seconds(check_once(args), repeats)
            base = median_seconds(lambda a=args: floor("write_file", a), repeats)
            name = f"{label} {megabytes} MB"
            print(
                f"{name:<28}{ours * 1e3:>10.1f}ms{ours * 1e3 / megabytes:>10.2f}ms"
                f"{base * 1e3:>10.1f}ms{ours / base:>7.2f}x"
                f"{peak_ratio(args, sys.getsizeof(text)):>11.2f}x"
            )


def nesting(repeats: int) -> None:
    print("\nDeep nesting: LoopBrake.check per level (the floor raises RecursionError)")
    print(f"{'depth':>10}{'check':>12}{'per level':>16}")
    for depth in (10_000, 25_000, 50_000, 100_000):
        args = nested(depth)
        ours = median_seconds(check_once(args), repeats)
        print(f"{depth:>10,}{ours * 1e3:>10.1f}ms{ours * 1e6 / depth:>14.1f}µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per size (median)")
    options = parser.parse_args()
    strings(options.repeats)
    nesting(options.repeats)


if __name__ == "__main__":
    main()
