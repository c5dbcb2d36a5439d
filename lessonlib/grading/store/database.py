"""Opening the course gradebook, transactions, and the history row every change writes.

Durability: the default rollback journal (one file to copy or back up: no ``-wal`` beside it) with
``synchronous=FULL``, so a transaction is on disk when ``COMMIT`` returns, and a process killed at
any moment leaves either the whole transaction or none of it (SQLite rolls a hot journal back on
the next open). Every write is a ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front,
and ``busy_timeout`` makes a reader or writer wait for the other instead of failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lessonlib.grading.store import lock as grader_lock
from lessonlib.grading.store import schema
from lessonlib.grading.store.errors import GradebookError

GRADEBOOK_FILE = "gradebook.db"
BUSY_TIMEOUT_MS = 30_000
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file


class StoreError(GradebookError, ValueError):
    """A request the gradebook cannot carry out (an unknown learner, a missing reason, ...)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, allow_nan=False)


class Gradebook:
    """One open course gradebook: a connection, the command it writes for, and (for writers) the lock."""

    def __init__(self, conn: sqlite3.Connection, path: Path, command: str,
                 lock: grader_lock.GraderLock | None) -> None:
        self.conn = conn
        self.path = path
        self.command = command
        self.lock = lock
        self._depth = 0
        self._preparing = False  # laying out or upgrading the file, before any command writes

    # --- life ---------------------------------------------------------------------------------

    def close(self) -> None:
        self.conn.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transactions ---------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All or nothing: the outermost ``with`` commits (or rolls back on an exception); inner ones join it."""
        if self._depth == 0:
            if self.lock is None and not self._preparing:
                raise StoreError(f"{self.path} was opened for reading (lock=False); open it with the grader lock "
                                 "(lock=True, the default) to change it, so that no other grader writes meanwhile")
            self.conn.execute("BEGIN IMMEDIATE")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self._depth -= 1
            if self._depth == 0 and self.conn.in_transaction:  # (SQLite may have rolled back already)
                self.conn.execute("ROLLBACK")
            raise
        self._depth -= 1
        if self._depth == 0:
            try:
                self.conn.execute("COMMIT")
            except BaseException:  # (a full disk): nothing of it stays, and the next transaction can begin
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def record(self, what: str, *, assignment_id: int | None = None, learner_id: int | None = None,
               exercise: str | None = None, old: Any = None, new: Any = None, reason: str = "",
               command: str | None = None) -> int:
        """Append one history row (inside the caller's transaction); returns its id."""
        if self._depth == 0:
            raise RuntimeError("history rows are written inside a transaction, with the change they describe")
        cursor = self.conn.execute(
            "INSERT INTO history (at, command, what, assignment_id, learner_id, exercise, old, new, reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (now(), command or self.command, what, assignment_id, learner_id, exercise, to_json(old), to_json(new),
             reason))
        return int(cursor.lastrowid or 0)

    # --- names to ids -----------------------------------------------------------------------------

    def assignment_id(self, name: str) -> int:
        row = self.conn.execute("SELECT id FROM assignments WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = [r[0] for r in self.conn.execute("SELECT name FROM assignments ORDER BY name")]
            raise StoreError(f"no assignment {name!r} in {self.path}; the assignments are: "
                             f"{', '.join(known) or 'none yet (grading one creates it)'}")
        return int(row[0])

    def learner_id(self, key: str) -> int:
        row = self.conn.execute("SELECT id FROM learners WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise StoreError(f"no learner with key {key!r} in {self.path} (keys are those of feedback/KEY.md "
                             "and the learner column of grades.csv)")
        return int(row[0])


def _configure(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")


def open_gradebook(path: Path | str, command: str, *, lock: bool = True, wait: bool = False,
                   timeout: float | None = None) -> Gradebook:
    """Open (or create) the course gradebook at ``path`` for ``command`` (the words recorded in history).

    lock=True (every command that writes): take the grader lock first; another grader holding it
    raises GraderBusy naming it, or, with wait=True, is waited for (up to ``timeout`` seconds).
    An older format is upgraded after a backup copy (``gradebook.db.formatN.bak``); a newer or
    unknown one raises StoreFormatError saying what to do.
    """
    path = Path(path)
    if not lock and not path.exists():
        raise StoreError(f"no gradebook at {path}; grading an assignment creates it (a reader never does)")
    held = grader_lock.acquire(path, command, wait=wait, timeout=timeout) if lock else None
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # the seed is in it: the grader's alone
        _check_header(path)
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)  # we BEGIN ourselves
        gradebook = Gradebook(conn, path, command, held)
        try:
            _configure(conn)
            _prepare(gradebook)
        except BaseException:
            conn.close()
            raise
        return gradebook
    except BaseException:
        if held is not None:
            held.release()
        raise


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite (a CSV given by mistake) before SQLite is pointed at it."""
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise schema.StoreFormatError(f"{path} is not an SQLite database; give the path of the course's "
                                      f"{GRADEBOOK_FILE}, or restore it from a backup")


def _prepare(gradebook: Gradebook) -> None:
    """Lay out a new file, or check (and upgrade) an existing one; a reader (no lock) only checks."""
    path = gradebook.path
    found = schema.stored_format(gradebook.conn)  # a read: it also rolls back what a killed writer left
    steps = [] if found is None else schema.check_format(found, path)
    if found is not None and not steps:
        return
    if gradebook.lock is None:
        raise schema.StoreFormatError(
            f"{path} is empty" if found is None else
            f"{path} has gradebook format {found} and needs an upgrade to format {schema.FORMAT}; open it with "
            "the grader lock (any grading command) to upgrade it")
    if found is not None:
        schema.backup_before_upgrade(path, found)  # outside any transaction: the file as it was
    gradebook._preparing = True
    try:
        with gradebook.transaction() as conn:
            if found is None:
                schema.create(conn, now())
                gradebook.record("gradebook", new={"format": schema.FORMAT}, reason="created")
            else:
                schema.upgrade(conn, steps)
                gradebook.record("gradebook", old={"format": found}, new={"format": schema.FORMAT},
                                 reason="upgraded")
    finally:
        gradebook._preparing = False
