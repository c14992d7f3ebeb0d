"""The circuit breaker itself: per-agent windows and call counts, and its verdict on a call.

A call is denied when it would be the ``duplicateLimit``-th identical call in the agent's window
of recent allowed calls, or when the agent has already made ``maxCallsPerAgent`` allowed calls.
Call identity is the loop brake's (the SHA-256 of the tool name and the canonical JSON of the
arguments), taken after dropping the annotation-only arguments listed in ``ignoreArgs``.

Two ways in, one verdict: :meth:`CircuitBreaker.check` is the harness guard (it *returns* the deny
message, a :class:`DenyMessage`), :meth:`CircuitBreaker.check_call` is for any other host (it
*raises* :class:`CircuitBreakerError`). The plugin that installs the guard is
``dsh_loop_brake.circuit_breaker``; this module needs neither pluggy nor the harness.

Exceptions::

    Exception
    └── ToolCallDenied                  (dsh_loop_brake.loop_brake)
        └── CircuitBreakerError         check_call denied a call
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Mapping

from dsh_loop_brake._breaker_config import CircuitBreakerConfig
from dsh_loop_brake._canonical import call_digest, describe_unidentifiable
from dsh_loop_brake._errors import ToolCallDenied
from dsh_loop_brake._execution import read_field
from dsh_loop_brake._incidents import IncidentLog
from dsh_loop_brake._short_repr import json_literal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, Literal, SupportsIndex, final

    Kind = Literal["duplicate", "cap"]
else:

    def final(cls: type) -> type:  # typing.final, which only marks the class for type checkers
        return cls


__all__ = ["CODE", "CircuitBreaker", "CircuitBreakerError", "DenyMessage"]

CODE: Final = "CIRCUIT_BREAKER"
"""The ``code`` of every circuit-breaker denial, raised or returned."""

#: How many agents known only by an id (a string, or an agent that cannot be weakly referenced)
#: are remembered at once; the least recently active is dropped first.
_MAX_NAMED_AGENTS: Final = 1024
#: Tool names remembered for the once-per-tool warning; bounded so hostile names cannot grow it.
_WARNED_TOOLS_LIMIT: Final = 1024


class CircuitBreakerError(ToolCallDenied):
    """``check_call`` denied a call: ``kind`` (``"duplicate"`` or ``"cap"``), ``count``, ``limit``.

    ``str(error)`` is the deny message the model should read; ``session_id`` is the agent's id,
    or ``None`` for a call without a (recognisable) agent. It never carries the arguments.
    """

    code = CODE

    def __init__(
        self,
        message: str,
        *,
        kind: Kind,
        count: int,
        limit: int,
        tool_name: str = "",
        session_id: str | None = None,
    ) -> None:
        super().__init__(message, code=CODE, tool_name=tool_name, session_id=session_id)
        self.kind: Kind = kind
        self.count = count
        self.limit = limit


class DenyMessage(str):
    """The guard's deny message (a ``str``, as DSH's guard contract has it) with what denied it.

    ``code == "CIRCUIT_BREAKER"``, ``kind``, ``count`` and ``limit``, as on
    :class:`CircuitBreakerError`: a host that reads it as a plain string works, and one that looks
    finds the code.
    """

    code: Final = CODE
    kind: Kind
    count: _Count  # an int that is still str.count when called
    limit: int

    def __new__(cls, message: str, kind: Kind, count: int, limit: int) -> DenyMessage:
        self = super().__new__(cls, message)
        self.kind = kind
        self.count = _Count(count, message)
        self.limit = limit
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DenyMessage, (str(self), self.kind, int(self.count), self.limit))


class _Count(int):
    """``DenyMessage.count``: the denial's count, an ``int``, which called is ``str.count`` of
    the message. The contract names the attribute ``count``, and a host that treats the message
    as a plain string may well call ``reason.count("\n")``: both keep working."""

    _text: str

    def __new__(cls, count: int, text: str) -> _Count:
        self = super().__new__(cls, count)
        self._text = text
        return self

    def __call__(
        self, sub: str, start: SupportsIndex | None = None, end: SupportsIndex | None = None
    ) -> int:
        return self._text.count(sub, start, end)

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (int, (int(self),))


# --- names and agents -------------------------------------------------------------------------


@functools.cache
def _unsafe_in_name() -> re.Pattern[str]:
    # Control characters (C0, DEL, C1), the two Unicode line separators and lone surrogates: the
    # characters that could break a line of a log or transcript, or make the message unencodable.
    # Compiled on first need, not at import: a hook imports this module for every tool call.
    return re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def plain_name(name: str) -> str:
    """``name`` as it is, but for the characters that could break a line, written as ``\\uXXXX``
    (lowercase hex): ``{tool}`` in the deny message."""
    if name.isprintable():  # none of those characters is printable: the usual name, as it is
        return name
    return _unsafe_in_name().sub(_escape, name)


def _plain_str(value: object) -> str | None:
    """``value`` as a plain ``str`` when it is a string, else ``None``.

    A ``str`` subclass is read by its characters (``str.__str__`` copies them), so none of its
    own methods -- a ``__format__`` that writes a line break into the deny message, a ``__hash__``
    that raises -- runs later. The test is on the type itself: ``isinstance`` also asks the
    object's ``__class__``, which raises for a proxy outside its context (werkzeug's
    ``LocalProxy``, a lazy object whose factory fails), and the guard must judge such an agent,
    not fail the host's call.
    """
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]  # mypy does not narrow on type(value) is str
    if issubclass(kind, str):
        return str.__str__(value)
    return None


def _field(obj: object, name: str) -> Any:
    """Read ``name`` from an execution or agent by key (mapping) or by attribute; never raise."""
    try:
        return read_field(obj, name)
    except Exception:  # a hostile property or mapping: the guard judges what it can read
        return None


def _agent_id(agent: object) -> str | None:
    """The agent's id when it has a recognisable one: a str agent is its own id; else its ``id``
    field, a non-empty str or an int (one too long to write in decimal is not recognisable)."""
    text = _plain_str(agent)
    if text is not None:
        return text or None
    ident = _field(agent, "id")
    text = _plain_str(ident)
    if text:
        return text
    if issubclass(type(ident), int) and not issubclass(type(ident), bool):
        try:
            return int.__repr__(ident)  # the digits, whatever the class says
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return None
    return None


# --- state ------------------------------------------------------------------------------------


@final
class _AgentState:
    """One agent's ring of recent allowed call digests, their counts, and its lifetime calls."""

    __slots__ = ("calls", "counts", "recent", "reported")

    def __init__(self, window: int) -> None:
        self.recent: deque[bytes] = deque(maxlen=window)
        self.counts: dict[bytes, int] = {}
        self.calls = 0
        self.reported: set[str] = set()

    def record(self, digest: bytes | None) -> None:
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


