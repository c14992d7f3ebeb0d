"""The hook process: ``dsh-loop-brake hook HOST [--profile NAME] [--home DIR]``.

One call, from the host's event to its exit code:

1. the arguments (read by hand: argparse alone would cost a good part of the time budget);
2. the event on standard input (:mod:`._event`): the call and its session;
3. the profile's ``loop-brake`` and ``circuit-breaker`` rows (:mod:`._profile`, cached), with
   ``maxRepeats`` and ``store`` resolved from the environment where the row leaves them out;
4. the check, in one transaction of the state file (:mod:`._state`): the loop brake first,
   then the circuit breaker with the hook's session as its agent;
5. the answer: nothing on standard output when the call may run (the host's own permission
   rules then decide, as without the hook), the host's deny JSON with the denial message when
   it may not. Both exit 0.

When the hook cannot judge the call (bad input, an unusable configuration, a state file it
cannot use) it exits 1 with one line on standard error and nothing on standard output: each
host shows the line and runs the call. It never exits 2, which the hosts read as "block".
"""

from __future__ import annotations

import os
import sys

from dsh_loop_brake.hooks._errors import HookError, HookUsageError
from dsh_loop_brake.hooks._event import read_event
from dsh_loop_brake.hooks._hosts import HOST_NAMES, HOSTS
from dsh_loop_brake.hooks._paths import (
    DEFAULT_STATE_FILE,
    check_profile_name,
    home_directory,
    json_shown,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from dsh_loop_brake.hooks._event import ToolCallEvent
    from dsh_loop_brake.hooks._hosts import Host
    from dsh_loop_brake.hooks._profile import RowSettings
    from dsh_loop_brake.hooks._state import BreakerCall, State, Verdict

__all__ = [
    "EXIT_ALLOWED_OR_DENIED",
    "EXIT_FAILED_OPEN",
    "STORE_ENV",
    "judge",
    "main",
    "state_of",
]

EXIT_ALLOWED_OR_DENIED = 0
EXIT_FAILED_OPEN = 1
STORE_ENV = "DSH_LOOP_BRAKE_STORE"
DEFAULT_SESSION_TTL = 86400
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
        message = judge(event, profile, home)
        if message is not None:
            sys.stdout.write(host.deny_output(message))
            sys.stdout.flush()
    except HookError as exc:
        return _failed(str(exc))
    except ImportError as exc:  # a broken installation: which module is missing says what to fix
        return _failed(f"cannot import {exc.name or 'a module'} ({type(exc).__name__}); reinstall")
    except Exception as exc:  # our own bug: fail open all the same, and say only its type
        return _failed(f"internal error ({type(exc).__name__})")
    except KeyboardInterrupt:
        return _failed("interrupted")
    return EXIT_ALLOWED_OR_DENIED


def _failed(message: str) -> int:
    line = " ".join(message.split())
    try:
        sys.stderr.write(f"{PROG}: {line}; the call was not judged (fail open)\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
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
    from dsh_loop_brake.hooks._profile import RowSettings, load_profile

    env = os.environ if environ is None else environ
    rows = load_profile(profile, home)
    # No loop-brake row in the profile: the package's own bundle row, i.e. the defaults.
    loop = RowSettings(None) if rows.loop_brake is None else rows.loop_brake
    breaker = rows.circuit_breaker
    if breaker is not None and (breaker.disabled or not (breaker.config or {}).get("enabled")):
        breaker = None
    if loop.disabled and breaker is None:
        return None

    from dsh_loop_brake._canonical import call_digest

    tool, arguments, session = event.tool_name, event.tool_input, event.session
    max_repeats = digest = loop_state = None
    if not loop.disabled:
        max_repeats = _max_repeats(loop, env)
        digest = _digest(call_digest, tool, arguments)
        loop_state = state_of(loop, home, env)
    call = breaker_state = None
    if breaker is not None:
        call = _breaker_call(breaker, tool, arguments, call_digest)
        if call is not None:
            breaker_state = state_of(breaker, home, env)
    if loop_state is not None and loop_state == breaker_state:  # one file: one transaction
        verdict = _open(loop_state).check(
            session, digest=digest, max_repeats=max_repeats, breaker=call
        )
    else:
        verdict = None
        if loop_state is not None:
            verdict = _open(loop_state).check(session, digest=digest, max_repeats=max_repeats)
        if verdict is None and breaker_state is not None:
            verdict = _open(breaker_state).check(session, breaker=call)
    if verdict is None:
        return None
    return _message(verdict, event, digest, breaker)


def _max_repeats(loop: RowSettings, environ: Mapping[str, str]) -> int:
    from dsh_loop_brake._config import resolve_max_repeats
    from dsh_loop_brake._errors import LoopBrakeConfigError

    try:
        return resolve_max_repeats(loop.config, environ)
    except LoopBrakeConfigError as exc:  # the row was checked when composed: this is the env
        raise HookError(str(exc)) from None


def _digest(call_digest: Callable[[str, Any], bytes], tool: str, arguments: Any) -> bytes | None:
    try:
        return call_digest(tool, arguments)
    except (TypeError, ValueError):  # not for JSON from a host; an unidentifiable call ends
        return None  # the streak and is not counted, as in the library


def _breaker_call(
    breaker: RowSettings,
    tool: str,
    arguments: dict[str, Any],
    call_digest: Callable[[str, Any], bytes],
) -> BreakerCall | None:
    """The call as the circuit breaker judges it; ``None`` for a tool it does not guard."""
    from dsh_loop_brake.hooks._state import BreakerCall

    config: dict[str, Any] = breaker.config or {}
    only, exempt = config["only"], config["exempt"]
    if (tool not in only) if only else (tool in exempt):
        return None
    ignore = config["ignoreArgs"]
    kept = {key: value for key, value in arguments.items() if key not in ignore}
    return BreakerCall(
        _digest(call_digest, tool, kept),
        duplicate_limit=config["duplicateLimit"],
        window=config["window"],
        cap=config["maxCallsPerAgent"],
    )


def state_of(row: RowSettings, home: str, environ: Mapping[str, str]) -> tuple[str, int]:
    """The state file a row counts in, and its ``sessionTtl``."""
    url, source = row.store, None if row.origin is None else f"from {row.origin}"
    if url is None:
        raw = environ.get(STORE_ENV, "")
        if raw.strip():
            url, source = raw.strip(), f"from the environment variable {STORE_ENV}"
    ttl = DEFAULT_SESSION_TTL if row.session_ttl is None else row.session_ttl
    if url is None:
        return os.path.join(home, DEFAULT_STATE_FILE), ttl
    return _sqlite_path(url, home, source), ttl


def _sqlite_path(url: str, home: str, source: str | None) -> str:
    where = f" ({source})" if source else ""
    scheme, colon, rest = url.partition(":")
    if colon and scheme == "sqlite" and rest.strip():
        path = os.path.expanduser(rest.strip())
        return path if os.path.isabs(path) else os.path.join(home, path)
    if colon and scheme == "memory":
        raise HookError(
            f"the store {json_shown(url)}{where} keeps nothing between the hook's processes "
            "(every tool call is a new one); use sqlite:PATH, or leave store out for "
            f"{DEFAULT_STATE_FILE} in the dsh home"
        )
    raise HookError(
        f"the store {json_shown(url.split('@')[-1])}{where} cannot be used by the hook; use "
        f"sqlite:PATH, or leave store out for {DEFAULT_STATE_FILE} in the dsh home"
    )


def _open(state: tuple[str, int]) -> State:
    from dsh_loop_brake.hooks._state import open_state

    return open_state(*state)


def _message(
    verdict: Verdict, event: ToolCallEvent, digest: bytes | None, breaker: RowSettings | None
) -> str:
    if verdict.kind == "loop":
        from dsh_loop_brake._errors import LoopBrakeError

        assert digest is not None
        denial = LoopBrakeError(
            event.tool_name, verdict.count, verdict.limit, digest.hex(), event.session
        )
        return str(denial)
    from dsh_loop_brake._breaker import plain_name

    assert breaker is not None and breaker.config is not None
    template: str = breaker.config["denyMessage"]  # checked by resolve_config when composed
    return template.format(
        tool=plain_name(event.tool_name), count=verdict.count, limit=verdict.limit
    )
