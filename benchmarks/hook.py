"""One allowed hook call, as a whole process, side by side with a bare interpreter start.

    python benchmarks/hook.py [--runs N] [--quick] [--instructions] [--against DIR]

A coding-agent host starts ``dsh-loop-brake hook HOST`` for every tool call, so the hook's cost
is the whole process: interpreter start-up, imports, reading the event, the profile (from its
cache), one SQLite transaction, exit. Target: the median wall time of one allowed
``hook claude-code`` call <= 2.5x that of ``python -c pass`` with the same interpreter.

Runs are interleaved (pass, hook, pass, hook, ...) so a shared machine's slow and fast spells
fall on every kind alike, and the figures are medians. Printed side by side:

* ``python -c pass``: the floor no Python program can go below;
* ``python -c "import re, json, _sha256, _sqlite3"`` (``_sha2`` from Python 3.12): the standard
  library the hook cannot do without (``re``, which the console script pip writes imports, the
  event's JSON, CPython's own SHA-256 of the call, SQLite's C module for the state file), so the
  rest is this package's;
* the hook as ``hook install`` writes it (the console script by absolute path; ``python -m
  dsh_loop_brake`` where there is none), and as ``python -m dsh_loop_brake``;
* the hook with the circuit breaker too (a profile with its row: both brakes, one store);
* with ``--against DIR``, the same hook from another checkout of the package (``python -m``,
  ``DIR`` first on ``PYTHONPATH``), interleaved with the rest: a change side by side with the code
  before it;
* the first call after the profile changed (the cache is stale and the profile is composed with
  the harness: paid once per change, not per call).

Each hook call sends a different Bash command, so every one is allowed and counted. It ends with
the modules the hook imports that cost the most (``python -X importtime``, cumulative).
``--instructions`` adds the instructions each kind of process executes (valgrind's cachegrind):
a count a busy machine does not change, for comparing changes where wall time is too noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = 2.5
SHA256_MODULE = "_sha2" if sys.version_info >= (3, 12) else "_sha256"
STDLIB_IMPORTS = f"import re, json, {SHA256_MODULE}, _sqlite3"
STDLIB = f"python -c '{STDLIB_IMPORTS}'"
_CACHEGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")


def _event(number: int) -> bytes:
    event = json.loads((REPO_ROOT / "tests/fixtures/hooks/claude-code-bash.json").read_text())
    event["tool_input"]["command"] = f"npm test -- --shard {number}"
    return json.dumps(event).encode()


def _hook_command(home: Path) -> list[str]:
    script = Path(sys.executable).parent / "dsh-loop-brake"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "hook", "claude-code", "--home", str(home)]
    return _module_command(home)


def _module_command(home: Path) -> list[str]:
    return [sys.executable, "-m", "dsh_loop_brake", "hook", "claude-code", "--home", str(home)]


BREAKER_PATCH = """- insert:
    - id: circuit-breaker
      name: dsh-circuit-breaker
      config: {ignoreArgs: [description]}