if TYPE_CHECKING:
    _WeakEntry = tuple[weakref.ref[Any], _AgentState]


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


@final
class _Denial:
    """A verdict against a call: which limit, the count and limit shown, and whether it is the
    agent's first denial of this kind (the one the incident log records)."""

    __slots__ = ("count", "first", "kind", "limit")

    def __init__(self, kind: Kind, count: int, limit: int, first: bool) -> None:
        self.kind: Kind = kind
        self.count = count
        self.limit = limit
        self.first = first


def _arguments_of_execution(execution: object) -> object:
    return _field(execution, "arguments")


def _arguments_as_given(args: object) -> object:
    return args


@final
class CircuitBreaker:
    """The breaker a ``circuit-breaker`` row applies: its settings, its state, and its checks.

    ``check(execution)`` is the guard: it returns the deny message, or ``None`` to let the call
    run. ``check_call(tool_name, args, agent=...)`` judges a call the same way and raises
    :class:`CircuitBreakerError` instead. ``len(breaker)`` is the number of agents it holds
    state for (calls without an agent share one host-level state, not counted there).
    """

    __slots__ = (
        "_closed",
        "_exempt",
        "_host",
        "_ignore",
        "_incidents",
        "_lock",
        "_named",
        "_only",
        "_unidentified",
        "_weak",
        "config",
    )

    def __init__(self, config: CircuitBreakerConfig | None = None) -> None:
        self.config = config if config is not None else CircuitBreakerConfig()
        self._exempt = frozenset(self.config.exempt)
        self._only = frozenset(self.config.only)
        self._ignore = frozenset(self.config.ignore_args)
        path = self.config.incident_log
        self._incidents = IncidentLog(path) if path else None
        self._lock = threading.Lock()
        self._host: _AgentState | None = None
        self._weak: dict[int, _WeakEntry] = {}
        self._named: OrderedDict[str, _AgentState] = OrderedDict()
        self._unidentified: set[str] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._weak) + len(self._named)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"<CircuitBreaker duplicateLimit={c.duplicate_limit} window={c.window}"
            f" maxCallsPerAgent={c.max_calls_per_agent} agents={len(self)}>"
        )

    # -- the two ways in --

    def check(self, execution: object) -> DenyMessage | None:
        """Judge one tool execution before its body runs: the deny message, or ``None`` to allow.

        The execution's ``name``, ``arguments`` and ``agent`` are read by attribute or by key.
        """
        name = _field(execution, "name")
        tool = _plain_str(name)
        agent = _field(execution, "agent")
        shown = tool if tool is not None else f"<{type(name).__name__}>"
        denial = self._judge(tool, shown, agent, execution, _arguments_of_execution)
        if denial is None:
            return None
        return DenyMessage(self._message(shown, denial), denial.kind, denial.count, denial.limit)

    def check_call(self, tool_name: str, args: object, *, agent: object = None) -> None:
        """Judge one call before it runs; raise :class:`CircuitBreakerError` to deny it.

        ``agent`` is the calling agent: an agent object (its state is weakly held and goes with
        it), a string id (state kept under that id), or ``None`` (the state shared by every call
        without an agent).
        """
        if type(tool_name) is not str:
            name = _plain_str(tool_name)
            if name is None:
                raise TypeError(
                    f"circuit breaker: the tool name must be a str, got {type(tool_name).__name__}"
                )
            tool_name = name
        denial = self._judge(tool_name, tool_name, agent, args, _arguments_as_given)
        del args  # no frame of ours may still hold the arguments once a denial leaves it
        if denial is not None:
            raise CircuitBreakerError(
                self._message(tool_name, denial),
                kind=denial.kind,
                count=denial.count,
                limit=denial.limit,
                tool_name=tool_name,
                session_id=_agent_id(agent),
            )

    # -- inspecting and resetting --

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

    # -- the verdict --

    def _judge(
        self,
        tool: str | None,
        shown: str,
        agent: object,
        source: object,
        arguments_of: Callable[[object], object],
    ) -> _Denial | None:
        """The verdict on one call of ``tool`` by ``agent``: a denial, or ``None`` to allow it.

        ``tool`` is ``None`` when the call's name is not a string (``shown`` names its type). The
        arguments are ``arguments_of(source)``, read only when the cap has not decided first.
        """
        if self._closed or not self.config.enabled or not self._guards(tool):
            return None
        cap = self.config.max_calls_per_agent
        with self._lock:
            if self._closed:
                return None
            state = self._state_for(agent)
            denial = self._deny(state, "cap", state.calls, cap) if 0 < cap <= state.calls else None
        if denial is None:
            # Identify outside the lock, so hashing large arguments holds up no other thread; an
            # agent past its cap was denied above without reading its arguments at all.
            digest = self._identify(tool, arguments_of(source)) if tool is not None else None
            with self._lock:
                if self._closed:
                    return None
                denial = self._judge_locked(state, digest)
            if denial is None:
                return None
        if denial.first and self._incidents is not None:
            self._incidents.record(
                kind=denial.kind,
                tool=shown,
                count=denial.count,
                limit=denial.limit,
                agent_id=_agent_id(agent),
                agent=agent,
            )
        return denial

    def _message(self, tool: str, denial: _Denial) -> str:
        return self.config.deny_message.format(
            tool=plain_name(tool), count=denial.count, limit=denial.limit
        )

    def _guards(self, tool: str | None) -> bool:
        if self._only:
            return tool in self._only
        return tool not in self._exempt

    def _identify(self, tool: str, arguments: object) -> bytes | None:
        """The call's digest, or ``None`` when the arguments cannot be read or identified."""
        try:
            ignore = self._ignore
            if (
                ignore
                and isinstance(arguments, (dict, Mapping))  # dict first: the fast check
                and not ignore.isdisjoint(arguments)
            ):
                arguments = {k: v for k, v in arguments.items() if k not in ignore}
            return call_digest(tool, arguments)
        except Exception as error:
            # Anything raised while reading the arguments (a container whose methods raise, a
            # key that cannot be compared, a property that fails) or refused by canonical_json:
            # fail open. Blocking real work the breaker cannot judge would be worse.
            self._unidentifiable(tool, error)
            return None

    def _unidentifiable(self, tool: str, error: Exception) -> None:
        # Say so once per tool, naming only the type (escaped: a type's name can be anything).
        with self._lock:
            if tool in self._unidentified or len(self._unidentified) >= _WARNED_TOOLS_LIMIT:
                return
            self._unidentified.add(tool)
        import logging  # only now: the guard's own path never needs it

        logging.getLogger("dsh_loop_brake.circuit_breaker").warning(
            "circuit breaker: the arguments of tool %s could not be identified (%s); such calls"
            " are allowed and not checked for duplicates",
            json_literal(tool),
            json_literal(describe_unidentifiable(error))[1:-1],
        )

    def _judge_locked(self, state: _AgentState, digest: bytes | None) -> _Denial | None:
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
        text = _plain_str(agent)
        if text is not None:
            return self._named.get(text) if text else self._host
        entry = self._weak.get(id(agent))
        if entry is not None and entry[0]() is agent:
            return entry[1]
        if _weakly_referenceable(agent):
            return None  # not seen yet
        ident = _agent_id(agent)
        return self._named.get(ident) if ident is not None else self._host

    def _state_for(self, agent: object) -> _AgentState:
        """The state for ``agent``, created on its first call (caller holds the lock)."""
        text = _plain_str(agent)
        if text is not None:
            if text:
                return self._named_state(text)
        elif agent is not None:
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
                return self._named_state(ident)
        # No agent, or one that can neither be weakly referenced nor told apart by an id.
        if self._host is None:
            self._host = _AgentState(self.config.window)
        return self._host

    def _named_state(self, ident: str) -> _AgentState:
        named = self._named.get(ident)
        if named is not None:
            self._named.move_to_end(ident)
            return named
        named = self._named[ident] = _AgentState(self.config.window)
        if len(self._named) > _MAX_NAMED_AGENTS:
            self._named.popitem(last=False)  # the least recently active agent
        return named
