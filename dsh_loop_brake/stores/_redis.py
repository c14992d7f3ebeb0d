"""``RedisStore``: both brakes' state in Redis, shared by the processes of many machines.

Each check is one server-side Lua script (registered with redis-py's ``register_script``, so it
runs by ``EVALSHA``): one round trip, and atomic, because Redis runs a script to its end before
any other command. Keys (``prefix`` is ``dsh-loop-brake:`` unless told otherwise):

* ``<prefix>streak:<session>`` -- a string: the 32-byte digest, the 8-byte token of the check
  that wrote it, then the count in decimal;
* ``<prefix>agent:<id>``, and ``<prefix>no-agent`` for calls without an agent -- a hash with
  ``calls``, ``marks`` (incident bits), ``next`` and ``head`` (the window's sequence bounds),
  ``w:<seq>`` (the window's digests), ``c:<digest>`` (how often each digest is in it), and ``t``
  and ``a``: the token of the last check and its answer.

Every key a check touches gets ``EXPIRE session_ttl``, so state untouched for that long goes away
by itself. One script touches one key, so the store also works through a Redis Cluster client.

A check whose answer is lost on the way back (the connection drops after the script ran) may be
sent again by the client: redis-py's own client retries three times by default since redis-py 6,
a cluster client on its own terms. So every check carries a random token, which the script keeps
with the state it wrote; the same check arriving again gets the answer it was given the first
time, and nothing is counted twice. Only the last check's token is kept: a retry that comes after
another check of the same session or agent counts again (for a streak that matters only when the
same call is made twice at once in one session).

The ``redis`` package is the optional extra ``redis``, imported only when a ``RedisStore`` is
made. Connections made from a URL wait at most 2 s to connect or for an answer and never retry a
command by themselves: a check whose answer is lost fails at once (and the brake fails open)
rather than holding up the call with retries.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import weakref
from typing import TYPE_CHECKING, Any, Final, final
from urllib.parse import parse_qsl, urlsplit

from dsh_loop_brake._short_repr import json_literal
from dsh_loop_brake._store import (
    DEFAULT_SESSION_TTL,
    DIGEST_SIZE,
    BreakerDenial,
    StoreConfigError,
    StoreError,
    StoreNamedByUrl,
    check_breaker_call,
    check_key,
    check_session_ttl,
    check_streak_call,
)
from dsh_loop_brake.stores._url import (
    REDIS_OPTIONS,
    REDIS_SCHEMES,
    SHOWN_OPTIONS,
    redact_url,
    shown,
)

if TYPE_CHECKING:
    import redis

__all__ = ["SOCKET_TIMEOUT", "MissingExtraError", "RedisStore", "check_redis_url"]

#: Seconds a connection made from a URL waits to connect, and for each answer.
SOCKET_TIMEOUT: Final = 2.0

# KEYS[1] the session's key; ARGV[1] the digest followed by the check's token, which is also how
# the value begins. Each store writes its session_ttl into its own copy of the scripts (@TTL@):
# every argument fewer to encode on every check is measurable against a round trip that is
# mostly the client's own work (so the token travels inside the digest's argument, too).
# A value the store did not write (another type, or a string not of this form) is replaced, and
# the count starts again at 1: the answer is then negative (-1), for the store to say so.
_ADVANCE: Final = """
local value = redis.pcall('GET', KEYS[1])
local count, sign = 1, 1
if type(value) == 'table' then  -- not a string (WRONGTYPE): not ours
    value, sign = false, -1
end
if value then
    local old = tonumber(string.sub(value, 41))
    if string.len(value) < 41 or not old or old < 1 or old > 9007199254740991
        or old ~= math.floor(old) then
        sign = -1  -- not ours
    elseif string.sub(value, 33, 40) == string.sub(ARGV[1], 33, 40) then
        return old  -- this check again: its answer was lost
    elseif string.sub(value, 1, 32) == string.sub(ARGV[1], 1, 32) then
        count = old + 1
    end
