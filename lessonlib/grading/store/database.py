"""Opening the course gradebook, transactions, and the history row every change writes.

Durability: the default rollback journal (one file to copy or back up: no ``-wal`` beside it) with
``synchronous=FULL``, so a transaction is on disk when ``COMMIT`` returns, and a process killed at
any moment leaves either the whole transaction or none of it (SQLite rolls a hot journal back on
the next open). Every write is a ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front,
and ``busy_timeout`` makes a reader or writer wait for the other instead of failing.

Every open checks the file before anything reads a grade from it: a file that is empty, not SQLite,
truncated or corrupt (``PRAGMA quick_check``), missing its guarding triggers, or whose history's
hash chain breaks (``chain.py``), or that is missing while backups of it exist, is refused with a
``DamagedGradebook`` naming the backup to restore. A new gradebook is built under a temporary name
and renamed into place once complete, so an empty file is never one this module left. A command
that writes then takes a backup (``backups.py``) before it changes anything. SQLite's own errors
while writing (a full disk, a read-only folder) become one-line ``StoreError`` messages.
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

from lessonlib.grading.store import backups, chain, schema
from lessonlib.grading.store import lock as grader_lock
from lessonlib.grading.store.errors import DamagedGradebook, GradebookError

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
        self._opened_at = 0  # conn.total_changes once the file was checked: more at close, a backup is taken

    # --- life ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file and free the lock; a writer that changed anything takes a backup first, so
        the newest backup holds every finished command."""
        try:
            if self.lock is not None and self.conn.total_changes > self._opened_at and not self.conn.in_transaction:
                backups.make(self.conn, self.path)
        finally:
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
        except BaseException as exc:
            self._depth -= 1
            if self._depth == 0 and self.conn.in_transaction:  # (SQLite may have rolled back already)
                self.conn.execute("ROLLBACK")
            if self._depth == 0 and _converted(exc):
                raise sqlite_problem(self.path, exc) from exc
            raise
        self._depth -= 1
        if self._depth == 0:
            try:
                self.conn.execute("COMMIT")
            except BaseException as exc:  # (a full disk): nothing of it stays, and the next transaction can begin
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if _converted(exc):
                    raise sqlite_problem(self.path, exc) from exc
                raise

    def record(self, what: str, *, assignment_id: int | None = None, learner_id: int | None = None,
               exercise: str | None = None, old: Any = None, new: Any = None, reason: str = "",
               command: str | None = None) -> int:
        """Append one history row (inside the caller's transaction); returns its id."""
        if self._depth == 0:
            raise RuntimeError("history rows are written inside a transaction, with the change they describe")
        return chain.append(self.conn, (now(), command or self.command, what, assignment_id, learner_id, exercise,
                                        to_json(old), to_json(new), reason))

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


