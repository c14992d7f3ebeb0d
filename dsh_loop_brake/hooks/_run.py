"""The hook process: ``dsh-loop-brake hook HOST [--profile NAME] [--home DIR]``.

One call, from the host's event to its exit code:

1. the arguments (read by hand: argparse alone would cost a good part of the time budget);
2. the event on standard input (:mod:`._event`): the call and its session; below 1 MiB the call
   is hashed with CPython's own SHA-256 rather than OpenSSL's, which costs more to load than
   to use once (:mod:`dsh_loop_brake._digest`);
3. the profile's ``loop-brake`` and ``circuit-breaker`` rows (:mod:`._profile`, cached as
   composed), applied as the plugins apply them (:mod:`._apply`): ``LoopBrake`` and
   ``CircuitBreaker`` on the stores the rows name (by default one SQLite file in the dsh home);
4. the check: the loop brake first, then the circuit breaker with the hook's session as its
   agent, each one atomic step in its store;
5. the answer: nothing on standard output when the call may run (the host's own permission
   rules then decide, as without the hook), the host's deny JSON with the denial message when
   it may not. Both exit 0. A denial that cannot be written (standard output closed or a broken
   pipe) exits 1 with one line on standard error saying so: the call was counted, and the host
   runs it.

When the hook cannot judge the call (bad input, an unusable configuration, a store it cannot
open or that fails inside the check) it exits 1 with one line on standard error and nothing on
standard output: each host shows the line and runs the call. It never exits 2, which the hosts
read as "block".
"""

from __future__ import annotations

import os
import sys

from dsh_loop_brake._digest import CPYTHON_SHA256_BELOW, hash_with_cpython_sha256
from dsh_loop_brake.hooks._errors import HookError, HookUsageError
from dsh_loop_brake.hooks._event import read_event
from dsh_loop_brake.hooks._hosts import HOST_NAMES, HOSTS
from dsh_loop_brake.hooks._paths import check_profile_name, home_directory, json_shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from dsh_loop_brake.hooks._event import ToolCallEvent
    from dsh_loop_brake.hooks._hosts import Host

__all__ = ["EXIT_ALLOWED_OR_DENIED", "EXIT_FAILED_OPEN", "judge", "main"]

EXIT_ALLOWED_OR_DENIED = 0
EXIT_FAILED_OPEN = 1
PROG = "dsh-loop-brake hook"


USAGE = f"""usage: {PROG} {{{",".join(HOST_NAMES)}}} [--profile NAME] [--home DIR]

Run by the host before each tool call, with its pre-tool-use event on standard input: prints the
host's deny decision when the call is one too many, nothing when it may run (exit 0 both), and
one line on standard error with exit 1 when it cannot judge the call (the host then runs it).
Set it up with `dsh-loop-brake hook install HOST`; see `dsh-loop-brake hook --help`.
"""


def main(argv: Sequence[str]) -> int:
    """Run one hook call; ``argv`` is what follows ``hook`` on the command line."""
    if "-h" in argv[1:] or "--help" in argv[1:]:  # a person asking, not a host calling
        sys.stdout.write(USAGE)
        return EXIT_ALLOWED_OR_DENIED
    try:
        host, profile, home = parse_arguments(argv)
        stdin = sys.stdin
        if stdin is None:
            raise HookError("there is no standard input; the host sends its event there")
        if stdin.isatty():
            raise HookError(
                f"standard input is a terminal: {host.title} runs this command before each "
                f"tool call with its {host.event} event on standard input; to set it up, run "
                f"`dsh-loop-brake hook install {host.name}`"
            )
        event = read_event(stdin.buffer, host)
        if event.size < CPYTHON_SHA256_BELOW:  # before judge imports the core: see _digest
            hash_with_cpython_sha256()
        message = judge(event, profile, home)
        if message is not None and not _write_answer(host.deny_output(message)):
            return _not_written()
    except HookError as exc:
        return _failed(str(exc))
    except ImportError as exc:  # a broken installation: which module is missing says what to fix
        return _failed(f"cannot import {exc.name or 'a module'} ({type(exc).__name__}); reinstall")
    except Exception as exc:  # our own bug: fail open all the same, and say only its type
        return _failed(f"internal error ({type(exc).__name__})")
    except KeyboardInterrupt:
        return _failed("interrupted")
    return EXIT_ALLOWED_OR_DENIED


def _write_answer(answer: bytes) -> bool:
    """Write the deny JSON to standard output as bytes; ``False`` when it cannot be written
    (no standard output, a closed or broken pipe)."""
    try:
        stream = sys.stdout.buffer  # AttributeError: started with no standard output at all
        stream.write(answer)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _not_written() -> int:
    """The call was counted and denied, but the host never got the answer: it runs the call."""
    _say(
        "the call was denied but the answer could not be written (stdout closed); "
        "the host runs the call"
    )
    return EXIT_FAILED_OPEN


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"{PROG}: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _failed(message: str) -> int:
    _say(f"{' '.join(message.split())}; the call was not judged (fail open)")
    return EXIT_FAILED_OPEN


def parse_arguments(argv: Sequence[str]) -> tuple[Host, str, str]:
    """``HOST [--profile NAME] [--home DIR]`` (also ``--profile=NAME``) as host, profile, home."""
    if not argv:
        raise HookUsageError(
            f"give the host: `{PROG} {'|'.join(HOST_NAMES)}` (or `hook install HOST`)"
        )
    name, rest = argv[0], list(argv[1:])
    host = HOSTS.get(name)
    if host is None:
        raise HookUsageError(
            f"unknown host {json_shown(name)}; the hosts are {', '.join(HOST_NAMES)} "
            "(see `dsh-loop-brake hook --help`)"
        )
    values: dict[str, str] = {}
    while rest:
        option = rest.pop(0)
        key, equals, value = option.partition("=")
        if key not in ("--profile", "--home"):
            raise HookUsageError(
                f"unknown option {json_shown(option)}; `{PROG} {host.name}` takes --profile "
                "NAME and --home DIR"
            )
        if not equals:
            if not rest:
                raise HookUsageError(f"{key} needs a value")
            value = rest.pop(0)
        if key == "--home" and not value.strip():
            raise HookUsageError(
                "--home is empty; give a directory, or leave --home out to use $DSH_HOME or ~/.dsh"
            )
        values[key] = value
    profile = check_profile_name(values.get("--profile", "default"))
    return host, profile, home_directory(values.get("--home"))


def judge(
    event: ToolCallEvent, profile: str, home: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """Count the call; return the denial message, or ``None`` when the call may run."""
    from dsh_loop_brake.hooks._profile import load_profile

    rows = load_profile(profile, home)
    loop, breaker = rows.loop_brake, rows.circuit_breaker
    if loop is not None and loop.disabled and (breaker is None or breaker.disabled):
        return None  # nothing to apply: not even the store is opened
    from dsh_loop_brake.hooks._apply import apply_rows

    brakes = apply_rows(rows, home, os.environ if environ is None else environ)
    return brakes.check(event.tool_name, event.tool_input, event.session)
