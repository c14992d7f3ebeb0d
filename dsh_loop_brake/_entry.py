"""The ``dsh-loop-brake`` entry point (the console script and ``python -m dsh_loop_brake``).

``dsh-loop-brake hook HOST`` is run by a coding-agent command line before every tool call the
agent makes: a new process each time, so its start-up is on the agent's critical path. It is
sent to :mod:`dsh_loop_brake.hooks._run` before the command line (argparse, the harness,
pluggy, ruamel.yaml) is imported; everything else, ``hook install`` and ``hook --help``
included, goes to :func:`dsh_loop_brake.cli.main`.

The hook's process then ends at once (``os._exit`` after flushing its output): the interpreter's
teardown is skipped, and so is SQLite's checkpoint when the state file's last connection closes,
which costs four ``fdatasync`` calls per process and dominated a hook call on a busy disk
(benchmarks/hook.py). The state stays correct: a write-ahead log left behind is what the next
process reads, and SQLite checkpoints it in due course.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

# ``hook`` followed by one of these is the command line's business, not a host's call.
_NOT_A_HOST = frozenset({"install", "uninstall", "reset", "-h", "--help"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh-loop-brake`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    ``hook HOST`` does not return: it ends the process (see the module's docstring).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"] and (len(args) < 2 or args[1] not in _NOT_A_HOST):
        try:
            from dsh_loop_brake.hooks._run import main as run_hook
        except Exception as exc:  # a broken installation: fail open, one line, no traceback
            problem = " ".join(str(exc).split())
            sys.stderr.write(
                f"dsh-loop-brake hook: cannot start ({type(exc).__name__}: {problem}); "
                "the call was not judged (fail open)\n"
            )
            _end_process(1)
        _end_process(run_hook(args[1:]))
    from dsh_loop_brake.cli import main as run_command_line

    return run_command_line(args)


def _end_process(code: int) -> NoReturn:
    """Flush what the hook wrote and end the process now, with ``code``.

    A stream the process was started without (``None``: e.g. ``>&-``) had nothing written to it.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 1  # the decision may not have reached the host: say it failed
    os._exit(code)
