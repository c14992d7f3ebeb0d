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
from typing import TYPE_CHECKING, Any, Final, final
from urllib.parse import urlsplit

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
from dsh_loop_brake.stores._url import REDIS_SCHEMES, redact_url, shown

if TYPE_CHECKING:
    import redis

__all__ = ["SOCKET_TIMEOUT", "MissingExtraError", "RedisStore", "check_redis_url"]

#: Seconds a connection made from a URL waits to connect, and for each answer.
SOCKET_TIMEOUT: Final = 2.0

# KEYS[1] the session's key; ARGV[1] the digest followed by the check's token, which is also how
# the value begins. Each store writes its session_ttl into its own copy of the scripts (@TTL@):
# every argument fewer to encode on every check is measurable against a round trip that is
# mostly the client's own work (so the token travels inside the digest's argument, too).
_ADVANCE: Final = """
local value = redis.call('GET', KEYS[1])
local count = 1
if value then
    if string.sub(value, 33, 40) == string.sub(ARGV[1], 33, 40) then
        return tonumber(string.sub(value, 41))  -- this check again: its answer was lost
    end
    if string.sub(value, 1, 32) == string.sub(ARGV[1], 1, 32) then
        count = tonumber(string.sub(value, 41)) + 1
    end
end
redis.call('SET', KEYS[1], ARGV[1] .. string.format('%d', count), 'EX', @TTL@)
return count
"""

# KEYS[1] the agent's key; ARGV[1] the digest ('' for a call that was not identified) followed by
# the check's token, ARGV[2] duplicate_limit, ARGV[3] window, ARGV[4] cap.
# BreakerWindow.judge, step for step; the answer is kept in 'a' ('' allowed, else
# 'kind count limit first') for a retry of the same check (see the module docstring).
_JUDGE: Final = """
local key, digest, token = KEYS[1], string.sub(ARGV[1], 1, -9), string.sub(ARGV[1], -8)
local limit, window, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', key, 'calls', 'marks', 'next', 'head', 't', 'a')
if state[5] == token then  -- this check again: its answer was lost
    if state[6] == '' then return false end
    local kind, count, hit, first = string.match(state[6], '^(%a+) (%d+) (%d+) (%d)$')
    return {kind, tonumber(count), tonumber(hit), tonumber(first)}
end
local calls = tonumber(state[1]) or 0
local marks = tonumber(state[2]) or 0
local next_seq = tonumber(state[3]) or 0
local head = tonumber(state[4]) or 0
local function int(number) return string.format('%d', number) end
local function evict()
    local field = 'w:' .. int(head)
    local oldest = redis.call('HGET', key, field)
    redis.call('HDEL', key, field)
    if redis.call('HINCRBY', key, 'c:' .. oldest, -1) <= 0 then
        redis.call('HDEL', key, 'c:' .. oldest)
    end
    head = head + 1
end
while next_seq - head > window do evict() end
local kind, count, hit
if cap > 0 and calls >= cap then
    kind, count, hit = 'cap', calls, cap
elseif digest ~= '' then
    count = (tonumber(redis.call('HGET', key, 'c:' .. digest)) or 0) + 1
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
    return {kind, count, hit, first}
end
calls = calls + 1
if digest ~= '' then
    redis.call('HSET', key, 'w:' .. int(next_seq), digest)
    redis.call('HINCRBY', key, 'c:' .. digest, 1)
    next_seq = next_seq + 1
    if next_seq - head > window then evict() end
end
redis.call('HSET', key, 'calls', int(calls), 'marks', int(marks), 'next', int(next_seq),
    'head', int(head), 't', token, 'a', '')
redis.call('EXPIRE', key, @TTL@)
return false
"""

#: The length of the random token each check carries (see the module docstring).
TOKEN_SIZE: Final = 8

_GLOB: Final = re.compile(rb"([*?\[\]\\])")
_SCAN_BATCH: Final = 500
_token: Final = os.urandom  # unique across processes and machines, and after fork


class MissingExtraError(StoreConfigError, ImportError):
    """A Redis store was asked for, but the ``redis`` extra is not installed."""


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
    """What redis-py would misread or read as something else, refused with the URL named."""
    problem = None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it is the check: a port that is not a number raises
    except ValueError:
        problem = "is malformed (the host or port cannot be read)"
    else:
        if parts.scheme not in REDIS_SCHEMES or not url.startswith(parts.scheme + "://"):
            problem = "is malformed (write redis://, rediss:// or unix:// followed by the address)"
        elif parts.scheme == "unix" and not parts.path:
            problem = "has no socket path (write unix:///path/to/redis.sock)"
        elif (
            parts.scheme != "unix" and not parts.path.strip("/").isdigit() and parts.path.strip("/")
        ):
            problem = "has a database that is not a number (write redis://host:6379/0)"
    if problem is not None:
        raise StoreConfigError(f"store {shown(url)}: the URL {problem}", url=redact_url(url))


def check_redis_url(url: str) -> None:
    """Refuse, without connecting, a Redis URL that can never work: malformed, or the ``redis``
    extra not installed (``StoreConfigError``, ``MissingExtraError``)."""
    _check_url(url)
    _import_redis(url)