def _converted(exc: BaseException) -> bool:
    """SQLite's errors about the file or the disk (said in one line), not a rule the schema enforces
    (an IntegrityError, which the code that broke the rule reports)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError)


def sqlite_problem(path: Path, exc: sqlite3.Error) -> GradebookError:
    """SQLite's error while using ``path`` as one line that says what to do (nothing of the failed
    change was kept: the transaction rolled back)."""
    text = str(exc).lower()
    if "full" in text:
        return StoreError(f"the disk holding {path} is full: nothing of this change was written and the gradebook "
                          "is as it was; free some space and run the same command again")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path} cannot be written (the file or its folder is read-only): give yourself write "
                          "permission to both, then run the same command again")
    if "unable to open" in text:
        return StoreError(f"{path} cannot be opened: its folder may be missing or not writable (SQLite writes a "
                          "journal beside the file), or the file is not readable")
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        return DamagedGradebook(damaged_message(path, "is corrupt (SQLite: " + str(exc) + ")"))
    return StoreError(f"SQLite refused to use {path}: {exc}")


def damaged_message(path: Path, problem: str) -> str:
    """``path`` PROBLEM, refused, and the backup that would bring it back."""
    latest = backups.newest(path)
    if latest is not None:
        way = (f"restore the newest backup ({latest.name}, taken {backups.taken_at(latest)}) with `lessonlib restore "
               f"--gradebook {path}` (the file as it is now is kept aside), then run your command again")
    else:
        way = (f"there is no backup of it in {backups.folder(path)}: restore a copy of your own, or move the file "
               "away to start a new gradebook")
    return (f"the course gradebook {path} {problem}; it is refused, so that no grade is read from it or written "
            f"into it: {way}")


def open_gradebook(path: Path | str, command: str, *, lock: bool = True, wait: bool = False,
                   timeout: float | None = None) -> Gradebook:
    """Open (or create) the course gradebook at ``path`` for ``command`` (the words recorded in history).

    lock=True (every command that writes): take the grader lock first; another grader holding it
    raises GraderBusy naming it, or, with wait=True, is waited for (up to ``timeout`` seconds); once
    the file passed every check, a backup of it is taken. A damaged file raises DamagedGradebook
    (see the module docstring). An older format is upgraded after a backup copy
    (``gradebook.db.formatN.bak``); a newer or unknown one raises StoreFormatError saying what to do.
    """
    path = Path(path)
    if not lock and not path.exists():
        raise StoreError(f"no gradebook at {path}; grading an assignment creates it (a reader never does)")
    held = grader_lock.acquire(path, command, wait=wait, timeout=timeout) if lock else None
    try:
        if not path.exists():
            if backups.newest(path) is not None:
                raise DamagedGradebook(damaged_message(path, "is missing, though backups of it exist"))
            _create(path, command)
        _check_header(path)
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)  # we BEGIN ourselves
        except sqlite3.Error as exc:
            raise sqlite_problem(path, exc) from None
        gradebook = Gradebook(conn, path, command, held)
        try:
            _configure(conn)
            _prepare(gradebook)
            _check_whole(gradebook)
            latest = backups.newest(path)
            if held is not None and (latest is None or backups.head(latest) != chain.last(conn)):
                backups.make(conn, path)  # what this command is about to change (unless the newest backup has it)
            gradebook._opened_at = conn.total_changes
        except sqlite3.Error as exc:
            conn.close()
            raise sqlite_problem(path, exc) from None
        except BaseException:
            conn.close()
            raise
        return gradebook
    except BaseException:
        if held is not None:
            held.release()
        raise


def _create(path: Path, command: str) -> None:
    """A new, empty gradebook at ``path``, built under another name and renamed into place when complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.new-{os.getpid()}")
    os.close(os.open(partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600))  # the seed is in it: the grader's alone
    try:
        conn = sqlite3.connect(partial, isolation_level=None)
        try:
            _configure(conn)
            gradebook = Gradebook(conn, partial, command, None)
            gradebook._preparing = True
            with gradebook.transaction() as c:
                schema.create(c, now())
                gradebook.record("gradebook", new={"format": schema.FORMAT}, reason="created")
        finally:
            conn.close()
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite (a CSV given by mistake), or an empty one, before SQLite is
    pointed at it."""
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_HEADER))
    if not head:
        raise DamagedGradebook(damaged_message(path, "is empty (0 bytes)"))
    if head != SQLITE_HEADER:
        raise schema.StoreFormatError(f"{path} is not an SQLite database; give the path of the course's "
                                      f"{GRADEBOOK_FILE}, or restore it from a backup")


def _check_whole(gradebook: Gradebook) -> None:
    """Refuse a gradebook whose pages are damaged, whose guards are gone, or whose history's chain breaks
    (or does not continue the newest backup's)."""
    conn, path = gradebook.conn, gradebook.path
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise DamagedGradebook(damaged_message(path, f"is corrupt ({'; '.join(problems[:3])})"))
    triggers = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    missing = [t for t in schema.GUARDS if t not in triggers]
    if missing:
        raise DamagedGradebook(damaged_message(path, f"lacks the trigger {missing[0]}, which keeps its history "
                                                     "and identities from being changed (it was removed outside "
                                                     "lessonlib)"))
    broken = chain.verify(conn)
    if broken is not None:
        raise DamagedGradebook(damaged_message(path, f"has a broken history: {broken.what}"))
    latest = backups.newest(path)
    kept = backups.head(latest) if latest is not None else None
    if kept is not None and kept[0] > 0:
        here = chain.entry_hash(conn, kept[0])
        if here is None:
            raise DamagedGradebook(damaged_message(path, f"has a broken history: entries up to {kept[0]} were in the "
                                                         f"backup {latest.name}, but it ends at entry "
                                                         f"{chain.last(conn)[0]}"))
        if here != kept[1]:
            raise DamagedGradebook(damaged_message(path, f"has a broken history: entry {kept[0]} differs from the "
                                                         f"same entry in the backup {latest.name} (the history was "
                                                         "rewritten)"))


def _prepare(gradebook: Gradebook) -> None:
    """Check (and upgrade) the format of an existing file; a reader (no lock) only checks."""
    path = gradebook.path
    found = schema.stored_format(gradebook.conn)  # a read: it also rolls back what a killed writer left
    if found is None:
        raise DamagedGradebook(damaged_message(path, "holds no tables (it was emptied or never finished)"))
    steps = schema.check_format(found, path)
    if not steps:
        return
    if gradebook.lock is None:
        raise schema.StoreFormatError(
            f"{path} has gradebook format {found} and needs an upgrade to format {schema.FORMAT}; open it with "
            "the grader lock (any grading command) to upgrade it")
    schema.backup_before_upgrade(path, found)  # outside any transaction: the file as it was
    gradebook._preparing = True
    try:
        with gradebook.transaction() as conn:
            schema.upgrade(conn, steps)
            gradebook.record("gradebook", old={"format": found}, new={"format": schema.FORMAT}, reason="upgraded")
    finally:
        gradebook._preparing = False


def _sound(backup: Path) -> str:
    """Why ``backup`` cannot be restored ("" when it can: it opens, its pages and its history's chain check)."""
    try:
        conn = backups.open_read_only(backup)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        conn.row_factory = sqlite3.Row
        if [row[0] for row in conn.execute("PRAGMA quick_check")] != ["ok"]:
            return "it is corrupt"
        found = schema.stored_format(conn)
        if found is None or found > schema.FORMAT:
            return "it is not a gradebook this lessonlib reads"
        if found >= 4:
            broken = chain.verify(conn)
            if broken is not None:
                return broken.what
        return ""
    except (sqlite3.Error, GradebookError) as exc:
        return str(exc)
    finally:
        conn.close()


def restore_gradebook(path: Path | str, command: str, backup: Path | None = None) -> tuple[Path, Path | None]:
    """Put a backup in place of the gradebook at ``path``: ``backup``, else the newest one that checks.

    Takes the grader lock (another grader: GraderBusy). The file it replaces is moved aside, never
    deleted (``backups.restore``); a history row records the restore. Returns the backup restored and
    where the replaced file went (None when there was none).
    """
    path = Path(path)
    candidates = [Path(backup)] if backup is not None else list(reversed(backups.backups(path)))
    if not candidates:
        raise StoreError(f"there is no backup of {path} in {backups.folder(path)}; a backup is taken before every "
                         "command that writes, so this gradebook was never written by this version of lessonlib")
    with grader_lock.acquire(path, command):
        refused = []
        for candidate in candidates:
            why = _sound(candidate) if candidate.is_file() else "no such file"
            if not why:
                break
            refused.append(f"{candidate.name}: {why}")
        else:
            raise StoreError(f"no backup of {path} can be restored ({'; '.join(refused)})")
        kept, moved = backups.restore(path, candidate)
    with open_gradebook(path, command) as gb, gb.transaction():
        gb.record("gradebook", new={"restored_from": candidate.name, "taken": backups.taken_at(candidate)},
                  reason=f"restored from a backup; the file it replaced is kept as {kept.name if kept else 'nothing'}"
                         + (f"; {len(moved)} newer backup(s) moved to {moved[0].parent.name}" if moved else ""))
    return candidate, kept
