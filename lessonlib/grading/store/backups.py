"""Backups of the course gradebook: one before every command that writes, and the way back.

``gradebook.db.backups/`` beside the gradebook holds ``gradebook-YYYYMMDDTHHMMSSZ.db`` files (0600:
they hold the seeds), made with SQLite's online backup API (a consistent copy, whatever else reads
the file) after the gradebook passed every check, so a backup is never of a damaged file. The
newest ``KEEP`` are kept.

``lessonlib restore`` (:func:`restore`) copies a backup over the gradebook: the gradebook as it was
is moved aside first (``gradebook.db.damaged-TIME``), never deleted, and backups newer than the one
restored are moved into ``superseded-TIME/`` in the backup folder, so the newest backup is again a
prefix of the history (``chain.py``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

KEEP = 30
PREFIX, SUFFIX = "gradebook-", ".db"


def folder(database: Path) -> Path:
    """Where the backups of ``database`` live."""
    return Path(database).with_name(Path(database).name + ".backups")


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")


def backups(database: Path) -> list[Path]:
    """Every backup of ``database``, oldest first (their names sort by time)."""
    where = folder(database)
    if not where.is_dir():
        return []
    return sorted(p for p in where.iterdir() if p.is_file() and p.name.startswith(PREFIX) and p.suffix == SUFFIX)


def newest(database: Path) -> Path | None:
    found = backups(database)
    return found[-1] if found else None


def taken_at(backup: Path) -> str:
    """When a backup was made, as its name says it (``2026-03-01 17:00:00 UTC``)."""
    stamp = backup.stem.removeprefix(PREFIX)
    try:
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return backup.name
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def make(conn: sqlite3.Connection, database: Path) -> Path:
    """Copy the open gradebook ``conn`` into a new backup (SQLite's backup API) and drop the oldest
    beyond KEEP; returns the backup's path."""
    where = folder(database)
    where.mkdir(mode=0o700, exist_ok=True)
    os.chmod(where, 0o700)
    target = where / f"{PREFIX}{_stamp()}{SUFFIX}"
    copy_into(conn, target)
    for old in backups(database)[:-KEEP]:
        old.unlink(missing_ok=True)
    return target


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot change ``path`` (nor leave a journal beside it)."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def copy_into(conn: sqlite3.Connection, target: Path) -> None:
    """Copy the database open in ``conn`` to ``target`` (0600) with SQLite's backup API, under a
    temporary name renamed into place once complete."""
    partial = target.with_name(f".{target.name}.partial")
    os.close(os.open(partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600))
    try:
        copy = sqlite3.connect(partial)
        try:
            conn.backup(copy)
        finally:
            copy.close()
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def head(backup: Path) -> tuple[int, str] | None:
    """The last history entry of a backup (its id and hash), None when it cannot be read."""
    try:
        conn = open_read_only(backup)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT id, hash FROM history ORDER BY id DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "")
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def restore(database: Path, backup: Path) -> tuple[Path | None, list[Path]]:
    """Copy ``backup`` over ``database`` (the caller holds the grader lock). Returns where the file it
    replaced was moved (None when there was none) and the newer backups moved into ``superseded-TIME/``."""
    database, backup = Path(database), Path(backup)
    stamp = _stamp()
    kept = None
    if database.exists():
        kept = database.with_name(f"{database.name}.damaged-{stamp}")
        os.replace(database, kept)
    journal = database.with_name(database.name + "-journal")
    if journal.exists():  # a hot journal belongs to the file moved aside, not to the restored one
        aside = kept.with_name(kept.name + "-journal") if kept else journal.with_name(journal.name + ".old")
        os.replace(journal, aside)
    source = open_read_only(backup)
    try:
        copy_into(source, database)
    finally:
        source.close()
    found = [p.name for p in backups(database)]
    ours = backup.resolve().parent == folder(database).resolve() and backup.name in found
    newer = [folder(database) / name for name in found[found.index(backup.name) + 1:]] if ours else []
    moved = []
    if newer:
        aside = folder(database) / f"superseded-{stamp}"
        aside.mkdir(mode=0o700)
        for path in newer:
            moved.append(Path(shutil.move(str(path), aside / path.name)))
    return kept, moved