end
redis.call('SET', KEYS[1], ARGV[1] .. string.format('%d', count), 'EX', @TTL@)
return sign * count
"""

# KEYS[1] the agent's key; ARGV[1] the digest ('' for a call that was not identified) followed by
# the check's token, ARGV[2] duplicate_limit, ARGV[3] window, ARGV[4] cap.
# BreakerWindow.judge, step for step; the answer is kept in 'a' ('' allowed, else
# 'kind count limit first') for a retry of the same check (see the module docstring).
# State the store did not write -- the key of another type, a bound that is not a whole number,
# a window longer than the hash could hold (which would keep the script evicting for ever) -- is
# deleted and the agent starts afresh; the answer then says so: 1 for allowed (else false), a
# fifth item 1 in a denial.
_JUDGE: Final = """
local key, digest, token = KEYS[1], string.sub(ARGV[1], 1, -9), string.sub(ARGV[1], -8)
local limit, window, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local healed = 0
local kind_of_key = redis.call('TYPE', key)['ok']
if kind_of_key ~= 'hash' and kind_of_key ~= 'none' then
    redis.call('DEL', key)
    healed = 1
end
local state = redis.call('HMGET', key, 'calls', 'marks', 'next', 'head', 't', 'a')
if state[5] == token then  -- this check again: its answer was lost
    if state[6] == '' then return false end
    local kind, count, hit, first = string.match(state[6], '^(%a+) (%d+) (%d+) (%d)$')
    return {kind, tonumber(count), tonumber(hit), tonumber(first)}
end
local function whole(text)
    if not text then return 0 end
    local number = tonumber(text)
    if number and number >= 0 and number <= 9007199254740991 and number == math.floor(number)
    then return number end
    return nil
end
local calls, marks = whole(state[1]), whole(state[2])
local next_seq, head = whole(state[3]), whole(state[4])
if not (calls and marks and next_seq and head) or head > next_seq
    or next_seq - head > redis.call('HLEN', key) then
    redis.call('DEL', key)
    calls, marks, next_seq, head, healed = 0, 0, 0, 0, 1
end
local function int(number) return string.format('%d', number) end
local function evict()
    local field = 'w:' .. int(head)
    local oldest = redis.call('HGET', key, field)
    redis.call('HDEL', key, field)
    if oldest then
        local left = redis.pcall('HINCRBY', key, 'c:' .. oldest, -1)
        if type(left) ~= 'number' or left <= 0 then redis.call('HDEL', key, 'c:' .. oldest) end
    end
    head = head + 1
end
while next_seq - head > window do evict() end
local kind, count, hit
if cap > 0 and calls >= cap then
    kind, count, hit = 'cap', calls, cap
elseif digest ~= '' then
    count = (whole(redis.call('HGET', key, 'c:' .. digest)) or 0) + 1
    if count >= limit then kind, hit = 'duplicate', limit end
end
if kind then
    local mark = (kind == 'cap') and 2 or 1
    local first = 0
    if bit.band(marks, mark) == 0 then
        first = 1
        marks = marks + mark
    end
    local answer = kind .. ' ' .. int(count) .. ' ' .. int(hit) .. ' ' .. first
    redis.call('HSET', key, 'marks', int(marks), 'head', int(head), 't', token, 'a', answer)
    redis.call('EXPIRE', key, @TTL@)
    return {kind, count, hit, first, healed}
end
calls = calls + 1
if digest ~= '' then
    redis.call('HSET', key, 'w:' .. int(next_seq), digest)
    if type(redis.pcall('HINCRBY', key, 'c:' .. digest, 1)) ~= 'number' then
        redis.call('HSET', key, 'c:' .. digest, 1)
    end
    next_seq = next_seq + 1
    if next_seq - head > window then evict() end
end
redis.call('HSET', key, 'calls', int(calls), 'marks', int(marks), 'next', int(next_seq),
    'head', int(head), 't', token, 'a', '')
