"""``SQLiteStore``: both brakes' state in one SQLite file, shared by the processes of one machine.

One file (WAL journal, ``synchronous=NORMAL``) holds three tables: ``streaks`` (one row per
session: its digest, count and expiry), ``agents`` (one row per agent: calls, incident marks, the
bounds of its window, expiry) and ``agent_window`` (one row per digest in an agent's window).
Sessions and agent ids are stored as UTF-8 bytes (``surrogatepass``, so any ``str`` is a key),
digests as 32-byte blobs: no argument value is ever written.

Atomicity. ``advance_streak`` is a single ``INSERT ... ON CONFLICT DO UPDATE`` statement. In
autocommit mode one statement is one transaction, and a write statement takes the write lock when
it starts -- what ``BEGIN IMMEDIATE`` does -- so it never has to upgrade a read lock.
``judge_call`` reads, then writes several rows, so it runs inside ``BEGIN IMMEDIATE``. Either way
a writer that finds the file locked waits for the busy timeout (at most 2 s) and then fails with
``StoreError``.

Expiry. Every row has ``expires`` (last touch + ``session_ttl``), and a row past it is treated as
absent by every read. Expired rows are purged lazily: each new session (an insert) deletes at most
two expired sessions, and each new agent at most two expired agents with their windows, so the
file never grows faster than live state does. To find expired rows without an index that moves on
every call, rows carry ``bucket`` (``expires`` in whole hours), which is indexed and rewritten
at most once an hour per session or agent (for an agent inside its check's transaction, for a
session by a best-effort second statement); the purge takes rows from buckets that have ended,
and checks ``expires`` too.

Processes and threads. Each thread gets its own connection (so one thread waiting for the lock
does not hold up the others beyond SQLite's own lock). A thread's connection is closed once the
thread has ended, when the next new thread opens its own: a host that runs each request in a
thread of its own must not collect two open files per request. ``close()`` may come from any
thread at any moment (a host disposing its brakes while calls are in flight): each connection has
a lock its thread holds while using it, and ``close()`` closes only the idle ones; a connection
in use is closed by its own thread as soon as that operation ends (the operation finishes and
counts). Closing a connection under the thread executing on it would crash the process.

Fork. SQLite keeps per-process books about the files it has open -- which locks this process
holds, the WAL index it has mapped -- and ``fork`` copies them into the child, where any new
connection to the same file shares them: it takes no lock of its own (so the parent, closing its
last connection, checkpoints and removes the WAL under the child's writes, which then reach no
one), and a lock that another thread held at the moment of the fork stays held in the child for
good (every check there waits for the busy timeout and fails). So before a fork the process lets
go of every store's file: the fork waits for the checks in flight (new ones wait for the fork, at
most a moment) and closes all their connections; parent and child each reopen on their next
check. Only when a check does not finish in time (a fork from inside a check) does the child set
the connections it inherited aside, as a last resort, never using or closing them.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import threading
import time
from _weakrefset import WeakSet  # weakref.WeakSet itself: see _stores
from collections.abc import Callable

# The sqlite3 package is its C module, _sqlite3, plus the adapters of dates and times, whose import
# of datetime costs a hook process 6 M instructions, 2 ms of 35 to 45 (benchmarks/hook.py): this
# store keeps no dates, so it takes the C module (the same classes, exceptions and functions).
try:
    import _sqlite3 as sqlite3
except ImportError:  # an implementation without it
    import sqlite3  # type: ignore[no-redef]

from dsh_loop_brake._store import (
    DEFAULT_SESSION_TTL,
    DENIAL_MARKS,
    BreakerDenial,
    StoreConfigError,
    StoreError,
    StoreNamedByUrl,
    check_breaker_call,
    check_key,
    check_session_ttl,
    check_streak_call,
)
from dsh_loop_brake.stores._url import escaped, shown

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Final, TypeVar, final

    _Result = TypeVar("_Result")
else:
    from dsh_loop_brake._no_typing import final


__all__ = ["MAX_BUSY_TIMEOUT", "MIN_SQLITE_VERSION", "SQLiteStore"]

#: The longest a check waits for another process's write lock before it fails.
MAX_BUSY_TIMEOUT: Final = 2.0

#: The oldest SQLite library that has everything the store uses (``INSERT ... ON CONFLICT``).
MIN_SQLITE_VERSION: Final = (3, 24, 0)

# "dshb" in PRAGMA application_id marks a file as a dsh-loop-brake store; user_version is the
# schema version.
_APPLICATION_ID: Final = 0x64736862
_SCHEMA_VERSION: Final = 1

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS streaks (
        session BLOB PRIMARY KEY,
        digest BLOB NOT NULL,
        count INTEGER NOT NULL,
        touched REAL NOT NULL,
        expires REAL NOT NULL,
        bucket INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS streaks_by_bucket ON streaks (bucket)",
    # A new session purges at most two expired ones, inside its own statement.
    """CREATE TRIGGER IF NOT EXISTS streaks_purge AFTER INSERT ON streaks BEGIN
        DELETE FROM streaks WHERE session IN (
            SELECT session FROM streaks
            WHERE bucket < CAST(NEW.touched / 3600 AS INTEGER) AND expires <= NEW.touched
            LIMIT 2
        );
    END""",
    """CREATE TABLE IF NOT EXISTS agents (
        agent BLOB PRIMARY KEY,
        calls INTEGER NOT NULL,
        marks INTEGER NOT NULL,
        next INTEGER NOT NULL,
        head INTEGER NOT NULL,
        touched REAL NOT NULL,
        expires REAL NOT NULL,
        bucket INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS agents_by_bucket ON agents (bucket)",
    # An agent's window: its recorded digests by sequence number, head <= seq < next.
    """CREATE TABLE IF NOT EXISTS agent_window (
        agent BLOB NOT NULL,
        seq INTEGER NOT NULL,
        digest BLOB NOT NULL,
        PRIMARY KEY (agent, seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS agent_window_by_digest ON agent_window (agent, digest)",
)

# ?1 session, ?2 digest, ?3 now, ?4 session_ttl. An expired row counts as no row. The new count
# of an existing row reaches Python through dsh_loop_brake_report(count, bucket) (see
# _Heard); a new row has count 1. RETURNING would say the same, at 1.38x a bare upsert's
# cost against 1.09x this way (a streak check must stay within 1.5x: benchmarks/stores.py).
_ADVANCE: Final = """
INSERT INTO streaks (session, digest, count, touched, expires, bucket)
VALUES (?1, ?2, 1, ?3, ?3 + ?4, CAST((?3 + ?4) / 3600 AS INTEGER))
ON CONFLICT (session) DO UPDATE SET
    count = dsh_loop_brake_report(
        CASE WHEN digest = excluded.digest AND expires > ?3 THEN count + 1 ELSE 1 END, bucket
    ),
    digest = excluded.digest,
    touched = excluded.touched,
    expires = excluded.expires"""
# The bucket follows expires, but only when the hour changes: an indexed column written on every
# call would triple the pages each check writes (a trigger doing this cost every call about 5%).
_REBUCKET_STREAK: Final = (
    "UPDATE streaks SET bucket = CAST(expires / 3600 AS INTEGER) WHERE session = ?1"
)
_READ_STREAK: Final = "SELECT digest, count FROM streaks WHERE session = ?1 AND expires > ?2"
_FORGET_STREAK: Final = "DELETE FROM streaks WHERE session = ?1"
_FORGET_STREAKS: Final = "DELETE FROM streaks"
_COUNT_STREAKS: Final = "SELECT count(*) FROM streaks WHERE expires > ?1"

_READ_AGENT: Final = "SELECT calls, marks, next, head, expires, bucket FROM agents WHERE agent = ?1"
_SAVE_AGENT: Final = """
INSERT INTO agents (agent, calls, marks, next, head, touched, expires, bucket)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6 + ?7, CAST((?6 + ?7) / 3600 AS INTEGER))
ON CONFLICT (agent) DO UPDATE SET
    calls = excluded.calls,
    marks = excluded.marks,
    next = excluded.next,
    head = excluded.head,
    touched = excluded.touched,
    expires = excluded.expires"""
# The same, moving the row's bucket too (a new hour): see _REBUCKET_STREAK.
_SAVE_AGENT_REBUCKETED: Final = _SAVE_AGENT + ",\n    bucket = excluded.bucket"
_AGENT_CALLS: Final = "SELECT calls FROM agents WHERE agent = ?1 AND expires > ?2"
_COUNT_AGENTS: Final = "SELECT count(*) FROM agents WHERE expires > ?1 AND agent <> ?2"
_EXPIRED_AGENTS: Final = (
    "SELECT agent FROM agents WHERE bucket < CAST(?1 / 3600 AS INTEGER) AND expires <= ?1 LIMIT 2"
)
_FORGET_AGENT: Final = "DELETE FROM agents WHERE agent = ?1"
_FORGET_AGENTS: Final = "DELETE FROM agents"
_WINDOW_COUNT: Final = "SELECT count(*) FROM agent_window WHERE agent = ?1 AND digest = ?2"
_WINDOW_ADD: Final = "INSERT INTO agent_window (agent, seq, digest) VALUES (?1, ?2, ?3)"
_WINDOW_CUT: Final = "DELETE FROM agent_window WHERE agent = ?1 AND seq < ?2"
_WINDOW_FORGET: Final = "DELETE FROM agent_window WHERE agent = ?1"
_WINDOWS_FORGET: Final = "DELETE FROM agent_window"

# Rows are indexed by the hour their state expires in (see the module docstring). Written into
# the SQL above as 3600: a session's bucket moves once an hour, and expired rows wait at most an
# hour past expiry before a new session or agent may purge them.
_BUCKET_SECONDS: Final = 3600

_NO_AGENT: Final = b""  # the key of the shared no-agent state; an agent id's key is never empty

# SQLite's primary result codes for "another connection holds the lock".
_BUSY_CODES: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED


@final
class _Heard:
    """What a connection's streak statement computed: ``_ADVANCE`` passes an updated row's new
    count and bucket through the SQL function ``dsh_loop_brake_report``, which lands them here;
    the statement is still one atomic step. Each thread has its own connection, so no other
    check can write these between the statement and the read that follows it.

    A separate object, not the connection itself: SQLite holds the function, and a function
    bound to the connection would keep the connection (and its open files) alive for good once
    its store is dropped without ``close()``.
    """

    __slots__ = ("bucket", "count")

    def __init__(self) -> None:
        self.count = 1
        self.bucket: int | None = None

    def report(self, count: int, bucket: int) -> int:
        self.count = count
        self.bucket = bucket
        return count


class _Connection(sqlite3.Connection):
    """A connection with the ``_Heard`` its streak statement reports to."""

    heard: _Heard


@final
class _Link:
    """One thread's connection to the file, and the lock its operations hold while using it.

    Only the thread itself opens a connection on its link, and only it uses one; ``close()`` in
    another thread closes the connection only while the lock is free, else leaves it to the
    thread, which closes it when its operation ends. ``generation`` is the store's generation
    the connection was opened in (``None``: no usable connection); ``close()`` and a fork start
    a new one, and a link of an older one reconnects on its next use.
    """

    __slots__ = ("db", "generation", "lock", "thread")

    def __init__(self, thread: threading.Thread) -> None:
        self.db: _Connection | None = None
        self.generation: object = None
        self.lock = threading.Lock()
        self.thread = thread


def _close_link(link: _Link, unless_current: object = None) -> None:
    """Close ``link``'s connection unless its thread is using it (or it is of the generation
    ``unless_current``): what may already be broken must not raise."""
    if not link.lock.acquire(blocking=False):
        return  # in use: its thread closes it when done (see SQLiteStore._release)
    try:
        if link.generation is unless_current and unless_current is not None:
            return
        db, link.db, link.generation = link.db, None, None
        if db is not None:
            _close_quietly(db)
    finally:
        link.lock.release()


def _agent_key(agent: str | None) -> bytes:
    return _NO_AGENT if agent is None else b"agent:" + agent.encode("utf-8", "surrogatepass")


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(error)
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


# --- fork safety (see the module docstring) ---------------------------------------------------
# weakref.WeakSet, from the module weakref takes it from: threading has imported that already,
# and importing weakref would cost a hook process 2 M instructions, 2 % of the call.
_stores: WeakSet[SQLiteStore] = WeakSet()

# One entry per store operation in flight in this process, in any thread: list.append and
# list.pop are each atomic, so this counts without a lock on every check's path.
_in_flight: list[None] = []
_forking = False  # a fork is waiting for the operations in flight; new ones wait for it
_fork_gate = threading.Lock()  # held by the forking thread from before the fork until after it


def _wait_for_fork() -> None:
    """Called by an operation that found a fork waiting: stand aside until it has happened."""
    while _forking:
        _in_flight.pop()
        with _fork_gate:
            pass
        _in_flight.append(None)


def _operation(method: Callable[..., _Result]) -> Callable[..., _Result]:
    """A store operation, ``method(self, db, ...)``, on this thread's connection ``db``.

    It counts as in flight, so that no fork happens inside it, and holds the connection's lock,
    so that ``close()`` in another thread never closes the connection while it is in use (SQLite
    would free what this thread is still executing: the process crashes).
    """

    @functools.wraps(method)
    def operation(self: SQLiteStore, *args: object, **kwargs: object) -> _Result:
        _in_flight.append(None)
        if _forking:
            _wait_for_fork()
        try:
            link, db = self._acquire()
            try:
                return method(self, db, *args, **kwargs)
            finally:
                self._release(link)
        finally:
            _in_flight.pop()

    return operation


def _before_fork() -> None:
    global _forking
    _fork_gate.acquire()
    _forking = True
    # From here on an operation that starts stands aside (_wait_for_fork) before it touches
    # SQLite, so once the count is seen at zero no thread of ours is inside SQLite.
    deadline = time.monotonic() + MAX_BUSY_TIMEOUT + 1.0  # a check waits 2 s for a lock at most
    while _in_flight:
        if time.monotonic() >= deadline:
            return  # a fork from inside an operation: the child sets its connections aside
        time.sleep(0.001)
    for store in list(_stores):  # let go of every store's file
        store.close()


def _after_fork_in_parent() -> None:
    global _forking
    _forking = False
    _fork_gate.release()


def _after_fork_in_child() -> None:
    global _forking, _fork_gate
    _forking = False
    _fork_gate = threading.Lock()  # the parent's is held, and no thread here will release it
    _in_flight.clear()  # the threads those operations ran in are not in this process
    for store in list(_stores):
        store._forget_inherited_connections()  # none are left when the fork was quiet


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


# --- the file ---------------------------------------------------------------------------------


def _make_directories(directory: str, url: str) -> None:
    """Create ``directory`` and any missing parents owner-only (0700); existing ones stay."""
    missing: list[str] = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if not os.path.isdir(path):
                raise StoreConfigError(
                    f"store {shown(url)}: cannot create the directory {path} for the database:"
                    " a file of that name is in the way; choose another path",
                    url=url,
                ) from None
        except OSError as error:
            raise StoreConfigError(
                f"store {shown(url)}: cannot create the directory {path} for the database"
                f" ({error.strerror or type(error).__name__}); choose a path you can write to",
                url=url,
            ) from error


# Opening the file ourselves first, never through a symbolic link (a link planted at the path in a
# shared directory would otherwise make the store create, or turn into a database, whatever file
# it points to; SQLite itself refuses links for its -wal and -shm files), and without blocking
# (a named pipe at the path would otherwise wait for a writer on some systems).
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS: Final = (
    os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW
)


def _prepare_file(path: str, url: str) -> None:
    """Make sure the database file exists as a regular file of this user's, owner-only: created
    0600 when it did not exist; one of another user's refused; one that the group or others may
    read or write made owner-only (their permission bits cleared). The same for its ``-wal`` and
    ``-shm`` files, when they exist (and a link or anything but a regular file there refused)."""
    _make_directories(os.path.dirname(path), url)
    try:
        if not _NOFOLLOW and os.path.islink(path):  # Windows: the best that can be done
            raise OSError(errno.ELOOP, "is a symbolic link")
        fd, by_path = _look_at(path, create=True)
    except OSError as error:
        if os.path.islink(path):
            reason = "it is a symbolic link, and the store never opens its file through one"
            advice = "give the path of the file itself"
        elif os.path.isdir(path):
            reason, advice = "it is a directory", "choose a file path"
        else:
            reason = error.strerror or type(error).__name__
            advice = "choose a file you can read and write"
        raise StoreConfigError(
            f"store {shown(url)}: cannot open the database file ({reason}); {advice}", url=url
        ) from error
    try:
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            raise StoreConfigError(
                f"store {shown(url)}: cannot open the database file (it is a symbolic link, and"
                " the store never opens its file through one); give the path of the file itself",
                url=url,
            )
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise StoreConfigError(
                f"store {shown(url)}: cannot open the database file (it is {what}); choose a"
                " file path",
                url=url,
            )
        _make_owner_only(fd, by_path, path, info, url)
    finally:
        os.close(fd)
    for companion in (path + "-wal", path + "-shm"):
        _check_companion(companion, url)


# Looking at a file SQLite may have open in this process must not close a descriptor of it: POSIX
# drops every lock a process holds on a file when any of its descriptors of that file is closed,
# SQLite's included (its -shm lock tells other processes this one is using the log; without it
# the next process to open the store resets the -shm file under this one: SIGBUS). A descriptor
# opened with O_PATH (Linux) is closed without that; elsewhere a file that exists is only lstat'd.
_O_PATH: Final = getattr(os, "O_PATH", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


def _look_at(path: str, *, create: bool) -> tuple[int, bool]:
    """A descriptor of ``path`` (never followed through a link) to fstat and chmod, and whether
    it is an O_PATH one; ``create`` makes a missing file (0600): no lock of ours is on it yet."""
    if _O_PATH:
        try:
            return os.open(path, _O_PATH | _NOFOLLOW | _CLOEXEC), True
        except FileNotFoundError:
            if not create:
                raise
    elif not create:
        raise FileNotFoundError(errno.ENOENT, "not looked at", path)
    return os.open(path, _OPEN_FLAGS, 0o600), False


def _make_owner_only(
    fd: int | None, by_path: bool, path: str, info: os.stat_result, url: str
) -> None:
    """Refuse a state file another user owns (they could rewrite the counts, or read the
    sessions); clear the group's and others' permission bits of one of ours (through ``fd``;
    without one, refuse it instead)."""
    effective_uid = getattr(os, "geteuid", None)
    if effective_uid is None:  # Windows: no owner or mode bits to go by
        return
    uid = effective_uid()
    if info.st_uid != uid:
        raise StoreConfigError(
            f"store {shown(url)}: {escaped(path)} belongs to another user (uid {info.st_uid}),"
            f" not to this one (uid {uid}); the store uses only state files of its own user:"
            " remove the file (or chown it to this user) if it is this user's, or choose"
            " another path",
            url=url,
        )
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o077:
        return
    try:
        if fd is None:
            raise OSError(errno.EPERM, "not changed here")
        if by_path:
            os.chmod(f"/proc/self/fd/{fd}", mode & 0o700)  # what fchmod is for an O_PATH fd
        else:
            os.fchmod(fd, mode & 0o700)
    except OSError as error:
        raise StoreConfigError(
            f"store {shown(url)}: {escaped(path)} can be read or written by other users"
            f" (mode {mode:04o}) and was not made owner-only"
            f" ({error.strerror or type(error).__name__}); chmod 600 it, or choose another"
            " path",
            url=url,
        ) from error


def _check_companion(path: str, url: str) -> None:
    """The database's ``-wal`` or ``-shm`` file, when it exists: a regular file of this user's,
    owner-only (as ``_prepare_file`` makes the database itself)."""
    fd: int | None = None
    try:
        try:
            fd, by_path = _look_at(path, create=False)
            info = os.fstat(fd)
        except FileNotFoundError:
            by_path = False
            info = os.lstat(path)
    except OSError:
        return  # none yet: SQLite creates it with the database file's mode
    try:
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            raise StoreConfigError(
                f"store {shown(url)}: {escaped(path)}, where SQLite keeps the database's"
                f" {path.rpartition('-')[2]} file, is {what}, which SQLite refuses to use;"
                " remove it (it was not made by SQLite)",
                url=url,
            )
        _make_owner_only(fd, by_path, path, info, url)
    finally:
        if fd is not None:
            os.close(fd)


def _unusable(path: str, url: str, error: sqlite3.DatabaseError) -> StoreConfigError:
    """The error for a file SQLite cannot set up as a store, naming what is really wrong."""
    detail = f"{type(error).__name__}: {error}"
    directory = os.path.dirname(path)
    if not os.access(directory, os.W_OK | os.X_OK):
        return StoreConfigError(
            f"store {shown(url)}: SQLite cannot create the database's -wal and -shm files beside"
            f" it ({detail}): this user cannot write to the directory {escaped(directory)}; make"
            " the directory writable for this user, or choose a path in one that is",
            url=url,
        )
    if not os.access(path, os.R_OK | os.W_OK):
        return StoreConfigError(
            f"store {shown(url)}: the database file is not writable for this user ({detail});"
            " chmod 600 it, or choose another path",
            url=url,
        )
    return StoreConfigError(
        f"store {shown(url)}: the file is not a usable SQLite database ({detail}); choose"
        " another path, or move the file away so that a new store is created",
        url=url,
    )


def _initialise(db: sqlite3.Connection, url: str, deadline: float) -> None:
    """Check that the file is ours (or empty), switch it to WAL and create the schema."""
    application_id, version, tables = _identity(db)
    if application_id == _APPLICATION_ID and version == _SCHEMA_VERSION:
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            _use_wal(db, url, deadline)
        db.execute("PRAGMA synchronous=NORMAL")
        return
    if application_id == _APPLICATION_ID and version > _SCHEMA_VERSION:
        raise StoreConfigError(
            f"store {shown(url)}: the file was written by a newer dsh-loop-brake (schema"
            f" {version}, this one knows {_SCHEMA_VERSION}); upgrade, or use another file",
            url=url,
        )
    if application_id not in (0, _APPLICATION_ID) or (application_id == 0 and tables):
        raise StoreConfigError(
            f"store {shown(url)}: the file is a SQLite database of another program, not a"
            " dsh-loop-brake store; choose another path (the file was left as it was)",
            url=url,
        )
    _use_wal(db, url, deadline)
    db.execute("PRAGMA synchronous=NORMAL")
    with _WriteTransaction(db):
        application_id, version, tables = _identity(db)  # another process may have won
        if application_id == 0 and not tables:
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")


@final
class _WriteTransaction:
    """``with _WriteTransaction(db):`` is ``BEGIN IMMEDIATE`` (the write lock from the start) ...
    ``COMMIT``, rolled back when anything inside raises or the ``COMMIT`` fails, the error going
    on as it is.

    A class rather than ``contextlib.contextmanager``: importing contextlib would cost a hook
    process 2.4 M instructions, 2.5 % of the call (benchmarks/hook.py).
    """

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            self._roll_back()
            return
        try:
            self._db.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise

    def _roll_back(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")


# try ... except ... pass rather than contextlib.suppress: no contextlib on a hook's path (see
# _WriteTransaction).


def _roll_back_quietly(db: sqlite3.Connection) -> None:
    """Roll back what is open on ``db``, if anything; a failure then is not the one to report."""
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _close_quietly(db: sqlite3.Connection) -> None:
    """Close ``db``, which is being dropped; a failure to close it changes nothing."""
    try:  # noqa: SIM105 - see above
        db.close()
    except sqlite3.Error:
        pass


_OTHER_TABLES: Final = (
    "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'provisional\\_hook\\_%' ESCAPE '\\'"
    " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
)


def _identity(db: sqlite3.Connection) -> tuple[int, int, int]:
    """The file's application id, schema version and number of other programs' schema objects,
    as one snapshot.

    One snapshot matters: a process creating the store sets its tables and its application id in
    one transaction, and a look between the two would take the new store for another program's.
    Tables named ``provisional_hook_*`` are not another program's: the coding-agent hook kept its
    counts in them, in this same file, before it used this store.
    """
    outer = db.in_transaction
    if not outer:
        db.execute("BEGIN")
    try:
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute(_OTHER_TABLES).fetchone()[0]
    except BaseException:
        if not outer:
            _roll_back_quietly(db)
        raise
    if not outer:
        db.execute("COMMIT")
    return int(application_id), int(version), int(tables)


def _use_wal(db: sqlite3.Connection, url: str, deadline: float) -> None:
    # Switching to WAL needs the file to itself for a moment; processes opening a new store at
    # once take turns (the busy handler is not consulted for this pragma).
    while True:
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
    if mode != "wal":
        raise StoreConfigError(
            f"store {shown(url)}: SQLite cannot use WAL mode for this file (journal mode"
            f" {mode}); put it on a local file system",
            url=url,
        )


@final
class SQLiteStore(StoreNamedByUrl):
    """The brakes' state in one SQLite file, shared by every process of this machine that opens it.

    ``path`` is used as given (``~`` expanded; relative to the current directory, fixed now);
    ``open_store("sqlite:PATH")`` resolves a relative PATH under the dsh home instead. The file
    is opened and checked now: a file that is not a dsh-loop-brake store, or a directory that
    cannot be created, is a ``StoreConfigError``. ``busy_timeout`` (seconds, at most 2) is how
    long a check waits for another process's lock; ``clock`` (seconds since the epoch) is for
    tests that move time.
    """

    __slots__ = (
        "__weakref__",
        "_busy_timeout",
        "_clock",
        "_generation",
        "_inherited",
        "_links",
        "_local",
        "_lock",
        "_path",
        "_ttl",
        "_url",
    )

    shared: Final = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session_ttl: int = DEFAULT_SESSION_TTL,
        busy_timeout: float = MAX_BUSY_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self._url = "sqlite:" + escaped(self._path)  # shown on one line: a path may hold a newline
        self._ttl = check_session_ttl(session_ttl, self._url)
        if tuple(map(int, sqlite3.sqlite_version.split("."))) < MIN_SQLITE_VERSION:
            raise StoreConfigError(
                f"store {shown(self._url)}: the SQLite store needs SQLite"
                f" {'.'.join(map(str, MIN_SQLITE_VERSION))} or newer, and this Python has"
                f" {sqlite3.sqlite_version}; use a newer Python build, or a redis:// store",
                url=self._url,
            )
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, (int, float))
            or not 0 < busy_timeout <= MAX_BUSY_TIMEOUT
        ):
            raise StoreConfigError(
                f"store {shown(self._url)}: busy_timeout must be a number of seconds above 0 and"
                f" at most {MAX_BUSY_TIMEOUT:g}, got {busy_timeout!r}",
                url=self._url,
            )
        self._busy_timeout = float(busy_timeout)
        self._clock = clock
        self._lock = threading.Lock()
        self._local = threading.local()
        # Every thread's link (its connection, and the thread it belongs to): to close them all,
        # and to close those of threads that have ended.
        self._links: list[_Link] = []
        self._inherited: list[sqlite3.Connection] = []  # from a parent process: never used
        self._generation = object()  # replaced by close() and fork: older connections are stale
        _stores.add(self)
        self._open()  # open and check the file now, so a bad path fails here, not mid-run

    # -- the protocol's attributes --

    @property
    def url(self) -> str:
        return self._url

    @property
    def path(self) -> str:
        """The database file's absolute path."""
        return self._path

    @property
    def session_ttl(self) -> int:
        return self._ttl

    # -- the loop brake's streaks --

    def advance_streak(self, session: str, digest: bytes) -> int:
        check_streak_call(session, digest)
        key = session.encode("utf-8", "surrogatepass")
        _in_flight.append(None)  # what _operation does, written out on the busiest path
        if _forking:
            _wait_for_fork()
        try:
            link, db = self._acquire()
            try:
                now = self._clock()
                heard = db.heard
                heard.count, heard.bucket = 1, None  # what a new row reports: nothing, count 1
                try:
                    db.execute(_ADVANCE, (key, digest, now, self._ttl))
                except sqlite3.Error as error:
                    raise self._failure(db, error) from error
                bucket = heard.bucket
                if bucket is not None and bucket != (now + self._ttl) // _BUCKET_SECONDS:
                    self._rebucket(db, _REBUCKET_STREAK, key)  # once an hour per session
                return heard.count
            finally:
                self._release(link)
        finally:
            _in_flight.pop()

    @_operation
    def read_streak(self, db: _Connection, session: str) -> tuple[bytes, int] | None:
        check_key(session, "session")
        key = session.encode("utf-8", "surrogatepass")
        try:
            row = db.execute(_READ_STREAK, (key, self._clock())).fetchone()
        except sqlite3.Error as error:
            raise self._failure(db, error) from error
        return None if row is None else (bytes(row[0]), int(row[1]))

    @_operation
    def forget_streaks(self, db: _Connection, session: str | None = None) -> None:
        check_key(session, "session", optional=True)
        try:
            if session is None:
                db.execute(_FORGET_STREAKS)
            else:
                db.execute(_FORGET_STREAK, (session.encode("utf-8", "surrogatepass"),))
        except sqlite3.Error as error:
            raise self._failure(db, error) from error

    @_operation
    def count_streaks(self, db: _Connection) -> int:
        try:
            count: int = db.execute(_COUNT_STREAKS, (self._clock(),)).fetchone()[0]
        except sqlite3.Error as error:
            raise self._failure(db, error) from error
        return count

    # -- the circuit breaker's windows --

    @_operation
    def judge_call(
        self,
        db: _Connection,
        agent: str | None,
        digest: bytes | None,
        *,
        duplicate_limit: int,
        window: int,
        cap: int,
    ) -> BreakerDenial | None:
        check_breaker_call(agent, digest, duplicate_limit, window, cap)
        key = _agent_key(agent)
        try:
            with _WriteTransaction(db):
                denial = self._judge(db, key, digest, duplicate_limit, window, cap)
        except sqlite3.Error as error:
            raise self._failure(db, error) from error
        return denial

    def _judge(
        self,
        db: sqlite3.Connection,
        key: bytes,
        digest: bytes | None,
        duplicate_limit: int,
        window: int,
        cap: int,
    ) -> BreakerDenial | None:
        """BreakerWindow.judge in SQL, inside the caller's write transaction."""
        now = self._clock()
        row = db.execute(_READ_AGENT, (key,)).fetchone()
        new = row is None
        calls = marks = next_seq = head = bucket = 0
        if row is not None:
            calls, marks, next_seq, head, expires, bucket = row
            if expires <= now:  # forgotten: this call starts the agent afresh
                db.execute(_WINDOW_FORGET, (key,))
                calls = marks = next_seq = head = 0
        if next_seq - head > window:  # a smaller window than the last call's
            head = next_seq - window
            db.execute(_WINDOW_CUT, (key, head))
        denial: BreakerDenial | None = None
        if 0 < cap <= calls:
            denial = BreakerDenial("cap", calls, cap, not marks & DENIAL_MARKS["cap"])
        elif digest is not None:
            count = db.execute(_WINDOW_COUNT, (key, digest)).fetchone()[0] + 1
            if count >= duplicate_limit:
                first = not marks & DENIAL_MARKS["duplicate"]
                denial = BreakerDenial("duplicate", count, duplicate_limit, first)
        if denial is not None:
            marks |= DENIAL_MARKS[denial.kind]
        else:
            calls += 1
            if digest is not None:
                db.execute(_WINDOW_ADD, (key, next_seq, digest))
                next_seq += 1
                if next_seq - head > window:
                    head += 1
                    db.execute(_WINDOW_CUT, (key, head))
        moved = bucket != (now + self._ttl) // _BUCKET_SECONDS  # a new agent's is 0: moved
        save = _SAVE_AGENT_REBUCKETED if moved else _SAVE_AGENT
        db.execute(save, (key, calls, marks, next_seq, head, now, self._ttl))
        if new:
            self._purge_agents(db, now)
        return denial

    def _rebucket(self, db: sqlite3.Connection, statement: str, key: bytes) -> None:
        """Move a row's bucket to its expiry's hour: a hint for the purge, so best effort.

        The check itself is done and counted; this must not wait for another process's lock a
        second time, nor fail the check. A bucket left behind only makes the purge look at the
        row early (it checks ``expires`` too) or an hour late.
        """
        try:
            db.execute("PRAGMA busy_timeout = 0")
            try:
                db.execute(statement, (key,))
            finally:
                db.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        except sqlite3.Error:
            pass

    @staticmethod
    def _purge_agents(db: sqlite3.Connection, now: float) -> None:
        # A new agent removes at most two expired ones, so the file grows only with live agents.
        for (expired,) in db.execute(_EXPIRED_AGENTS, (now,)).fetchall():
            db.execute(_WINDOW_FORGET, (expired,))
            db.execute(_FORGET_AGENT, (expired,))

    @_operation
    def breaker_calls(self, db: _Connection, agent: str | None) -> int:
        check_key(agent, "agent", optional=True)
        try:
            row = db.execute(_AGENT_CALLS, (_agent_key(agent), self._clock())).fetchone()
        except sqlite3.Error as error:
            raise self._failure(db, error) from error
        return 0 if row is None else int(row[0])

    @_operation
    def forget_breaker(self, db: _Connection) -> None:
        try:
            with _WriteTransaction(db):
                db.execute(_WINDOWS_FORGET)
                db.execute(_FORGET_AGENTS)
        except sqlite3.Error as error:
            raise self._failure(db, error) from error

    @_operation
    def count_agents(self, db: _Connection) -> int:
        try:
            count: int = db.execute(_COUNT_AGENTS, (self._clock(), _NO_AGENT)).fetchone()[0]
        except sqlite3.Error as error:
            raise self._failure(db, error) from error
        return count

    # -- the rest of the protocol --

    @_operation
    def ping(self, db: _Connection) -> None:
        """Open the file if need be and read it once."""
        try:
            db.execute("SELECT count(*) FROM streaks WHERE session = x''").fetchone()
        except sqlite3.Error as error:
            raise self._failure(db, error) from error

    def close(self) -> None:
        """Close every thread's connection; the next operation opens a new one.

        A connection that another thread is using at this moment is closed by that thread as
        soon as its operation ends (which it finishes normally), never under it.
        """
        with self._lock:
            self._generation = object()
            links = list(self._links)
        for link in links:
            _close_link(link, unless_current=self._generation)

    # -- connections --

    @_operation
    def _open(self, db: _Connection) -> None:
        pass  # _operation has opened (and checked) the file

    def _acquire(self) -> tuple[_Link, _Connection]:
        """This thread's link, locked, and its connection of the current generation (opened,
        and the file checked, on first use and after ``close()`` or a failure)."""
        link: _Link | None = getattr(self._local, "link", None)
        if link is None:
            link = self._new_link()
        link.lock.acquire()
        db = link.db
        if db is None or link.generation is not self._generation:
            try:
                link.db, link.generation = None, None
                if db is not None:
                    _close_quietly(db)
                generation = self._generation  # read first: a close() meanwhile makes it stale
                db = link.db = self._connect()
                link.generation = generation
            except BaseException:
                link.lock.release()
                raise
        return link, db

    def _release(self, link: _Link) -> None:
        link.lock.release()
        generation = self._generation
        if link.generation is not generation:  # close() ran meanwhile: it left this one to us
            _close_link(link, unless_current=generation)

    def _new_link(self) -> _Link:
        """A link for this thread; the connections of threads that have ended are closed now
        (nothing can use them again: a thread's link is reached only through its own local
        storage)."""
        link = _Link(threading.current_thread())
        with self._lock:
            ended = [old for old in self._links if not old.thread.is_alive()]
            self._links = [old for old in self._links if old.thread.is_alive()]
            self._links.append(link)
        for old in ended:
            _close_link(old)
        self._local.link = link
        return link

    def _connect(self) -> _Connection:
        url = self._url
        deadline = time.monotonic() + self._busy_timeout
        _prepare_file(self._path, url)
        try:
            db = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,  # autocommit: transactions are ours to begin and end
                check_same_thread=False,  # close() closes idle threads' connections
                factory=_Connection,
            )
            db.heard = _Heard()
            db.create_function("dsh_loop_brake_report", 2, db.heard.report)
        except sqlite3.Error as error:
            raise StoreConfigError(
                f"store {shown(url)}: cannot open the database ({type(error).__name__}:"
                f" {error}); choose a file you can read and write",
                url=url,
            ) from error
        try:
            _initialise(db, url, deadline)
        except sqlite3.DatabaseError as error:
            db.close()
            if _is_busy(error):
                raise StoreError(
                    f"store {shown(url)}: the database is locked by another process; gave up"
                    f" after {self._busy_timeout:g} s ({type(error).__name__}: {error})",
                    url=url,
                ) from error
            raise _unusable(self._path, url, error) from error
        except BaseException:
            db.close()
            raise
        return db

    def _failure(self, db: sqlite3.Connection, error: sqlite3.Error) -> StoreError:
        """The StoreError for a failed operation; a broken connection is dropped, to reopen."""
        _roll_back_quietly(db)
        url = shown(self._url)
        if _is_busy(error):
            return StoreError(
                f"store {url}: the database is locked by another process; gave up after"
                f" {self._busy_timeout:g} s ({type(error).__name__}: {error})",
                url=self._url,
            )
        # Anything else (a corrupted or replaced file, a disk error, a closed connection): this
        # connection is not trusted again; the next operation opens the file afresh.
        self._drop(db)
        return StoreError(
            f"store {url}: the database could not be used ({type(error).__name__}: {error})",
            url=self._url,
        )

    def _drop(self, db: sqlite3.Connection) -> None:
        """Close this thread's connection ``db`` (its operation holds the link's lock)."""
        link: _Link | None = getattr(self._local, "link", None)
        if link is not None and link.db is db:
            link.db, link.generation = None, None
        _close_quietly(db)

    def _forget_inherited_connections(self) -> None:
        """In a child after fork: set the parent's connections aside, unused and unclosed (only
        those of a fork that did not find the process quiet are still here)."""
        self._inherited.extend(link.db for link in self._links if link.db is not None)
        self._links = []
        self._lock = threading.Lock()  # a lock held by another thread at fork stays held
        self._local = threading.local()  # this thread's link is among those set aside
        self._generation = object()
