"""The circuit breaker itself: per-agent windows and call counts, and its verdict on a call.

A call is denied when it would be the ``duplicateLimit``-th identical call in the agent's window
of recent allowed calls, or when the agent has already made ``maxCallsPerAgent`` allowed calls.
Call identity is the loop brake's (the SHA-256 of the tool name and the canonical JSON of the
arguments), taken after dropping the annotation-only arguments listed in ``ignoreArgs``.

Two ways in, one verdict: :meth:`CircuitBreaker.check` is the harness guard (it *returns* the deny
message, a :class:`DenyMessage`), :meth:`CircuitBreaker.check_call` is for any other host (it
*raises* :class:`CircuitBreakerError`). The plugin that installs the guard is
``dsh_loop_brake.circuit_breaker``; this module needs neither pluggy nor the harness.

The state -- per agent a window of recent allowed call digests, a call count and the incident
marks -- is judged by one rule (``BreakerWindow.judge``, which every store follows) in one atomic
step per call: in the breaker's own per-object window for an agent object when the store is the
memory store, otherwise in the store (``judge_call``), where a shared store keys agents by id.

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
from collections.abc import Mapping

from dsh_loop_brake._breaker_config import CircuitBreakerConfig
from dsh_loop_brake._canonical import call_digest, describe_unidentifiable
from dsh_loop_brake._errors import ToolCallDenied
from dsh_loop_brake._execution import read_field
from dsh_loop_brake._incidents import IncidentLog
from dsh_loop_brake._short_repr import json_literal
from dsh_loop_brake._store import BreakerDenial, BreakerWindow, MemoryStore, check_breaker_call
from dsh_loop_brake._store_failures import store_failed

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, Literal, SupportsIndex, final

    from dsh_loop_brake._store import Store

    Kind = Literal["duplicate", "cap"]
else:
    from dsh_loop_brake._no_typing import final


__all__ = ["CODE", "CircuitBreaker", "CircuitBreakerError", "DenyMessage"]

CODE: Final = "CIRCUIT_BREAKER"
"""The ``code`` of every circuit-breaker denial, raised or returned."""

#: The logger the breaker warns on (``logging`` is imported only when it does).
LOGGER_NAME: Final = "dsh_loop_brake.circuit_breaker"
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


# --- state ---------------------------------------------------------------------------------


if TYPE_CHECKING:
    _WeakEntry = tuple[weakref.ref[Any], BreakerWindow]


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

    ``store`` is where the windows, call counts and incident marks live: ``None`` (the default)
    is a ``MemoryStore`` private to this breaker, and then an agent object's state is held
    weakly, with the object. In a shared store (``SQLiteStore``, ``RedisStore``) every agent is
    keyed by its id, so processes sharing the store judge one agent together; agents without an
    id share the no-agent state. The breaker never closes a store it was given. ``close()`` (or
    leaving a ``with`` block) stops it judging and forgets what this process holds.
    """

    __slots__ = (
        "_by_id",
        "_closed",
        "_errors_lock",
        "_exempt",
        "_ignore",
        "_incidents",
        "_limits",
        "_lock",
        "_only",
        "_owns_store",
        "_store",
        "_store_errors",
        "_unidentified",
        "_weak",
        "config",
    )

    def __init__(
        self, config: CircuitBreakerConfig | None = None, *, store: Store | None = None
    ) -> None:
        self.config = config if config is not None else CircuitBreakerConfig()
        c = self.config
        # The limits as every store checks them (a config built by hand, not by resolve_config,
        # is refused here rather than failing every call).
        check_breaker_call(None, None, c.duplicate_limit, c.window, c.max_calls_per_agent)
        self._limits = (c.duplicate_limit, c.window, c.max_calls_per_agent)
        self._owns_store = store is None
        if store is None:
            store = MemoryStore()
        elif not callable(getattr(store, "judge_call", None)):
            raise TypeError(
                "circuit breaker: store must be a store (a MemoryStore, SQLiteStore or RedisStore"
                f" from dsh_loop_brake.stores) or None, got {type(store).__name__}"
            )
        self._store: Store = store
        # A shared store keys every agent by its id; the memory store keeps an agent object's
        # state with the object (weakly held), and only ids and the no-agent state in the store.
        self._by_id = bool(store.shared)
        self._exempt = frozenset(c.exempt)
        self._only = frozenset(c.only)
        self._ignore = frozenset(c.ignore_args)
        path = c.incident_log
        self._incidents = IncidentLog(path) if path else None
        self._lock = threading.Lock()
        self._weak: dict[int, _WeakEntry] = {}
        self._unidentified: set[str] = set()
        self._closed = False
        self._store_errors = 0
        self._errors_lock = threading.Lock()

    @property
    def store(self) -> Store:
        """Where the windows, call counts and incident marks live."""
        return self._store

    @property
    def store_errors(self) -> int:
        """How many calls the store failed for, each allowed and not counted (fail open)."""
        return self._store_errors

    def __len__(self) -> int:
        return len(self._weak) + self._store.count_agents()

    def __repr__(self) -> str:
        c = self.config
        # A shared store's agents are not counted here: that would be a scan of the store, and
        # a repr is made wherever a traceback is rendered.
        held = f"store={self._store.url}" if self._by_id else f"agents={len(self)}"
        return (
            f"<CircuitBreaker duplicateLimit={c.duplicate_limit} window={c.window}"
            f" maxCallsPerAgent={c.max_calls_per_agent} {held}>"
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
        it; in a shared store it is keyed by its id), a string id (state kept under that id), or
        ``None`` (the state shared by every call without an agent).
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
        if not self._by_id and agent is not None and _plain_str(agent) is None:
            with self._lock:
                entry = self._weak.get(id(agent))
                if entry is not None and entry[0]() is agent:
                    return entry[1].calls
            if _weakly_referenceable(agent):
                return 0  # not seen yet
        return self._store.breaker_calls(_agent_id(agent))

    def reset(self) -> None:
        """Forget every agent's window, call count and reported incidents -- in the store, so in
        a shared store for every process that uses it."""
        with self._lock:
            self._weak.clear()
        self._store.forget_breaker()

    def close(self) -> None:
        """Stop judging (every later call is allowed), forget what this process holds, and
        close what the breaker opened itself; idempotent. The plugin's dispose calls it.

        What a shared store holds belongs to every process that uses it: it is left as it is. A
        store the breaker was given is never closed (whoever opened it closes it, as the plugin
        closes the store its ``apply`` opened); the memory store it made for itself is. The
        incident log is let go: a closed breaker denies nothing, so it writes nothing.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._weak.clear()
            self._incidents = None
        if not self._by_id:
            self._store.forget_breaker()
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> CircuitBreaker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the verdict --

    def _judge(
        self,
        tool: str | None,
        shown: str,
        agent: object,
        source: object,
        arguments_of: Callable[[object], object],
    ) -> BreakerDenial | None:
        """The verdict on one call of ``tool`` by ``agent``: a denial, or ``None`` to allow it.

        ``tool`` is ``None`` when the call's name is not a string (``shown`` names its type). The
        arguments are ``arguments_of(source)``. One atomic step judges and records the call: in
        the agent's own window (an agent object, memory store), or in the store.
        """
        if self._closed or not self.config.enabled or not self._guards(tool):
            return None
        # Identified before any lock is taken, so hashing large arguments holds up no other
        # thread, and before the store is asked, so a check is one round trip.
        digest = self._identify(tool, arguments_of(source)) if tool is not None else None
        limit, window, cap = self._limits
        denial: BreakerDenial | None
        if not self._by_id:
            with self._lock:
                if self._closed:
                    return None
                state = self._window_of(agent)
                if state is not None:
                    denial = state.judge(digest, limit, window, cap)
            if state is not None:
                return self._reported(denial, shown, agent)
        if self._closed:
            return None
        # In the store under the agent's id (``None``: the no-agent state).
        key = _agent_id(agent)
        try:
            denial = self._store.judge_call(
                key, digest, duplicate_limit=limit, window=window, cap=cap
            )
        except Exception as error:
            # Fail open: the breaker's memory is away. The call runs, uncounted.
            self._store_failed(error)
            return None
        return self._reported(denial, shown, agent)

    def _reported(
        self, denial: BreakerDenial | None, shown: str, agent: object
    ) -> BreakerDenial | None:
        """``denial``, written to the incident log first when it is the agent's first of its
        kind."""
        incidents = self._incidents  # read once: close() lets it go from another thread
        if denial is not None and denial.first and incidents is not None:
            incidents.record(
                kind=denial.kind,
                tool=shown,
                count=denial.count,
                limit=denial.limit,
                agent_id=_agent_id(agent),
                agent=agent,
            )
        return denial

    def _message(self, tool: str, denial: BreakerDenial) -> str:
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

        logging.getLogger(LOGGER_NAME).warning(
            "circuit breaker: the arguments of tool %s could not be identified (%s); such calls"
            " are allowed and not checked for duplicates",
            json_literal(tool),
            json_literal(describe_unidentifiable(error))[1:-1],
        )

    def _store_failed(self, error: Exception) -> None:
        with self._errors_lock:
            self._store_errors += 1
        store_failed(self._store, error, logger=LOGGER_NAME, brake="circuit breaker")

    def _window_of(self, agent: object) -> BreakerWindow | None:
        """The memory store's per-object state: the window of an agent object, created on its
        first call; ``None`` for an agent kept in the store by id, or no agent (caller holds the
        lock)."""
        if agent is None or _plain_str(agent) is not None:
            return None
        key = id(agent)
        entry = self._weak.get(key)
        if entry is not None and entry[0]() is agent:
            return entry[1]
        if not _weakly_referenceable(agent):
            return None  # a dict, a slotted object: keyed by its id
        try:
            ref = weakref.ref(agent, functools.partial(_forget, self._weak, key))
        except TypeError:
            return None  # a type that claims weak references but refuses them: keyed by id
        state = BreakerWindow()
        self._weak[key] = (ref, state)
        return state