redis.call('EXPIRE', key, @TTL@)
if healed == 1 then return 1 end
return false
"""

#: The length of the random token each check carries (see the module docstring).
TOKEN_SIZE: Final = 8

_GLOB: Final = re.compile(rb"([*?\[\]\\])")
_SCAN_BATCH: Final = 500
_token: Final = os.urandom  # unique across processes and machines, and after fork
# When each store last warned of a key it replaced (weakly: a store made in its place after it
# is gone must warn again).
_healed_at: weakref.WeakKeyDictionary[RedisStore, float] = weakref.WeakKeyDictionary()


class MissingExtraError(StoreConfigError, ImportError):
    """A Redis store was asked for, but the ``redis`` extra is not installed."""


@final
class _ClientMaker:
    """Makes the client of a store made from a URL: at first, after ``close()`` and in a child
    after ``fork``. Its repr (and every frame's, since the URL is never a local) hides the
    password.

    Made from a URL ``_check_url`` accepted, it reads every option now, without connecting, and
    refuses a value redis-py cannot use (``StoreConfigError``): redis-py itself would find some
    of them only at the first connection, and a store that fails every check fails open for
    good.
    """

    __slots__ = ("_redis", "_url")

    def __init__(self, url: str, module: Any) -> None:
        self._url = url
        self._redis = module
        try:
            client = self()
            pool = client.connection_pool
            pool.connection_class(**pool.connection_kwargs)  # a connection object: no I/O
        except Exception as error:
            raise StoreConfigError(
                f"store {shown(url)}: the URL cannot be used ({type(error).__name__}:"
                f" {_without(error, url)})",
                url=redact_url(url),
            ) from None

    def __call__(self) -> Any:
        module = self._redis
        return module.Redis.from_url(
            self._url,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=module.retry.Retry(module.backoff.NoBackoff(), 0),
        )

    def __repr__(self) -> str:
        return f"<_ClientMaker {shown(self._url)}>"


# The stores that made their own client, for the child of a fork (see _after_fork_in_child).
_owned: weakref.WeakSet[RedisStore] = weakref.WeakSet()


def _without(error: BaseException, url: str) -> str:
    """``error``'s message, escaped, and with nothing of ``url`` that ``redact_url`` hides."""
    text = str(error)
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return json_literal(text)[1:-1]


def _secrets(url: str) -> list[str]:
    from urllib.parse import unquote

    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [value for name, value in parse_qsl(parts.query) if name not in SHOWN_OPTIONS]
    found = [secret for secret in found if secret]
    return found + [unquote(secret) for secret in found]


def _after_fork_in_child() -> None:
    # A lock that another thread of the parent held in redis-py's pool at the fork stays held
    # in the child, where no thread will ever release it: the pool's own fork check would wait
    # for it forever. So each store that made its client gets a new one; the inherited client is
    # dropped unused (its sockets are the parent's connections: only closed here, never shut
    # down, which redis-py does only in the process that opened them).
    for store in list(_owned):
        with contextlib.suppress(Exception):  # a fork must never fail for a store's sake
            store._reconnect()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _import_redis(url: str) -> Any:
    try:
        import redis
        import redis.backoff
        import redis.exceptions
        import redis.retry
    except ImportError as error:
        raise MissingExtraError(
            f"store {shown(url)}: a Redis store needs the redis package, which is not installed;"
            ' install it with: pip install "dsh-loop-brake[redis]"',
            url=redact_url(url),
        ) from error
    return redis


def _check_url(url: str) -> None:
    """What redis-py would misread, read as something else, or take and fail on only when it
    first connects (an option it does not know), refused with the URL named (password hidden)."""
    problem = _url_problem(url)
    if problem is not None:
        raise StoreConfigError(f"store {shown(url)}: the URL {problem}", url=redact_url(url))


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is malformed (the host or port cannot be read)"
    if parts.scheme not in REDIS_SCHEMES or not url.startswith(parts.scheme + "://"):
        return "is malformed (write redis://, rediss:// or unix:// followed by the address)"
    if parts.scheme == "unix" and not parts.path:
        return "has no socket path (write unix:///path/to/redis.sock)"
    if parts.scheme != "unix":
        if port == 0:  # redis-py would quietly use 6379
            return "has port 0 (write the server's port, or leave it out for 6379)"
        database = parts.path.strip("/")
        if database and not database.isdigit():
            return "has a database that is not a number (write redis://host:6379/0)"
    if parts.fragment or url.endswith("#"):
        return "has a fragment (#...), which redis-py ignores; remove it"
    options = REDIS_OPTIONS[parts.scheme]
    for name, _value in parse_qsl(parts.query, keep_blank_values=True):
        if name not in options:
            return (
                f"has the query option {json_literal(name)}, which the Redis store does not take"
                f" (it takes {', '.join(sorted(options))})"
            )
    return None


def check_redis_url(url: str) -> None:
    """Refuse, without connecting, a Redis URL that can never work: malformed, an option the
    store does not take or a value redis-py cannot read, or the ``redis`` extra not installed
    (``StoreConfigError``, ``MissingExtraError``)."""
    _check_url(url)
    _ClientMaker(url, _import_redis(url))  # reads every option, as making the store does


def _client_url(client: Any) -> str:
    """A URL for a client that was handed to us, built from its settings, password hidden; a
    cluster client's names the node it started from, and says it is a cluster's."""
    try:
        kwargs = client.get_connection_kwargs()
        node = client.get_default_node() if callable(getattr(client, "get_nodes", None)) else None
    except Exception:
        return f"redis://({type(client).__name__})"
    user = kwargs.get("username") or ""
    auth = f"{user}:***@" if kwargs.get("password") else (f"{user}@" if user else "")
    db = kwargs.get("db", 0)
    if node is not None:  # a RedisCluster: its connection settings name no address
        secure = kwargs.get("ssl") or "SSL" in str(kwargs.get("connection_class"))
        scheme = "rediss" if secure else "redis"
        return f"{scheme}://{auth}{node.host}:{node.port} ({type(client).__name__})"
    if kwargs.get("path"):
        return f"unix://{auth}{kwargs['path']}?db={db}"
    secure = kwargs.get("ssl") or "SSL" in str(kwargs.get("connection_class"))
    scheme = "rediss" if secure else "redis"
    return f"{scheme}://{auth}{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}"


@final
class RedisStore(StoreNamedByUrl):
    """The brakes' state in Redis, shared by every process (on any machine) that uses it.

    ``url_or_client`` is a ``redis://``, ``rediss://`` or ``unix://`` URL as
    ``redis.Redis.from_url`` reads it, or a ``redis.Redis`` client (made with
    ``decode_responses=False``, the default) that the store uses as it is and never closes.
    Making the store does not connect; ``ping()`` (which ``open_store`` calls) reaches it once.
    """

    __slots__ = (
        "__weakref__",
        "_advance",
        "_client",
        "_judge",
        "_maker",
        "_no_agent",
        "_prefix",
        "_redis",
        "_streak_prefix",
        "_ttl",
        "_url",
    )

    shared: Final = True

    def __init__(
        self,
        url_or_client: str | redis.Redis,
        *,
        session_ttl: int = DEFAULT_SESSION_TTL,
        prefix: str = "dsh-loop-brake:",
    ) -> None:
        self._url = "redis://(not made)"  # what repr shows of a store that failed to be made
        try:
            self._make(url_or_client, session_ttl, prefix)
        except StoreError as error:
            # No frame below this one reaches the traceback (several hold the URL, password and
            # all, in their locals), and this one lets go of it before raising.
            del url_or_client
            raise error.with_traceback(None) from None

    def _make(self, url_or_client: str | redis.Redis, session_ttl: int, prefix: str) -> None:
        maker: _ClientMaker | None = None
        if isinstance(url_or_client, str):
            self._url = redact_url(url_or_client)
            _check_url(url_or_client)
            maker = _ClientMaker(url_or_client, _import_redis(url_or_client))
            module = maker._redis
            client = maker()
        else:
            client = url_or_client
            self._url = _client_url(client)
            module = _import_redis(self._url)
            if not callable(getattr(client, "register_script", None)):
                raise StoreConfigError(
                    f"store: RedisStore needs a URL or a redis.Redis client, got"
                    f" {type(client).__name__}"
                )
            kwargs: dict[str, Any] = getattr(client, "get_connection_kwargs", dict)()
            if kwargs.get("decode_responses"):
                raise StoreConfigError(
                    f"store {self._url}: the client decodes responses to str, which would garble"
                    " the binary digests the store keeps; pass a client made with"
                    " decode_responses=False (the default), or a URL",
                    url=self._url,
                )
        self._ttl = check_session_ttl(session_ttl, self._url)
        if not isinstance(prefix, str) or not prefix:
            got = repr(prefix) if isinstance(prefix, str) else type(prefix).__name__
            raise StoreConfigError(
                f"store {self._url}: prefix must be a non-empty str (the store's keys begin with"
                f" it, and forgetting every session deletes the keys under it), got {got}",
                url=self._url,
            )
        self._prefix = prefix.encode("utf-8", "surrogatepass")
        self._streak_prefix = self._prefix + b"streak:"
        self._no_agent = self._prefix + b"no-agent"
        self._redis = module
        self._maker = maker
        self._use(client)
        if maker is not None:
            _owned.add(self)

    def _use(self, client: Any) -> None:
        """Talk through ``client`` from now on (its scripts registered with it)."""
        ttl = str(self._ttl)
        self._advance = client.register_script(_ADVANCE.replace("@TTL@", ttl))
        self._judge = client.register_script(_JUDGE.replace("@TTL@", ttl))
        self._client = client

    def _run(self, script: Any, key: bytes, *args: object) -> Any:
        """One ``EVALSHA`` of ``script`` with ``key``; the script is loaded again when the server
        has lost it (a restart, ``SCRIPT FLUSH``).

        Not redis-py's ``Script.__call__``, which does the same with about 3.5 us of Python
        around it per call (measured with redis-py 8.1): some 5 % of a loopback round trip, on
        every check.
        """
        client = self._client
        try:
            return client.evalsha(script.sha, 1, key, *args)
        except self._redis.exceptions.NoScriptError:
            script.sha = client.script_load(script.script)
            return client.evalsha(script.sha, 1, key, *args)

    def _reconnect(self) -> None:
        """A new client of the store's own (its pool and connections made on first use); the
        old one is left to the operations still using it."""
        if self._maker is not None:
            self._use(self._maker())

    # -- the protocol's attributes --

    @property
    def url(self) -> str:
        return self._url

    @property
    def session_ttl(self) -> int:
        return self._ttl

    @property
    def client(self) -> redis.Redis:
        """The redis-py client the store talks through."""
        return self._client  # type: ignore[no-any-return]

    # -- the loop brake's streaks --

    def advance_streak(self, session: str, digest: bytes) -> int:
        check_streak_call(session, digest)
        key = self._streak_prefix + session.encode("utf-8", "surrogatepass")
        try:
            count: int = self._run(self._advance, key, digest + _token(TOKEN_SIZE))
        except Exception as error:
            raise self._failure(error) from error
        if count < 0:  # the key held a value the store did not write: replaced, counted afresh
            self._healed("session")
            return -count
        return count

    def read_streak(self, session: str) -> tuple[bytes, int] | None:
        check_key(session, "session")
        try:
            value = self._client.get(self._streak_key(session))
        except Exception as error:
            raise self._failure(error) from error
        if value is None:
            return None
        try:
            count = int(value[DIGEST_SIZE + TOKEN_SIZE :])
            if len(value) <= DIGEST_SIZE + TOKEN_SIZE or count < 1:
                raise ValueError("not a count of the store's")
            return bytes(value[:DIGEST_SIZE]), count
        except Exception as error:  # the key was written by something else
            raise self._failure(error, unreadable=True) from error

    def forget_streaks(self, session: str | None = None) -> None:
        check_key(session, "session", optional=True)
        try:
            if session is not None:
                self._client.delete(self._streak_key(session))
            else:
                self._delete_matching(self._pattern(b"streak:*"))
        except Exception as error:
            raise self._failure(error) from error

    def count_streaks(self) -> int:
        try:
            return self._count_matching(self._pattern(b"streak:*"))
        except Exception as error:
            raise self._failure(error) from error

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
        call = _token(TOKEN_SIZE) if digest is None else digest + _token(TOKEN_SIZE)
        args = (call, duplicate_limit, window, cap)
        try:
            answer = self._run(self._judge, self._agent_key(agent), *args)
        except Exception as error:
            raise self._failure(error) from error
        if answer is None:
            return None
        if answer == 1:  # allowed, the agent's state replaced (see _JUDGE)
            self._healed("agent")
            return None
        try:
            kind, count, limit, first = answer[:4]
            if answer[4:] == [1]:
                self._healed("agent")
            if kind in (b"cap", "cap"):
                return BreakerDenial("cap", int(count), int(limit), bool(first))
            return BreakerDenial("duplicate", int(count), int(limit), bool(first))
        except Exception as error:
            raise self._failure(error, unreadable=True) from error

    def breaker_calls(self, agent: str | None) -> int:
        check_key(agent, "agent", optional=True)
        try:
            calls = self._client.hget(self._agent_key(agent), "calls")
        except Exception as error:
            raise self._failure(error) from error
        try:
            return 0 if calls is None else int(calls)
        except Exception as error:  # the field was written by something else
            raise self._failure(error, unreadable=True) from error

    def forget_breaker(self) -> None:
        try:
            self._delete_matching(self._pattern(b"agent:*"))
            self._client.delete(self._no_agent)
        except Exception as error:
            raise self._failure(error) from error

    def count_agents(self) -> int:
        try:
            return self._count_matching(self._pattern(b"agent:*"))
        except Exception as error:
            raise self._failure(error) from error

    # -- the rest of the protocol --

    def ping(self) -> None:
        """Reach the server, and load the scripts so that the first check is one round trip."""
        try:
            self._client.ping()
            for script in (self._advance, self._judge):
                script.sha = self._client.script_load(script.script)
        except Exception as error:
            raise self._failure(error) from error

    def close(self) -> None:
        """Disconnect, when the store made the client (the next operation reconnects).

        Safe while other threads check: the store moves to a new client at once and closes the
        old one's idle connections; a connection in use is left to its check, which finishes,
        and is closed when that client is collected.
        """
        if self._maker is not None:
            old = self._client
            self._reconnect()
            with contextlib.suppress(Exception):  # what may already be broken must not raise
                old.connection_pool.disconnect(inuse_connections=False)

    # -- internals --

    def _streak_key(self, session: str) -> bytes:
        return self._streak_prefix + session.encode("utf-8", "surrogatepass")

    def _agent_key(self, agent: str | None) -> bytes:
        if agent is None:
            return self._no_agent
        return self._prefix + b"agent:" + agent.encode("utf-8", "surrogatepass")

    def _pattern(self, tail: bytes) -> bytes:
        return _GLOB.sub(rb"\\\1", self._prefix) + tail

    def _count_matching(self, pattern: bytes) -> int:
        return sum(1 for _ in self._client.scan_iter(match=pattern, count=_SCAN_BATCH))

    def _delete_matching(self, pattern: bytes) -> None:
        batch: list[bytes] = []
        for key in self._client.scan_iter(match=pattern, count=_SCAN_BATCH):
            batch.append(key)
            if len(batch) >= _SCAN_BATCH:
                self._client.delete(*batch)
                batch.clear()
        if batch:
            self._client.delete(*batch)

    def _healed(self, what: str) -> None:
        """Say (at most once a minute per store) that a key of the store's held a value it did
        not write, which a check replaced (the count started again)."""
        now = time.monotonic()
        last = _healed_at.get(self)
        if last is not None and now - last < 60.0:
            return
        _healed_at[self] = now
        import logging  # only now: the checks' own path never needs it

        logging.getLogger("dsh_loop_brake.stores").warning(
            "store %s: %s key held a value the store did not write (written by another"
            " program, or planted); the check replaced it, and that %s's counts started again"
            " (this warning repeats at most once a minute)",
            json_literal(self._url),
            "an agent's" if what == "agent" else f"a {what}'s",
            what,
        )

    def _failure(self, error: Exception, *, unreadable: bool = False) -> StoreError:
        errors = self._redis.exceptions
        detail = json_literal(f"{type(error).__name__}: {error}")[1:-1]
        if unreadable:
            return StoreError(
                f"store {shown(self._url)}: a key under the store's prefix holds a value the store"
                f" did not write ({detail}); the next check replaces it",
                url=self._url,
            )
        if isinstance(error, errors.AuthenticationError):
            what = "refused the credentials"
        elif isinstance(error, errors.TimeoutError):
            what = "did not answer in time"
        elif isinstance(error, (errors.ConnectionError, OSError)):
            what = "cannot be reached"
        elif isinstance(error, errors.RedisError):
            what = "answered with an error"
        else:  # not an outage, but still a failure of the store's: a StoreError too
            return StoreError(
                f"store {shown(self._url)}: the Redis client failed ({detail})", url=self._url
            )
        # redis-py's messages name the host and port, never the password.
        return StoreError(
            f"store {shown(self._url)}: the Redis server {what} ({detail})", url=self._url
        )
