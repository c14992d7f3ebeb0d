"""The brakes as a pre-tool-use hook of Claude Code, Codex CLI and gemini-cli.

``dsh-loop-brake hook claude-code|codex|gemini`` is the command those hosts run before each tool
call: it reads the host's event on standard input, counts the call with the package's own brakes
in a store shared by all the hook's processes (a SQLite file in the dsh home by default), and
prints the host's deny decision when the call is one too many.
``dsh-loop-brake hook install HOST`` puts that command in the host's settings file.

Modules (this package imports nothing itself, so ``hooks._run`` stays cheap to start)::

    _errors     HookError and HookUsageError
    _run        the hook process: arguments, event, decision, exit code (the fast path)
    _hosts      what differs between the three hosts: event name, deny JSON, settings files
    _event      reading and checking the event on standard input
    _paths      DSH_HOME and the profile directory, without importing the harness
    _profile    the profile's composed rows, cached by the identities of the files they came from
    _compose    composing the profile with the harness when the cache is stale (the slow path)
    _apply      the rows applied: LoopBrake and CircuitBreaker on the rows' stores
    _settings   editing a host's JSON settings file (hook install / uninstall)
    _breaker_patch  adding the circuit-breaker row to a profile's patch file
    _reset      ``hook reset``: forgetting one session's counts, or all
    command     ``hook`` as a subcommand of the command line (install, uninstall, help)

Exceptions::

    Exception
    └── HookError           the hook cannot judge this call: exit 1, one line on stderr
        └── HookUsageError  the hook's own arguments are wrong (also exit 1, never 2)
    BaseException
    └── StoreFailed         (_apply) a store failed inside a brake's check: becomes a HookError
"""
