"""The circuit-breaker plugin: a windowed duplicate limit and a per-agent call cap, as one guard.

Row id ``circuit-breaker``, name ``dsh-circuit-breaker``. It is not in this package's bundle patch;
a user adds it with an ``insert`` patch. Applied, it installs one synchronous guard through
``ctx.tools.guard`` that denies a call when it would be the ``duplicateLimit``-th identical call in
the agent's window of recent allowed calls, or when the agent has already made
``maxCallsPerAgent`` allowed calls. Call identity is the loop brake's (``call_hash``), computed
after dropping the annotation-only arguments listed in ``ignoreArgs``.

Exceptions::

    ValueError
     └── LoopBrakeConfigError             (dsh_loop_brake.loop_brake)
          └── CircuitBreakerConfigError   a circuit-breaker config that cannot be applied
"""

from __future__ import annotations

import functools
import json
import logging
import os
import string
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple, final

from dsh_loop_brake._canonical import describe_unidentifiable
from dsh_loop_brake._config import integer_value
from dsh_loop_brake._execution import read_field
from dsh_loop_brake._short_repr import json_literal, short_repr
from dsh_loop_brake.harness.hookspecs import hookimpl
from dsh_loop_brake.loop_brake import LoopBrakeConfigError, call_hash

__all__ = [
    "DEFAULTS",
    "DEFAULT_DENY_MESSAGE",
    "MAX_WINDOW",
    "PLUGIN_NAME",
    "ROW_ID",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "CircuitBreakerConfigError",
    "apply",
    "dsh_apply",
    "resolve_config",
]

PLUGIN_NAME: Final = "dsh-circuit-breaker"
ROW_ID: Final = "circuit-breaker"

#: The default denial text. ``{tool}`` is filled in as a JSON string literal (quotes included,
#: non-ASCII and control characters escaped), so a hostile tool name cannot break the line.
DEFAULT_DENY_MESSAGE: Final = (
    "circuit breaker: the call to tool {tool} was denied before it ran (count {count}, limit"
    " {limit}): this agent has repeated the same call too often or has used up its call budget."
    " Repeating it will not work: change your approach, or stop and tell the user what you"
    " could not finish."
)

#: The largest ``window`` accepted; it bounds the memory one agent's state can take.
MAX_WINDOW: Final = 100_000

#: How many agents that cannot be weakly referenced are remembered (by their id) at once.
_MAX_NAMED_AGENTS: Final = 1024

DEFAULTS: Final[Mapping[str, object]] = MappingProxyType(
    {
        "enabled": True,
        "duplicateLimit": 6,
        "window": 200,
        "maxCallsPerAgent": 300,
        "exempt": ("todo_write", "ask_user_question", "exit_plan_mode"),
        "only": (),
        "ignoreArgs": ("description", "explanation", "reason", "thought", "purpose"),
        "denyMessage": DEFAULT_DENY_MESSAGE,
        "incidentLog": "",
    }
)

_SOURCE: Final = "the circuit-breaker patch row"
_PLACEHOLDERS: Final = frozenset({"tool", "count", "limit"})
_MAX_AGENT_KEYS: Final = 64

logger = logging.getLogger(__name__)

Kind = Literal["duplicate", "cap"]


class CircuitBreakerConfigError(LoopBrakeConfigError):
    """A circuit-breaker config that cannot be applied: wrong type, out of range, or unknown key."""

    code = "CIRCUIT_BREAKER_CONFIG"


@final
@dataclass(frozen=True)
class CircuitBreakerConfig:
    """A validated circuit-breaker configuration (the row's keys, in Python spelling)."""

    enabled: bool = True
    duplicate_limit: int = 6
    window: int = 200
    max_calls_per_agent: int = 300
    exempt: tuple[str, ...] = ("todo_write", "ask_user_question", "exit_plan_mode")
    only: tuple[str, ...] = ()
    ignore_args: tuple[str, ...] = ("description", "explanation", "reason", "thought", "purpose")
    deny_message: str = DEFAULT_DENY_MESSAGE
    incident_log: str = ""

    def as_row_config(self) -> dict[str, object]:
        """Return the configuration as a row's ``config`` mapping, every key spelled out."""
        return {
            "enabled": self.enabled,
            "duplicateLimit": self.duplicate_limit,
            "window": self.window,
            "maxCallsPerAgent": self.max_calls_per_agent,
            "exempt": list(self.exempt),
            "only": list(self.only),
            "ignoreArgs": list(self.ignore_args),
            "denyMessage": self.deny_message,
            "incidentLog": self.incident_log,
        }