def _client_url(client: Any) -> str:
    """A URL for a client that was handed to us, built from its settings, password hidden."""
    try:
        kwargs = client.get_connection_kwargs()
    except Exception:
        return f"redis://({type(client).__name__})"
    user = kwargs.get("username") or ""
    auth = f"{user}:***@" if kwargs.get("password") else (f"{user}@" if user else "")
    db = kwargs.get("db", 0)
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
        "_advance",
        "_client",
        "_errors",
        "_judge",
        "_no_agent",
        "_owns_client",
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
        if isinstance(url_or_client, str):
            url = url_or_client
            self._url = redact_url(url)
            _check_url(url)
            module = _import_redis(url)
            try:
                client = module.Redis.from_url(
                    url,
                    socket_timeout=SOCKET_TIMEOUT,
                    socket_connect_timeout=SOCKET_TIMEOUT,
                    retry=module.retry.Retry(module.backoff.NoBackoff(), 0),
                )
            except (ValueError, TypeError) as error:
                raise StoreConfigError(
                    f"store {shown(url)}: the URL cannot be used ({error})", url=self._url
                ) from None
            self._owns_client = True
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
            self._owns_client = False
        self._ttl = check_session_ttl(session_ttl, self._url)
        if not isinstance(prefix, str):
            raise StoreConfigError(
                f"store {self._url}: prefix must be a str, got {type(prefix).__name__}",
                url=self._url,
            )
        self._prefix = prefix.encode("utf-8", "surrogatepass")
        self._streak_prefix = self._prefix + b"streak:"
        self._no_agent = self._prefix + b"no-agent"
        self._redis = module
        # What a failing server or connection raises; anything else is a bug, not an outage.
        self._errors: tuple[type[Exception], ...] = (module.exceptions.RedisError, OSError)
        self._client = client
        ttl = str(self._ttl)
        self._advance = client.register_script(_ADVANCE.replace("@TTL@", ttl))
        self._judge = client.register_script(_JUDGE.replace("@TTL@", ttl))

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
            count = self._advance((key,), (digest + _token(TOKEN_SIZE),))
        except self._errors as error:
            raise self._failure(error) from error
        return count  # type: ignore[no-any-return]  # a Lua number arrives as an int

    def read_streak(self, session: str) -> tuple[bytes, int] | None:
        check_key(session, "session")
        try:
            value = self._client.get(self._streak_key(session))
        except self._errors as error:
            raise self._failure(error) from error
        if value is None:
            return None
        try:
            return bytes(value[:DIGEST_SIZE]), int(value[DIGEST_SIZE + TOKEN_SIZE :])
        except (TypeError, ValueError) as error:  # the key was written by something else
            raise self._failure(error) from error

    def forget_streaks(self, session: str | None = None) -> None:
        check_key(session, "session", optional=True)
        try:
            if session is not None:
                self._client.delete(self._streak_key(session))
            else:
                self._delete_matching(self._pattern(b"streak:*"))
        except self._errors as error:
            raise self._failure(error) from error

    def count_streaks(self) -> int:
        try:
            return self._count_matching(self._pattern(b"streak:*"))
        except self._errors as error:
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
            answer = self._judge((self._agent_key(agent),), args)
        except self._errors as error:
            raise self._failure(error) from error
        if answer is None:
            return None
        kind, count, limit, first = answer
        if kind in (b"cap", "cap"):
            return BreakerDenial("cap", int(count), int(limit), bool(first))
        return BreakerDenial("duplicate", int(count), int(limit), bool(first))

    def breaker_calls(self, agent: str | None) -> int:
        check_key(agent, "agent", optional=True)
        try:
            calls = self._client.hget(self._agent_key(agent), "calls")
        except self._errors as error:
            raise self._failure(error) from error
        return 0 if calls is None else int(calls)

    def forget_breaker(self) -> None:
        try:
            self._delete_matching(self._pattern(b"agent:*"))
            self._client.delete(self._no_agent)
        except self._errors as error:
            raise self._failure(error) from error

    def count_agents(self) -> int:
        try:
            return self._count_matching(self._pattern(b"agent:*"))
        except self._errors as error:
            raise self._failure(error) from error

    # -- the rest of the protocol --

    def ping(self) -> None:
        """Reach the server, and load the scripts so that the first check is one round trip."""
        try:
            self._client.ping()
            for script in (self._advance, self._judge):
                script.sha = self._client.script_load(script.script)
        except self._errors as error:
            raise self._failure(error) from error

    def close(self) -> None:
        """Disconnect, when the store made the client (the next operation reconnects)."""
        if self._owns_client:
            with contextlib.suppress(Exception):  # what may already be broken must not raise
                self._client.close()

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

    def _failure(self, error: Exception) -> StoreError:
        errors = self._redis.exceptions
        if isinstance(error, errors.AuthenticationError):
            what = "refused the credentials"
        elif isinstance(error, errors.TimeoutError):
            what = "did not answer in time"
        elif isinstance(error, (errors.ConnectionError, OSError)):
            what = "cannot be reached"
        elif isinstance(error, errors.RedisError):
            what = "answered with an error"
        else:
            what = "holds a value under the store's prefix that the store did not write"
        # redis-py's messages name the host and port, never the password.
        return StoreError(
            f"store {shown(self._url)}: the Redis server {what} ({type(error).__name__}: {error})",
            url=self._url,
        )
