"""PROVISIONAL: the SQLite file the hook counts in, until ``stores.SQLiteStore`` lands on main.

The hook is a new process for every tool call, so its counts live in a file shared by all its
processes: by default ``$DSH_HOME/state/brakes.sqlite3`` (the file is created owner-only, 0600,
in a directory created owner-only, 0700). Each check is one ``BEGIN IMMEDIATE`` transaction, so
concurrent hook processes for one session (parallel tool calls) get exactly the counts one
process would: the loop brake's streak (compare and advance) and the circuit breaker's window
and call count (cap, duplicates, record only when allowed) are judged in it together.

Nothing here is a value of the call: a session id, a SHA-256 digest and counts.

This module is a stand-in with the stores' semantics (§8: compare-and-advance, ``sessionTtl``
expiry, at most 2 seconds of waiting for a lock) and its own table names (``provisional_*``),
so it cannot clash with the real store's schema in the same file. It goes when the hook is moved
onto ``stores.SQLiteStore`` and ``Brakes``.
"""

from __future__ import annotations

import os
import sqlite3
import time

from dsh_loop_brake.hooks._errors import HookError

__all__ = ["LOCK_TIMEOUT", "BreakerCall", "Verdict", "open_state"]

#: How long a check waits for another process's transaction before failing open.
LOCK_TIMEOUT = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS provisional_hook_streaks (
    session TEXT PRIMARY KEY, digest BLOB NOT NULL, count INTEGER NOT NULL, touched REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS provisional_hook_breaker_agents (
    agent TEXT PRIMARY KEY, calls INTEGER NOT NULL, touched REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS provisional_hook_breaker_window (
    agent TEXT NOT NULL, seq INTEGER NOT NULL, digest BLOB NOT NULL, PRIMARY KEY (agent, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""
_SCHEMA_VERSION = 1


class BreakerCall:
    """What the circuit breaker judges: the call's digest (``ignoreArgs`` dropped) and limits."""

    __slots__ = ("cap", "digest", "duplicate_limit", "window")

    def __init__(self, digest: bytes | None, duplicate_limit: int, window: int, cap: int) -> None:
        self.digest = digest
        self.duplicate_limit = duplicate_limit
        self.window = window
        self.cap = cap


class Verdict:
    """A denial: which brake (``loop``, ``duplicate`` or ``cap``), the count and the limit."""

    __slots__ = ("count", "kind", "limit")

    def __init__(self, kind: str, count: int, limit: int) -> None:
        self.kind = kind
        self.count = count
        self.limit = limit

    def __repr__(self) -> str:
        return f"Verdict({self.kind!r}, {self.count}, {self.limit})"


class State:
    """One state file, open; :meth:`check` is one transaction."""

    __slots__ = ("_connection", "path", "session_ttl")

    def __init__(self, connection: sqlite3.Connection, path: str, session_ttl: int) -> None:
        self._connection = connection
        self.path = path
        self.session_ttl = session_ttl

    def check(
        self,
        session: str,
        *,
        digest: bytes | None = None,
        max_repeats: int | None = None,
        breaker: BreakerCall | None = None,
    ) -> Verdict | None:
        """Count the call in one transaction: the loop brake (when ``max_repeats`` is given)
        first, then, unless it denied, the circuit breaker (when ``breaker`` is given).

        ``digest`` is ``None`` for a call the loop brake cannot identify: its streak ends.
        """
        connection = self._connection
        now = time.time()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                verdict = None
                if max_repeats is not None:
                    verdict = self._advance_streak(session, digest, max_repeats, now)
                if verdict is None and breaker is not None:
                    verdict = self._judge_call(session, breaker, now)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise HookError(
                    f"the state file {self.path} stayed locked by another process for "
                    f"{LOCK_TIMEOUT:g} seconds; nothing was counted"
                ) from None
            raise _state_error(self.path, exc) from None
        except sqlite3.Error as exc:
            raise _state_error(self.path, exc) from None
        return verdict

    def _advance_streak(
        self, session: str, digest: bytes | None, max_repeats: int, now: float
    ) -> Verdict | None:
        execute = self._connection.execute
        if digest is None:
            execute("DELETE FROM provisional_hook_streaks WHERE session = ?", (session,))
            return None
        row = execute(
            "SELECT digest, count, touched FROM provisional_hook_streaks WHERE session = ?",
            (session,),
        ).fetchone()
        if row is not None and row[0] == digest and now - row[2] <= self.session_ttl:
            count = row[1] + 1
        else:
            count = 1
        execute(
            "INSERT OR REPLACE INTO provisional_hook_streaks VALUES (?, ?, ?, ?)",
            (session, digest, count, now),
        )
        return Verdict("loop", count, max_repeats) if count >= max_repeats else None

    def _judge_call(self, agent: str, call: BreakerCall, now: float) -> Verdict | None:
        execute = self._connection.execute
        row = execute(
            "SELECT calls, touched FROM provisional_hook_breaker_agents WHERE agent = ?",
            (agent,),
        ).fetchone()
        calls = 0
        if row is not None:
            if now - row[1] > self.session_ttl:  # forgotten: this agent starts again
                execute("DELETE FROM provisional_hook_breaker_window WHERE agent = ?", (agent,))
            else:
                calls = row[0]
        if 0 < call.cap <= calls:
            return Verdict("cap", calls, call.cap)
        last = execute(
            "SELECT max(seq) FROM provisional_hook_breaker_window WHERE agent = ?", (agent,)
        ).fetchone()[0]
        if call.digest is not None:
            (same,) = execute(
                "SELECT count(*) FROM (SELECT digest FROM provisional_hook_breaker_window"
                " WHERE agent = ? ORDER BY seq DESC LIMIT ?) WHERE digest = ?",
                (agent, call.window, call.digest),
            ).fetchone()
            if same + 1 >= call.duplicate_limit:
                return Verdict("duplicate", same + 1, call.duplicate_limit)
            # Only allowed calls are recorded, so a denied call never pushes a count higher.
            seq = (last or 0) + 1
            execute(
                "INSERT INTO provisional_hook_breaker_window VALUES (?, ?, ?)",
                (agent, seq, call.digest),
            )
            execute(
                "DELETE FROM provisional_hook_breaker_window WHERE agent = ? AND seq <= ?",
                (agent, seq - call.window),
            )
        execute(
            "INSERT OR REPLACE INTO provisional_hook_breaker_agents VALUES (?, ?, ?)",
            (agent, calls + 1, now),
        )
        return None

    def forget(self, session: str | None = None) -> int:
        """Forget one session's streak and circuit-breaker state (``None``: everything)."""
        tables = (
            ("provisional_hook_streaks", "session"),
            ("provisional_hook_breaker_agents", "agent"),
            ("provisional_hook_breaker_window", "agent"),
        )
        removed = 0
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
            for table, key in tables:
                if session is None:
                    cursor = connection.execute(f"DELETE FROM {table}")
                else:
                    cursor = connection.execute(f"DELETE FROM {table} WHERE {key} = ?", (session,))
                if table != "provisional_hook_breaker_window":
                    removed += cursor.rowcount
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            connection.rollback()
            raise _state_error(self.path, exc) from None
        return removed

    def close(self) -> None:
        """Close the file (the process ends right after; this just says so)."""
        self._connection.close()


def open_state(path: str, session_ttl: int) -> State:
    """Open (creating owner-only when absent) the state file at ``path``."""
    directory = os.path.dirname(path)
    try:
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            # Created here, owner-only, so SQLite never creates it with the umask's mode; its
            # -wal and -shm files take the database file's mode.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise HookError(
            f"cannot create the state file {path} ({exc.strerror or exc}); nothing was counted"
        ) from None
    try:
        connection = sqlite3.connect(path, timeout=LOCK_TIMEOUT, isolation_level=None)
    except sqlite3.Error as exc:
        raise _state_error(path, exc) from None
    try:
        connection.execute("PRAGMA synchronous=NORMAL")
        no_checkpoint = getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", None)
        if no_checkpoint is not None:  # Python >= 3.12; before, the hook's os._exit does it
            connection.setconfig(no_checkpoint, True)  # type: ignore[attr-defined,unused-ignore]
        if connection.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
            # A new file: WAL, so readers never wait for writers, and the tables.
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
    except sqlite3.Error as exc:
        connection.close()
        raise _state_error(path, exc) from None
    return State(connection, path, session_ttl)


def _state_error(path: str, exc: sqlite3.Error) -> HookError:
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return HookError(
            f"the state file {path} is not a SQLite database; move it away (the hook creates a "
            "new one) or point the row's store elsewhere; nothing was counted"
        )
    return HookError(
        f"the state file {path} cannot be used ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())}); nothing was counted"
    )
