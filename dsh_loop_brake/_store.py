"""Where the brakes keep their counts: the ``Store`` protocol, ``MemoryStore`` and ``StoreError``.

A store holds two kinds of state, both keyed by strings the brakes choose and both holding call
*digests* (the 32-byte SHA-256 of a call, never an argument value):

* the loop brake's **streaks**: per session one current digest and how many times in a row it was
  called;
* the circuit breaker's **windows**: per agent the digests of its most recent allowed calls, how
  many calls it was allowed in all, and which kinds of denial it has already been reported for.

Every method that changes state is **one atomic step**, so processes (or machines) sharing a
store get exactly the counts one process would. This module holds the contract and the
in-process store; ``dsh_loop_brake.stores`` adds the SQLite and Redis stores and ``open_store``.

The protocol, method by method (every store implements exactly this; the brakes use nothing
else):

``advance_streak(session: str, digest: bytes) -> int``
    Compare and advance, atomically: when ``digest`` is the session's current digest its count
    grows by one, otherwise the session's streak becomes ``digest`` with count 1. Returns the new
    count. (A denied call is advanced too: the loop brake keeps it in the streak.)
``read_streak(session: str) -> tuple[bytes, int] | None``
    The session's current digest and count, or ``None`` when it has no streak.
``forget_streaks(session: str | None = None) -> None``
    Forget one session's streak (what the loop brake does for a call it cannot identify, and for
    ``reset(session)``), or every session's (``None``).
``count_streaks() -> int``
    How many sessions have a streak (``len(brake)``).
``judge_call(agent, digest, *, duplicate_limit, window, cap) -> BreakerDenial | None``
    The circuit breaker's check, atomically: ``agent`` is an id (``str``) or ``None`` for the
    shared no-agent state; ``digest`` is the call's digest, or ``None`` for a call that could not
    be identified. First the agent's window is cut to its ``window`` most recent digests. Then:
    when ``0 < cap <= calls`` the call is denied with kind ``"cap"`` and count ``calls``;
    otherwise, when ``digest`` is given and (its occurrences in the window + 1) ``>=
    duplicate_limit``, it is denied with kind ``"duplicate"`` and that count; otherwise it is
    allowed and recorded: ``calls`` grows by one and ``digest`` (if given) joins the window,
    evicting the oldest digest once the window is full. A denied call is neither recorded nor
    counted. ``first`` in the denial is true for the agent's first denial of that kind (the
    incident mark). Returns ``None`` when the call is allowed.
``breaker_calls(agent: str | None) -> int``
    How many calls the agent was allowed (0 for an agent the store does not know).
``forget_breaker() -> None``
    Forget every agent's window, call count and incident marks.
``count_agents() -> int``
    How many agents with an id the store holds state for (the no-agent state is not counted).
``ping() -> None``
    Reach the store once; raise ``StoreError`` when it cannot be reached or refuses the
    credentials.
``close() -> None``
    Release connections. Idempotent; the store stays usable (the next operation reconnects).
``url: str``, ``shared: bool``, ``session_ttl: int | None``
    The store's URL with any password shown as ``***`` (also ``str(store)``; ``repr(store)`` is
    ``<RedisStore redis://:***@host:6379/0>``); whether other processes can see the state
    (``False`` only for the memory store); seconds of inactivity after which a session's or an
    agent's state is forgotten (``None``: never, the memory store).

Arguments are checked the same way by every store: ``session`` and ``agent`` must be ``str``
(``agent`` may be ``None``), a digest ``bytes`` of length 32, ``duplicate_limit`` and ``window``
integers from 1 and ``cap`` an integer from 0 (at most 2**53 - 1, not ``bool``); anything else is a
``TypeError`` or ``ValueError``, with the same message on every store. Any failure of the store
itself (unreachable, locked past the busy timeout, corrupted, gone mid-run) is a ``StoreError``;
the next operation tries again by itself.

State that no call has touched for ``session_ttl`` seconds is forgotten by the shared stores (the
next call starts at 1; every check touches, denied ones too). ``MemoryStore`` keeps today's
in-process behaviour: no expiry, and at most ``max_agents`` (1024) agent ids, the least recently
judged dropped first, as the circuit breaker bounds the agents it keys by id.

Exceptions::

    Exception
    └── StoreError                code LOOP_BRAKE_STORE: a store cannot be opened, reached or used
        └── StoreConfigError      (also a ValueError) code LOOP_BRAKE_STORE_CONFIG: a store URL or
            │                     setting that can never work (unknown scheme, malformed URL, a
            │                     file that is not a SQLite database, a directory that cannot be
            │                     created)
            └── MissingExtraError (also an ImportError; in dsh_loop_brake.stores) a Redis URL
                                  without the ``redis`` extra installed
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from dsh_loop_brake._short_repr import short_repr

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final, Literal, Protocol, TypeVar, final

    _Named = TypeVar("_Named", bound="StoreNamedByUrl")
else:
    from dsh_loop_brake._no_typing import final

    Protocol = object  # Store is a protocol for type checkers; at run time no class derives from it


__all__ = [
    "DEFAULT_SESSION_TTL",
    "DENIAL_MARKS",
    "DIGEST_SIZE",
    "MAX_COUNT",
    "MAX_SESSION_TTL",
    "SESSION_TTL_RULE",
    "STREAK_DIGEST_BITS",
    "BreakerDenial",
    "BreakerWindow",
    "MemoryStore",
    "Store",
    "StoreConfigError",
    "StoreError",
    "StoreNamedByUrl",
    "check_breaker_call",
    "check_digest",
    "check_key",
    "check_session_ttl",
    "check_streak_call",
]

#: The length of a call digest (SHA-256) in bytes.
DIGEST_SIZE: Final = 32

#: The largest limit, window or cap a store accepts (what a Redis script's numbers hold exactly).
MAX_COUNT: Final = 2**53 - 1

#: The longest session_ttl a store accepts: 100 years, "never" for any agent run.
MAX_SESSION_TTL: Final = 100 * 366 * 86400

#: A shared store's session_ttl unless told otherwise (a row's ``sessionTtl`` too): one day.
DEFAULT_SESSION_TTL: Final = 86400

#: The session_ttl values a store accepts, as every message about one says it.
SESSION_TTL_RULE: Final = f"an integer number of seconds from 1 to {MAX_SESSION_TTL} (100 years)"


class StoreError(Exception):
    """A store could not be opened, reached or used; ``url`` names it (password as ``***``)."""

    code: str = "LOOP_BRAKE_STORE"
    #: The row key whose store this is (``"store"``) when a plugin opened it from a row, so a host
    #: can say which patch file and line configured it; ``None`` otherwise.
    key: str | None = None

    def __init__(self, message: str, *, url: str | None = None) -> None:
        self.url = url
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (type(self), str(self), self.url))


class StoreConfigError(StoreError, ValueError):
    """A store URL or setting that can never work: the message names the URL and what to do."""

    code: str = "LOOP_BRAKE_STORE_CONFIG"


def _rebuild_error(cls: type[StoreError], message: str, url: str | None) -> StoreError:
    return cls(message, url=url)


@final
class BreakerDenial:
    """Why the circuit breaker denies a call: ``judge_call``'s answer when it is denied."""

    __slots__ = ("count", "first", "kind", "limit")

    def __init__(
        self, kind: Literal["duplicate", "cap"], count: int, limit: int, first: bool
    ) -> None:
        self.kind: Literal["duplicate", "cap"] = kind
        #: for ``duplicate`` the identical calls in the window counting this one, for ``cap`` the
        #: calls the agent has made; both equal ``limit`` at the first denial
        self.count = count
        self.limit = limit
        #: the agent's first denial of this kind (the one an incident line is written for)
        self.first = first

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BreakerDenial):
            return NotImplemented
        return (self.kind, self.count, self.limit, self.first) == (
            other.kind,
            other.count,
            other.limit,
            other.first,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.count, self.limit, self.first))

    def __repr__(self) -> str:
        return (
            f"BreakerDenial(kind={self.kind!r}, count={self.count}, limit={self.limit},"
            f" first={self.first})"
        )