"""


def _time(command: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or (command[-2:] != ["-c", "pass"] and b"deny" in done.stdout):
        raise SystemExit(f"unexpected result of {command}: {done.returncode} {done.stderr!r}")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each kind (default 40)")
    parser.add_argument("--quick", action="store_true", help="8 runs: a smoke test")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (needs valgrind)"
    )
    parser.add_argument(
        "--against", metavar="DIR", type=Path, help="also run the hook of the checkout in DIR"
    )
    args = parser.parse_args(argv)
    if args.against:
        args.against = args.against.resolve()  # before the processes' own directory is entered
    runs = 8 if args.quick else args.runs

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    for name in ("DSH_HOME", "DSH_LOOP_BRAKE_MAX_REPEATS", "DSH_LOOP_BRAKE_STORE"):
        env.pop(name, None)
    # An installed package has its bytecode; a checkout run with PYTHONDONTWRITEBYTECODE set (as
    # on some CI machines) would otherwise compile every module in every hook process.
    checkouts = [REPO_ROOT] + ([args.against] if args.against else [])
    for checkout in checkouts:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(checkout / "dsh_loop_brake")], check=True
        )
    with tempfile.TemporaryDirectory(prefix="dsh-hook-bench-") as directory:
        # Every process starts here, in no checkout: python -m puts the working directory first
        # on sys.path, so from a checkout it would run that checkout's package, not --against's.
        os.chdir(directory)
        home = Path(directory) / "home"
        breaker_home = Path(directory) / "with-breaker"
        patch = breaker_home / "profiles" / "default" / "cordis.patch.yml"
        patch.parent.mkdir(parents=True)
        patch.write_text(BREAKER_PATCH, encoding="utf-8")
        hook = _hook_command(home)
        kinds: dict[str, tuple[list[str], bool, dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], False, env),
            STDLIB: ([sys.executable, "-c", STDLIB_IMPORTS], False, env),
            f"hook claude-code ({'script' if hook[0].endswith('brake') else '-m'})": (
                hook,
                True,
                env,
            ),
            "python -m dsh_loop_brake hook claude-code": (_module_command(home), True, env),
            "hook claude-code, with the circuit breaker": (_hook_command(breaker_home), True, env),
        }
        if args.against:
            other = dict(env, PYTHONPATH=str(args.against))
            other_home = Path(directory) / "against"
            kinds[f"python -m ... hook claude-code ({args.against.name})"] = (
                _module_command(other_home),
                True,
                other,
            )
        for command, is_hook, command_env in kinds.values():
            if is_hook:  # composes the profile and creates the state file
                _time(command, _event(-1), command_env)
        times: dict[str, list[float]] = {name: [] for name in kinds}
        stale: list[float] = []
        number = 0
        for run in range(runs):
            for name, (command, is_hook, command_env) in kinds.items():
                number += 1
                stdin = _event(number) if is_hook else b""
                times[name].append(_time(command, stdin, command_env))
            if run % 4 == 0:  # a changed profile: the next call composes it again
                touched = home / "cordis.patch.yml"
                touched.write_text(f"# touched {run}\n")
                number += 1
                stale.append(_time(hook, _event(number), env))
        floor = statistics.median(times["python -c pass"])
        print(
            f"{sys.executable} ({sys.version.split()[0]}), {runs} interleaved runs of each "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):"
        )
        print(f"  {'':48s} {'median':>9s} {'vs pass':>8s}")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:48s} {median * 1000:7.2f} ms {median / floor:7.2f}x")
        print(
            f"  {'first call after the profile changed':48s} "
            f"{statistics.median(stale) * 1000:7.2f} ms {statistics.median(stale) / floor:7.2f}x"
            f"  ({len(stale)} runs)"
        )
        hook_name = next(name for name in times if name.startswith("hook claude-code"))
        ratio = statistics.median(times[hook_name]) / floor
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"hook vs python -c pass: {ratio:.2f}x ({verdict} the {TARGET}x target)")
        stdlib = statistics.median(times[STDLIB])
        ours = statistics.median(times[hook_name]) - stdlib
        print(f"this package's share (hook minus the stdlib it needs): {ours * 1000:.2f} ms")
        _import_profile(hook, env)
        if args.instructions:
            _instructions(kinds)
        os.chdir(REPO_ROOT)


def _instructions(kinds: dict[str, tuple[list[str], bool, dict[str, str]]]) -> None:
    """Instructions executed by one process of each kind (user space, cachegrind's I refs)."""
    counts = {}
    for number, (name, (command, is_hook, env)) in enumerate(kinds.items()):
        done = subprocess.run(
            [*_CACHEGRIND, *command],
            input=_event(-2 - number) if is_hook else b"",
            capture_output=True,
            env=env,
            check=False,
        )
        refs = [line for line in done.stderr.decode().splitlines() if "I   refs" in line]
        if not refs:
            print("instructions: valgrind is not available here")
            return
        counts[name] = int(refs[-1].split()[-1].replace(",", ""))
    floor = counts["python -c pass"]
    print("instructions executed by one process (valgrind --tool=cachegrind):")
    for name, count in counts.items():
        print(f"  {name:48s} {count / 1e6:8.1f} M {count / floor:7.2f}x")


def _import_profile(hook: list[str], env: dict[str, str]) -> None:
    """The imports of one hook call that cost the most, two levels deep, by cumulative time."""
    if hook[0] == sys.executable:
        command = [sys.executable, "-X", "importtime", *hook[1:]]
    else:
        command = [sys.executable, "-X", "importtime", *hook]
    done = subprocess.run(command, input=_event(10**6), capture_output=True, env=env, check=False)
    rows = []
    for line in done.stderr.decode().splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        if depth <= 1 and cumulative.strip().isdigit():
            rows.append((int(cumulative), "  " * depth + name.strip()))
    rows.sort(reverse=True)
    print("the imports of one hook call that cost the most (python -X importtime, cumulative):")
    for cumulative, name in rows[:12]:
        print(f"  {cumulative / 1000:7.2f} ms  {name}")


if __name__ == "__main__":
    main()