# --- validation -------------------------------------------------------------------------------


def _fail(key: str, rule: str, value: object, source: str) -> CircuitBreakerConfigError:
    return CircuitBreakerConfigError(
        f"circuit breaker: {key} must be {rule}, got {short_repr(value)} (from {source})"
    )


def _integer(key: str, value: object, minimum: int, maximum: int | None, source: str) -> int:
    """Accept what ``maxRepeats`` accepts: an int, an integral float, or a decimal string."""
    rule = f"an integer of at least {minimum}"
    if maximum is not None:
        rule = f"an integer from {minimum} to {maximum}"
    number = integer_value(value)
    if number is None or number < minimum or (maximum is not None and number > maximum):
        raise _fail(key, rule, value, source)
    return number


def _names(key: str, value: object, what: str, source: str) -> tuple[str, ...]:
    rule = f"a list of {what} (non-empty strings)"
    if not isinstance(value, (list, tuple)):
        raise _fail(key, rule, value, source)
    for item in value:
        if not isinstance(item, str) or not item:
            raise _fail(key, rule, value, source)
    return tuple(dict.fromkeys(value))


def _deny_message(value: object, source: str) -> str:
    rule = "a non-blank string whose only placeholders are {tool}, {count} and {limit}"
    if not isinstance(value, str) or not value.strip():
        raise _fail("denyMessage", rule, value, source)
    try:
        fields = list(string.Formatter().parse(value))
    except ValueError:
        literal = " (write a literal brace as {{ or }})"
        raise _fail("denyMessage", rule + literal, value, source) from None
    for _literal, field, spec, conversion in fields:
        if field is None:
            continue
        if field not in _PLACEHOLDERS or spec or conversion:
            shown = (
                f"{{{field}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            )
            raise CircuitBreakerConfigError(
                f"circuit breaker: denyMessage may only use the placeholders {{tool}}, {{count}}"
                f" and {{limit}} (no format specs), got {short_repr(shown)} in"
                f" {short_repr(value)} (from {source})"
            )
    return value


def _incident_log(value: object, source: str) -> str:
    rule = 'a file path, or "" to keep no incident log'
    if not isinstance(value, str) or "\x00" in value:
        raise _fail("incidentLog", rule, value, source)
    if not value.strip():
        return ""
    # Fixed at apply time, so a later chdir by the host or a tool never moves the log.
    return os.path.abspath(os.path.expanduser(value))


def resolve_config(config: object = None, *, source: str = _SOURCE) -> CircuitBreakerConfig:
    """Validate a row's ``config`` and fill in the defaults; ``None`` means no config at all.

    A key set to ``null`` takes its default. Raises :class:`CircuitBreakerConfigError` naming the
    key, the bad value and the rule.
    """
    if config is None:
        return CircuitBreakerConfig()
    if not isinstance(config, Mapping):
        raise CircuitBreakerConfigError(
            f"circuit breaker: the config must be a mapping of keys to values, got"
            f" {short_repr(config)} (from {source})"
        )
    for key in config:
        if key not in DEFAULTS:
            raise CircuitBreakerConfigError(
                f"circuit breaker: unknown key {short_repr(key)} (from {source}); the keys are"
                f" {', '.join(DEFAULTS)} (check the spelling)"
            )
    given = {key: value for key, value in config.items() if value is not None}

    enabled = given.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _fail("enabled", "true or false", enabled, source)
    limit = _integer("duplicateLimit", given.get("duplicateLimit", 6), 1, MAX_WINDOW, source)
    window = _integer("window", given.get("window", 200), 1, MAX_WINDOW, source)
    if window < limit:
        raise CircuitBreakerConfigError(
            f"circuit breaker: window must be at least duplicateLimit ({limit}), got {window}"
            f" (from {source}); a window shorter than the limit can never hold enough identical"
            f" calls to trip"
        )
    cap = _integer("maxCallsPerAgent", given.get("maxCallsPerAgent", 300), 0, None, source)
    defaults = CircuitBreakerConfig()
    return CircuitBreakerConfig(
        enabled=enabled,
        duplicate_limit=limit,
        window=window,
        max_calls_per_agent=cap,
        exempt=_names("exempt", given.get("exempt", defaults.exempt), "tool names", source),
        only=_names("only", given.get("only", defaults.only), "tool names", source),
        ignore_args=_names(
            "ignoreArgs", given.get("ignoreArgs", defaults.ignore_args), "argument names", source
        ),
        deny_message=_deny_message(given.get("denyMessage", DEFAULT_DENY_MESSAGE), source),
        incident_log=_incident_log(given.get("incidentLog", ""), source),
    )


# --- reading the execution --------------------------------------------------------------------


def _field(obj: object, name: str) -> object:
    """Read ``name`` from an execution or agent by key (mapping) or by attribute; never raise."""
    try:
        return read_field(obj, name)
    except Exception:  # a hostile property or mapping: the guard judges what it can read
        return None


def _agent_id(agent: object) -> str | None:
    """The agent's id as a string when it has a recognisable one (a non-empty str or an int)."""
    ident = _field(agent, "id")
    if isinstance(ident, str) and ident:
        return ident
    if isinstance(ident, int) and not isinstance(ident, bool):
        return str(ident)
    return None


def _agent_keys(agent: object) -> list[str]:
    """The agent's attribute (or key) names, never their values, to map an unknown shape by hand."""
    names: set[str] = set()
    try:
        if isinstance(agent, Mapping):
            names.update(key for key in agent if isinstance(key, str))
        else:
            names.update(getattr(agent, "__dict__", {}))
            for cls in type(agent).__mro__:
                slots = cls.__dict__.get("__slots__", ())
                for slot in (slots,) if isinstance(slots, str) else slots:
                    if isinstance(slot, str) and hasattr(agent, slot):
                        names.add(slot)
    except Exception:
        pass
    public = sorted(n for n in names if not (n.startswith("__") and n.endswith("__")))
    return public[:_MAX_AGENT_KEYS]


# --- state ------------------------------------------------------------------------------------


@final
class _AgentState:
    """One agent's ring of recent allowed call digests, their counts, and its lifetime calls."""

    __slots__ = ("calls", "counts", "recent", "reported")

    def __init__(self, window: int) -> None:
        self.recent: deque[str] = deque(maxlen=window)
        self.counts: dict[str, int] = {}
        self.calls = 0
        self.reported: set[str] = set()

    def record(self, digest: str | None) -> None:
        """Count one allowed call; keep ``counts`` equal to the multiset of ``recent``."""
        self.calls += 1
        if digest is None:
            return
        recent, counts = self.recent, self.counts
        if len(recent) == recent.maxlen:
            oldest = recent[0]  # the append below evicts it
            left = counts[oldest] - 1
            if left:
                counts[oldest] = left
            else:
                del counts[oldest]
        recent.append(digest)
        counts[digest] = counts.get(digest, 0) + 1


_WeakEntry = tuple["weakref.ref[Any]", _AgentState]


def _weakly_referenceable(obj: object) -> bool:
    # What weakref.ref itself checks, without raising and catching a TypeError on every call.
    return type(obj).__weakrefoffset__ != 0


def _forget(store: dict[int, _WeakEntry], key: int, ref: weakref.ref[Any]) -> None:
    # Runs when an agent dies, possibly inside garbage collection in any thread: it must not take
    # the breaker's lock. The id cannot have been reused yet (the object is not freed until its
    # weak references' callbacks have run), so an entry under this key that holds this very
    # reference belongs to the dead agent.
    entry = store.get(key)
    if entry is not None and entry[0] is ref:
        store.pop(key, None)


class _Denial(NamedTuple):
    kind: Kind
    tally: int  # "count" in the message and the incident line
    limit: int
    first: bool


@final
class CircuitBreaker:
    """The breaker a ``circuit-breaker`` row applies: its settings, its state, and its guard.

    ``check(execution)`` is the guard: it returns the deny message, or ``None`` to let the call
    run. ``len(breaker)`` is the number of agents it holds state for (calls without an agent share
    one host-level state, not counted there).
    """

    __slots__ = (
        "_closed",
        "_exempt",
        "_host",
        "_ignore",
        "_incident_path",
        "_lock",
        "_named",
        "_only",
        "_unidentified",
        "_warned_log",
        "_weak",
        "config",
    )

    def __init__(self, config: CircuitBreakerConfig | None = None) -> None:
        self.config = config if config is not None else CircuitBreakerConfig()
        self._exempt = frozenset(self.config.exempt)
        self._only = frozenset(self.config.only)
        self._ignore = frozenset(self.config.ignore_args)
        self._incident_path = self.config.incident_log
        self._lock = threading.Lock()
        self._host: _AgentState | None = None
        self._weak: dict[int, _WeakEntry] = {}
        self._named: OrderedDict[str, _AgentState] = OrderedDict()
        self._unidentified: set[str] = set()
        self._warned_log = False
        self._closed = False

    def __len__(self) -> int:
        return len(self._weak) + len(self._named)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"<CircuitBreaker duplicateLimit={c.duplicate_limit} window={c.window}"
            f" maxCallsPerAgent={c.max_calls_per_agent} agents={len(self)}>"
        )

    # -- the guard --

    def check(self, execution: object) -> str | None:
        """Judge one tool execution before its body runs: the deny message, or ``None`` to allow."""
        if self._closed or not self.config.enabled:
            return None
        name = _field(execution, "name")
        tool = name if isinstance(name, str) else None
        if not self._guards(tool):
            return None
        agent = _field(execution, "agent")
        cap = self.config.max_calls_per_agent
        with self._lock:
            if self._closed:
                return None
            state = self._state_for(agent)
            denial = self._deny(state, "cap", state.calls, cap) if 0 < cap <= state.calls else None
        if denial is None:
            # Identify outside the lock, so hashing large arguments holds up no other thread; an
            # agent past its cap was denied above without hashing anything.
            digest = self._identify(tool, _field(execution, "arguments"))
            with self._lock:
                if self._closed:
                    return None
                denial = self._judge(state, digest)
            if denial is None:
                return None
        shown = tool if tool is not None else f"<{type(name).__name__}>"
        if denial.first and self._incident_path:
            self._report(denial, shown, agent)
        return self.config.deny_message.format(
            tool=json_literal(shown), count=denial.tally, limit=denial.limit
        )

    def calls(self, agent: object = None) -> int:
        """How many allowed calls the breaker has counted for ``agent`` (``None``: the host)."""
        with self._lock:
            state = self._peek(agent)
            return state.calls if state is not None else 0

    def reset(self) -> None:
        """Forget every agent's window, call count and reported incidents."""
        with self._lock:
            self._host = None
            self._weak.clear()
            self._named.clear()

    def _close(self) -> None:
        """Stop judging and forget everything (the row's fiber was disposed)."""
        with self._lock:
            self._closed = True
        self.reset()

    # -- internals --

    def _guards(self, tool: str | None) -> bool:
        if self._only:
            return tool in self._only
        return tool not in self._exempt

    def _identify(self, tool: str | None, arguments: object) -> str | None:
        if tool is None:
            return None
        ignore = self._ignore
        if ignore and isinstance(arguments, (dict, Mapping)):  # dict first: the fast check
            try:
                if not ignore.isdisjoint(arguments):
                    arguments = {k: v for k, v in arguments.items() if k not in ignore}
            except Exception as error:  # a hostile mapping: keys that cannot be hashed or compared
                self._unidentifiable(tool, error)
                return None
        try:
            return call_hash(tool, arguments)
        except (TypeError, ValueError, RecursionError) as error:
            self._unidentifiable(tool, error)
            return None

    def _unidentifiable(self, tool: str, error: Exception) -> None:
        # Failing open beats blocking real work; say so once per tool, naming only the type.
        if tool not in self._unidentified and len(self._unidentified) < 1024:
            self._unidentified.add(tool)
            logger.warning(
                "circuit breaker: the arguments of tool %s could not be identified (%s); such calls"
                " are allowed and not checked for duplicates",
                json_literal(tool),
                describe_unidentifiable(error),
            )

    def _judge(self, state: _AgentState, digest: str | None) -> _Denial | None:
        cap = self.config.max_calls_per_agent
        if 0 < cap <= state.calls:  # checked again: another thread may have reached the cap
            return self._deny(state, "cap", state.calls, cap)
        if digest is not None:
            limit = self.config.duplicate_limit
            count = state.counts.get(digest, 0) + 1
            if count >= limit:
                return self._deny(state, "duplicate", count, limit)
        # Only allowed calls are recorded: a denied call never ran, so it must neither push its
        # own count higher nor evict a real call from the window (the breaker would latch).
        state.record(digest)
        return None

    @staticmethod
    def _deny(state: _AgentState, kind: Kind, count: int, limit: int) -> _Denial:
        first = kind not in state.reported
        state.reported.add(kind)
        return _Denial(kind, count, limit, first)

    def _peek(self, agent: object) -> _AgentState | None:
        """The state held for ``agent``, without creating one."""
        if agent is None:
            return self._host
        entry = self._weak.get(id(agent))
        if entry is not None and entry[0]() is agent:
            return entry[1]
        if _weakly_referenceable(agent):
            return None  # not seen yet
        ident = _agent_id(agent)
        return self._named.get(ident) if ident is not None else self._host

    def _state_for(self, agent: object) -> _AgentState:
        """The state for ``agent``, created on its first call (caller holds the lock)."""
        if agent is not None:
            key = id(agent)
            entry = self._weak.get(key)
            if entry is not None and entry[0]() is agent:
                return entry[1]
            if _weakly_referenceable(agent):
                try:
                    ref = weakref.ref(agent, functools.partial(_forget, self._weak, key))
                except TypeError:
                    pass  # a type that claims weak references but refuses them: keyed by id
                else:
                    state = _AgentState(self.config.window)
                    self._weak[key] = (ref, state)
                    return state
            # Not weakly referenceable (a dict, a slotted object): keyed by its id.
            ident = _agent_id(agent)
            if ident is not None:
                named = self._named.get(ident)
                if named is not None:
                    self._named.move_to_end(ident)
                    return named
                named = self._named[ident] = _AgentState(self.config.window)
                if len(self._named) > _MAX_NAMED_AGENTS:
                    self._named.popitem(last=False)  # the least recently active agent
                return named
        # No agent, or one that can neither be weakly referenced nor told apart by an id.
        if self._host is None:
            self._host = _AgentState(self.config.window)
        return self._host

    def _report(self, denial: _Denial, tool: str, agent: object) -> None:
        record: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kind": denial.kind,
            "tool": tool,
            "count": denial.tally,
            "limit": denial.limit,
        }
        ident = _agent_id(agent) if agent is not None else None
        if agent is None or ident is not None:
            record["agent"] = ident
        else:
            record["agentKeys"] = _agent_keys(agent)
        line = (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
        self._append(line)

    def _append(self, line: bytes) -> None:
        # One os.write of the whole line on an O_APPEND descriptor: concurrent writers (threads or
        # processes) never interleave within a line. Any failure is logged once and swallowed:
        # the incident log is a report, never a reason to change the guard's verdict. O_NONBLOCK
        # because opening a named pipe for writing would otherwise wait for a reader, holding up
        # the tool call; on a regular file it changes nothing.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        flags |= getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self._incident_path, flags, 0o600)
            try:
                written = os.write(fd, line)
            finally:
                os.close(fd)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
        except Exception as err:
            if not self._warned_log:
                self._warned_log = True
                reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
                logger.warning(
                    "circuit breaker: could not append to the incident log %s (%s); denials still"
                    " apply, but incidents are not being recorded",
                    json_literal(self._incident_path),
                    reason,
                )


# --- the plugin -------------------------------------------------------------------------------


def apply(ctx: Any, config: object = None) -> CircuitBreaker:
    """Validate ``config``, install the breaker's guard on ``ctx.tools`` and return the breaker.

    The config is validated before the registry is touched. Disposing the context's fiber removes
    the guard and forgets all state. With ``enabled: false`` no guard is installed.
    """
    settings = resolve_config(config)
    tools = getattr(ctx, "tools", None)
    guard: Callable[[Callable[[Any], str | None]], object] | None = getattr(tools, "guard", None)
    effect: Callable[[Callable[[], object]], object] | None = getattr(ctx, "effect", None)
    if not callable(guard):
        raise TypeError(
            f"{PLUGIN_NAME} needs a tool registry with guards: the context has no"
            " tools.guard(fn); apply it in a host that provides one (see docs/harness.md)"
        )
    if not callable(effect):
        raise TypeError(
            f"{PLUGIN_NAME} needs ctx.effect(callback) to be undone on dispose; apply it in a host"
            " that provides fiber effects (see docs/harness.md)"
        )
    breaker = CircuitBreaker(settings)
    install_guard = guard

    def install() -> Callable[[], None]:
        remove = install_guard(breaker.check) if settings.enabled else None

        def dispose() -> None:
            try:
                if callable(remove):
                    remove()
            finally:
                breaker._close()

        return dispose

    effect(install)
    return breaker


@hookimpl
def dsh_apply(ctx: Any, row: Any) -> CircuitBreaker | None:
    """Apply rows named ``dsh-circuit-breaker``; leave every other row to its own plugin."""
    if _field(row, "name") != PLUGIN_NAME:
        return None
    return apply(ctx, _field(row, "config"))