class Store(Protocol):
    """Where a brake keeps its counts; see the module docstring for the exact contract."""

    @property
    def url(self) -> str: ...

    @property
    def shared(self) -> bool: ...

    @property
    def session_ttl(self) -> int | None: ...

    def advance_streak(self, session: str, digest: bytes) -> int: ...

    def read_streak(self, session: str) -> tuple[bytes, int] | None: ...

    def forget_streaks(self, session: str | None = None) -> None: ...

    def count_streaks(self) -> int: ...

    def judge_call(
        self,
        agent: str | None,
        digest: bytes | None,
        *,
        duplicate_limit: int,
        window: int,
        cap: int,
    ) -> BreakerDenial | None: ...

    def breaker_calls(self, agent: str | None) -> int: ...

    def forget_breaker(self) -> None: ...

    def count_agents(self) -> int: ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


class StoreNamedByUrl:
    """What every store says alike: ``str(store)`` is its ``url`` (password as ``***``),
    ``repr(store)`` is ``<ClassName url>``, and ``with store:`` closes it at the end."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def url(self) -> str: ...

        def close(self) -> None: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    def __str__(self) -> str:
        return self.url

    def __enter__(self: _Named) -> _Named:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- argument checks, shared by every store so that all give the same errors ------------------


def check_key(value: object, what: str, *, optional: bool = False) -> None:
    """``value`` must be a ``str`` (or ``None`` when ``optional``): a session or an agent id."""
    if isinstance(value, str) or (optional and value is None):
        return
    allowed = "a str or None" if optional else "a str"
    raise TypeError(f"store: the {what} must be {allowed}, got {type(value).__name__}")


def check_digest(value: object, *, optional: bool = False) -> None:
    """``value`` must be 32 ``bytes``, a call's SHA-256 digest (or ``None`` when ``optional``)."""
    if isinstance(value, bytes):
        if len(value) != DIGEST_SIZE:
            raise ValueError(
                f"store: a call digest must be {DIGEST_SIZE} bytes (SHA-256), got {len(value)}"
            )
        return
    if optional and value is None:
        return
    allowed = "bytes or None" if optional else "bytes"
    raise TypeError(f"store: a call digest must be {allowed}, got {type(value).__name__}")


