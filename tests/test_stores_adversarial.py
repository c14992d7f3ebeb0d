"""The stores against hosts and surroundings that do not behave politely: threads that come and
go, links planted at the store's path, clients that retry, answers lost on the way back, URLs
typed wrong with a password in them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsh_loop_brake.stores import (
    SQLiteStore,
    StoreConfigError,
    open_store,
)

A = hashlib.sha256(b"a").digest()
B = hashlib.sha256(b"b").digest()
SECRET = "s3cret-Pa55"

unix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")


# --- SQLite: threads that come and go ---------------------------------------------------------

THREAD_CHURN = """
import hashlib, os, resource, sys, threading
from dsh_loop_brake.stores import SQLiteStore

# A host that runs each request in a thread of its own (ThreadingHTTPServer, a thread per tool
# call), with a modest limit on open files, as many services run with.
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
store = SQLiteStore(sys.argv[1])
digest = hashlib.sha256(b"search").digest()
counts = []
for _ in range(400):
    thread = threading.Thread(target=lambda: counts.append(store.advance_streak("s", digest)))
    thread.start()
    thread.join()
with open(os.devnull) as still_possible:  # the host itself can still open a file
    pass
print(counts == list(range(1, 401)))
"""


@unix_only
def test_threads_that_come_and_go_do_not_use_up_the_hosts_open_files(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", THREAD_CHURN, str(tmp_path / "s.sqlite3")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "True"


def test_a_store_used_by_a_thread_that_ended_still_counts_and_closes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    for _ in range(3):
        thread = threading.Thread(target=store.advance_streak, args=("s", A))
        thread.start()
        thread.join()
    assert store.advance_streak("s", A) == 4
    store.close()
    assert store.read_streak("s") == (A, 4)
    store.close()


# --- SQLite: what is at the path --------------------------------------------------------------


@unix_only
def test_a_dangling_link_at_the_path_creates_no_file_where_it_points(tmp_path: Path) -> None:
    # Planted in a shared directory, a link would make the store create a file of the link's
    # choosing, with the user's rights.
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    path = tmp_path / "brakes.sqlite3"
    path.symlink_to(target)
    with pytest.raises(StoreConfigError, match="symbolic link"):
        SQLiteStore(path)
    assert not target.exists()
    with pytest.raises(StoreConfigError, match="symbolic link"):
        open_store(f"sqlite:{path}")
    assert not target.exists()


@unix_only
def test_a_link_to_another_file_leaves_that_file_alone(tmp_path: Path) -> None:
    other = tmp_path / "someone-elses-empty-file"
    other.write_bytes(b"")
    path = tmp_path / "brakes.sqlite3"
    path.symlink_to(other)
    with pytest.raises(StoreConfigError, match="symbolic link") as raised:
        SQLiteStore(path)
    assert other.read_bytes() == b""
    assert str(path) in str(raised.value)


@unix_only
def test_a_named_pipe_or_a_directory_at_the_path_is_refused_at_once(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.sqlite3"
    os.mkfifo(pipe)
    with pytest.raises(StoreConfigError, match="not a regular file"):
        SQLiteStore(pipe)
    directory = tmp_path / "dir.sqlite3"
    directory.mkdir()
    with pytest.raises(StoreConfigError, match="directory"):
        SQLiteStore(directory)
