"""``dsh-loop-brake hook``: install the hook into a host's settings, remove it, reset its state.

``hook claude-code|codex|gemini`` itself (what the hosts run) never gets here when started as
``dsh-loop-brake``: the entry point sends it to :mod:`dsh_loop_brake.hooks._run` before the
command line is imported. It is described here for ``--help``, and still works if reached.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dsh_loop_brake.hooks._hosts import HOST_NAMES, HOSTS, Host

__all__ = ["add_arguments", "run"]

EXIT_OK, EXIT_USAGE = 0, 2
PROG = "dsh-loop-brake"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``hook`` subcommand's own subcommands and options."""
    actions = parser.add_subparsers(dest="hook_action", metavar="HOST|install|uninstall|reset")
    actions.required = True
    for name in HOST_NAMES:
        host = HOSTS[name]
        sub = actions.add_parser(
            name,
            help=f"run as {host.title}'s {host.event} hook (the event on standard input)",
            description=(
                f"{host.title} runs this before each tool call, with its {host.event} event on "
                "standard input. Prints the host's deny decision when the call is one too many, "
                "nothing when it may run; exits 1 with one line on stderr when it cannot judge."
            ),
        )
        _profile_options(sub)
    for action, verb in (("install", "add"), ("uninstall", "remove")):
        sub = actions.add_parser(
            action,
            help=f"{verb} the hook {'to' if action == 'install' else 'from'} a host's settings",
            description=(
                f"{verb.capitalize()} dsh-loop-brake as a command hook on the host's pre-tool "
                "event for every tool (Claude Code: ~/.claude/settings.json, Codex CLI: "
                "~/.codex/hooks.json, gemini-cli: ~/.gemini/settings.json for --scope user)."
            ),
        )
        sub.add_argument("host", choices=HOST_NAMES, metavar="HOST", help=" | ".join(HOST_NAMES))
        sub.add_argument(
            "--scope",
            choices=("user", "project", "local"),
            default="user",
            help="user (default), project (./.claude, ./.codex, ./.gemini) or local "
            "(Claude Code's .claude/settings.local.json)",
        )
        if action == "install":
            _profile_options(sub)
            sub.add_argument(
                "--with-circuit-breaker",
                action="store_true",
                help="also add the circuit-breaker row to the profile's patch file (it ignores "
                "`description`, so it sees the same command repeated with a new description)",
            )
    sub = actions.add_parser(
        "reset",
        help="forget the hook's counts: one session's, or all",
        description="Forget what the hook counted for one session (--session ID) or for all.",
    )
    _profile_options(sub)
    sub.add_argument("--session", metavar="ID", help="the session id (subagents: ID/AGENT_ID)")