def check_streak_call(session: object, digest: object) -> None:
    """The checks of ``advance_streak``'s arguments, in the order every store makes them."""
    if type(session) is str and type(digest) is bytes and len(digest) == DIGEST_SIZE:
        return  # the usual call: nothing to say
    check_key(session, "session")
    check_digest(digest)


def _check_count(value: object, what: str, minimum: int) -> None:
    if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"store: {what} must be an int, got {type(value).__name__}")
    if not minimum <= value <= MAX_COUNT:
        raise ValueError(f"store: {what} must be from {minimum} to {MAX_COUNT}, got {value}")


def check_breaker_call(
    agent: object, digest: object, duplicate_limit: object, window: object, cap: object
) -> None:
    """The checks of ``judge_call``'s arguments, in the order every store makes them."""
    check_key(agent, "agent", optional=True)
    check_digest(digest, optional=True)
    _check_count(duplicate_limit, "duplicate_limit", 1)
    _check_count(window, "window", 1)
    _check_count(cap, "cap", 0)


def check_session_ttl(value: object, url: str) -> int:
    """``session_ttl`` must be an integer number of seconds from 1 to 100 years."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SESSION_TTL:
        return int(value)
    raise StoreConfigError(
        f"store {url}: session_ttl must be {SESSION_TTL_RULE}, got {short_repr(value)}", url=url
    )


# --- the memory store -------------------------------------------------------------------------

# A session's streak is one int: the current call's digest in the low 256 bits and how many
# times in a row it was made above them. One small object per session (about 60 bytes) keeps
# 100,000 sessions within 256 bytes each, session-id string and dict slot included.
STREAK_DIGEST_BITS: Final = 8 * DIGEST_SIZE
_STREAK_DIGEST_MASK: Final = (1 << STREAK_DIGEST_BITS) - 1
_STREAK_COUNT_UNIT: Final = 1 << STREAK_DIGEST_BITS
_int_from_bytes: Final = int.from_bytes  # looked up once, not on every call

#: Bits of an agent's incident marks: the kinds of denial already reported for it.
DENIAL_MARKS: Final = {"duplicate": 1, "cap": 2}


@final
class BreakerWindow:
    """One agent's circuit-breaker state in memory, and the judging rule every store follows.

    ``recent`` holds the digests of the agent's most recent allowed calls (oldest first) and
    ``counts`` their multiset; ``calls`` counts every allowed call, identified or not; ``marks``
    says which kinds of denial were already reported. The circuit breaker keeps one per agent
    object (weakly held) and ``MemoryStore`` one per agent id.
    """

    __slots__ = ("calls", "counts", "marks", "recent")

    def __init__(self) -> None:
        self.recent: deque[bytes] = deque()
        self.counts: dict[bytes, int] = {}
        self.calls = 0
        self.marks = 0

    def judge(
        self, digest: bytes | None, duplicate_limit: int, window: int, cap: int
    ) -> BreakerDenial | None:
        """``judge_call`` for this agent (arguments already checked; the caller holds a lock)."""
        recent = self.recent
        while len(recent) > window:  # a smaller window than the last call's
            self._evict()
        if 0 < cap <= self.calls:
            return self._deny("cap", self.calls, cap)
        if digest is not None:
            count = self.counts.get(digest, 0) + 1
            if count >= duplicate_limit:
                return self._deny("duplicate", count, duplicate_limit)
        # Only allowed calls are recorded: a denied call never ran, so it must neither push its
        # own count higher nor evict a real call from the window (the breaker would latch).
        self.calls += 1
        if digest is not None:
            if len(recent) >= window:
                self._evict()
            recent.append(digest)
            self.counts[digest] = self.counts.get(digest, 0) + 1
        return None

    def _evict(self) -> None:
        oldest = self.recent.popleft()
        left = self.counts[oldest] - 1
        if left:
            self.counts[oldest] = left
        else:
            del self.counts[oldest]

    def _deny(self, kind: Literal["duplicate", "cap"], count: int, limit: int) -> BreakerDenial:
        mark = DENIAL_MARKS[kind]
        first = not self.marks & mark
        self.marks |= mark
        return BreakerDenial(kind, count, limit, first)


@final
class MemoryStore(StoreNamedByUrl):
    """The process's own memory: the default store, private to the brake that holds it.

    No expiry, exactly as a brake without a store behaves. Thread-safe: every change is made
    under one lock. Agents are held by id, at most ``max_agents`` of them (the least recently
    judged is dropped first), as the circuit breaker bounds the agents it keys by id.
    """

    __slots__ = ("_agents", "_lock", "_max_agents", "_no_agent", "_streaks")

    url: Final = "memory:"
    shared: Final = False
    session_ttl: Final = None

    def __init__(self, *, max_agents: int = 1024) -> None:
        _check_count(max_agents, "max_agents", 1)
        self._lock = threading.Lock()
        # session -> its streak, packed in one int (see _STREAK_COUNT_UNIT)
        self._streaks: dict[str, int] = {}
        self._agents: OrderedDict[str, BreakerWindow] = OrderedDict()
        self._no_agent: BreakerWindow | None = None
        self._max_agents = max_agents

    # -- the loop brake's streaks --

    def advance_streak(self, session: str, digest: bytes) -> int:
        # check_streak_call's test written out: a call fewer on the default path of every check
        if type(session) is not str or type(digest) is not bytes or len(digest) != DIGEST_SIZE:
            check_streak_call(session, digest)  # the rare path: say exactly what is wrong
        call = _int_from_bytes(digest, "big")
        lock = self._lock
        lock.acquire()  # rather than `with`, which costs twice as much on every call's path
        try:
            streak = self._streaks.get(session, 0)
            if streak & _STREAK_DIGEST_MASK != call:
                streak = call  # another call: a new streak, counted from zero
            streak += _STREAK_COUNT_UNIT
            self._streaks[session] = streak
        finally:
            lock.release()
        return streak >> STREAK_DIGEST_BITS

    def read_streak(self, session: str) -> tuple[bytes, int] | None:
        if type(session) is not str:
            check_key(session, "session")  # replay reads a streak after every call
        # No lock: a streak is one immutable int, replaced whole, and one dict read is atomic.
        streak = self._streaks.get(session)
        if streak is None:
            return None
        digest = (streak & _STREAK_DIGEST_MASK).to_bytes(DIGEST_SIZE, "big")
        return digest, streak >> STREAK_DIGEST_BITS

    def forget_streaks(self, session: str | None = None) -> None:
        check_key(session, "session", optional=True)
        with self._lock:
            if session is None:
                self._streaks.clear()
            else:
                self._streaks.pop(session, None)

    def count_streaks(self) -> int:
        return len(self._streaks)

    # -- the circuit breaker's windows --

    def judge_call(
        self,
        agent: str | None,
        digest: bytes | None,
        *,
        duplicate_limit: int,
        window: int,
        cap: int,
    ) -> BreakerDenial | None:
        check_breaker_call(agent, digest, duplicate_limit, window, cap)
        with self._lock:
            return self._window(agent).judge(digest, duplicate_limit, window, cap)

    def breaker_calls(self, agent: str | None) -> int:
        check_key(agent, "agent", optional=True)
        with self._lock:
            state = self._no_agent if agent is None else self._agents.get(agent)
            return state.calls if state is not None else 0

    def forget_breaker(self) -> None:
        with self._lock:
            self._agents.clear()
            self._no_agent = None

    def count_agents(self) -> int:
        return len(self._agents)

    def _window(self, agent: str | None) -> BreakerWindow:
        """The agent's state, created on its first call (the caller holds the lock)."""
        if agent is None:
            if self._no_agent is None:
                self._no_agent = BreakerWindow()
            return self._no_agent
        agents = self._agents
        state = agents.get(agent)
        if state is not None:
            agents.move_to_end(agent)
            return state
        state = agents[agent] = BreakerWindow()
        if len(agents) > self._max_agents:
            agents.popitem(last=False)  # the least recently judged agent
        return state

    # -- the rest of the protocol --

    def ping(self) -> None:
        """Always reachable: it is this process's memory."""

    def close(self) -> None:
        """Nothing to release; the state stays (a memory store is closed with its brake)."""