def _profile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile", metavar="NAME", default=None, help="the dsh profile (default: default)"
    )
    parser.add_argument(
        "--home", metavar="DIR", default=None, help="the dsh home (default: $DSH_HOME, else ~/.dsh)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``hook ...``; the exit code."""
    action = args.hook_action
    if action in HOSTS:
        from dsh_loop_brake.hooks._run import main as run_hook

        argv = [action]
        if args.profile is not None:
            argv += ["--profile", args.profile]
        if args.home is not None:
            argv += ["--home", args.home]
        return run_hook(argv)
    from dsh_loop_brake.harness.errors import HarnessError
    from dsh_loop_brake.hooks._errors import HookError
    from dsh_loop_brake.hooks._settings import SettingsError
    from dsh_loop_brake.loop_brake import LoopBrakeConfigError

    try:
        if action == "reset":
            return _reset(args)
        host = HOSTS[args.host]
        if action == "install":
            return _install(host, args)
        return _uninstall(host, args)
    except (SettingsError, HookError, HarnessError, LoopBrakeConfigError) as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE


def _checked_home(home: str | None) -> str | None:
    from dsh_loop_brake.hooks._errors import HookUsageError

    if home is not None and not home.strip():
        raise HookUsageError(
            "--home is empty; give a directory, or leave --home out to use $DSH_HOME or ~/.dsh"
        )
    return home


def _install(host: Host, args: argparse.Namespace) -> int:
    from dsh_loop_brake.hooks._paths import check_profile_name, home_directory
    from dsh_loop_brake.hooks._settings import (
        hook_command,
        hooks_switched_off,
        install_hook,
        installed_elsewhere,
        load_settings,
        settings_path,
    )

    given_home = _checked_home(args.home)
    profile = args.profile if args.profile is None else check_profile_name(args.profile)
    home = Path(home_directory(given_home))
    path = settings_path(host, args.scope)
    load_settings(path)  # refuse a malformed settings file before anything is written
    command = hook_command(host, profile=profile, home=given_home)
    notes: list[str] = []
    if args.with_circuit_breaker:
        from dsh_loop_brake.hooks._breaker_patch import add_circuit_breaker

        patch = add_circuit_breaker(profile or "default", home)
        if patch.changed:
            notes.append(f"added the circuit-breaker row to {patch.path}")
        else:
            notes.append(f"the profile already has a circuit-breaker row ({patch.existing})")
    change = install_hook(path, host, command)
    where = f"{path} ({args.scope} scope)"
    if change.changed:
        made = ", a new file" if change.created else ""
        print(f"installed the {PROG} hook for {host.title} in {where}{made}")
    else:
        print(f"the {PROG} hook for {host.title} is already installed in {where}; nothing to do")
    print(f"  command: {command}")
    for note in notes:
        print(f"  {note}")
    if not args.with_circuit_breaker:
        notes_for_breaker = _breaker_note(host, profile, home, given_home)
        if notes_for_breaker:
            print(notes_for_breaker)
    switched_off = hooks_switched_off(path, host)
    if switched_off is not None:
        print(
            f"warning: {switched_off}: the hook will not run until that is changed", file=sys.stderr
        )
    for other in installed_elsewhere(host, args.scope, command):
        print(
            f"warning: {other} also runs the {PROG} hook for {host.title}; "
            "every tool call would be counted twice: uninstall one of them "
            f"(`{PROG} hook uninstall {host.name} --scope ...`)",
            file=sys.stderr,
        )
    if given_home is None and os.environ.get("DSH_HOME", "").strip():
        print(
            f"note: DSH_HOME is set here ({os.environ['DSH_HOME']}), but {host.title} runs the "
            "hook with its own environment; to be sure it uses this home, install with "
            f"--home {os.environ['DSH_HOME']}"
        )
    print(_host_note(host, args.scope))
    return EXIT_OK


def _breaker_note(host: Host, profile: str | None, home: Path, given_home: str | None) -> str:
    """Say what the loop brake cannot see, unless the profile already has the circuit breaker."""
    from dsh_loop_brake.harness.errors import HarnessError
    from dsh_loop_brake.hooks._breaker_patch import has_circuit_breaker

    try:
        if has_circuit_breaker(profile or "default", home) is not None:
            return ""
    except HarnessError as exc:
        return (
            f"warning: the profile cannot be composed ({' '.join(str(exc).split())}); the hook "
            "will fail open (run every call) until that is fixed"
        )
    options = "" if profile is None else f" --profile {profile}"
    options += "" if given_home is None else f" --home {given_home}"
    shell = {"claude-code": "Bash", "gemini": "run_shell_command"}.get(host.name)
    if shell is None:
        seen = "a loop that alternates calls (A, B, A, B...)"
    else:
        seen = (
            f"{host.title}'s most common loop, the same {shell} command with its `description` "
            "rewritten each time"
        )
    return (
        "note: the loop brake denies only identical calls in a row, so it cannot see "
        f"{seen}. The circuit breaker can (it ignores `description` and counts repeats in a "
        f"window): `{PROG} hook install {host.name}{options} --with-circuit-breaker` adds it"
    )


def _host_note(host: Host, scope: str) -> str:
    if host.name == "codex":
        return (
            "note: Codex CLI runs a new or changed hook only once you trust it: open /hooks in "
            "Codex and trust this one (project hooks also need a trusted project)"
        )
    if host.name == "gemini":
        extra = "; gemini-cli asks you to trust a project's hooks" if scope != "user" else ""
        return f"note: it takes effect in new gemini-cli sessions (/hooks panel lists it){extra}"
    return "note: it takes effect in new Claude Code sessions (/hooks lists it)"


def _uninstall(host: Host, args: argparse.Namespace) -> int:
    from dsh_loop_brake.hooks._settings import settings_path, uninstall_hook

    path = settings_path(host, args.scope)
    change = uninstall_hook(path, host)
    where = f"{path} ({args.scope} scope)"
    if change.changed:
        print(f"removed the {PROG} hook for {host.title} from {where}")
    else:
        print(f"the {PROG} hook for {host.title} is not installed in {where}; nothing to do")
    return EXIT_OK


def _reset(args: argparse.Namespace) -> int:
    from dsh_loop_brake.hooks._paths import check_profile_name, home_directory
    from dsh_loop_brake.hooks._reset import reset_state

    profile = check_profile_name(args.profile or "default")
    home = home_directory(_checked_home(args.home))
    done = reset_state(profile, home, args.session)
    stores = ", ".join(done.urls) or "no store (the profile's rows brake nothing)"
    if args.session is None:
        print(f"forgot every session in {stores}")
        return EXIT_OK
    held = "it had no streak" if done.streak is None else f"its streak was {done.streak}"
    print(f"forgot the streak of session {args.session!r} in {stores} ({held})")
    if done.breaker_kept:
        print(
            "note: the circuit breaker's state is kept (it is forgotten for every session at "
            f"once: `{PROG} hook reset` without --session)"
        )
    return EXIT_OK
