"""The history's hash chain: a change to the history made outside lessonlib shows the next time the
gradebook opens.

Every history row carries ``hash = sha256(previous row's hash + "\\n" + the row as JSON)``, the
first row chained to "". The row's JSON is its id, time, command, what, assignment and learner ids,
exercise, old, new and reason, in that order. ``meta.history_head`` holds the last row's id and
hash, written in the same transaction as the row. :func:`verify` walks the rows oldest first and
stops at the first that breaks the chain:

- a row whose content was edited no longer matches its hash, and neither does any row after it;
- a row deleted from the middle leaves a gap in the ids (they are never reused: AUTOINCREMENT);
- rows deleted from the end leave the head in ``meta`` (and SQLite's sequence) past the last row.

Whoever can write the file can also recompute every hash; the backups (``backups.py``) keep the
head of the history as it was, so such a rewrite shows as a row that differs from the newest
backup's. The chain makes tampering evident; keeping learner code away from the file is the
sandbox's job.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass

COLUMNS = ("id", "at", "command", "what", "assignment_id", "learner_id", "exercise", "old", "new", "reason")
HEAD = "history_head"


def row_hash(previous: str, values: tuple[object, ...]) -> str:
    """The chain's hash of one row (``values`` in the order of COLUMNS) after ``previous``."""
    text = json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{previous}\n{text}".encode()).hexdigest()


def last(conn: sqlite3.Connection) -> tuple[int, str]:
    """The id and hash of the newest history row ((0, "") before the first)."""
    row = conn.execute("SELECT id, hash FROM history ORDER BY id DESC LIMIT 1").fetchone()
    return (int(row[0]), str(row[1])) if row else (0, "")


def append(conn: sqlite3.Connection, values: tuple[object, ...]) -> int:
    """Insert one history row (``values``: COLUMNS without the id), chained to the newest one, and move
    the head; the caller holds the transaction. Returns the new row's id."""
    previous_id, previous = last(conn)
    sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'history'").fetchone()
    row_id = max(previous_id, int(sequence[0]) if sequence else 0) + 1
    full = (row_id, *values)
    digest = row_hash(previous, full)
    conn.execute(f"INSERT INTO history ({', '.join(COLUMNS)}, hash) VALUES ({', '.join('?' * len(COLUMNS))}, ?)",
                 (*full, digest))
    set_head(conn, row_id, digest)
    return row_id


def set_head(conn: sqlite3.Connection, row_id: int, digest: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (HEAD, f"{row_id}:{digest}"))


def seal_existing(conn: sqlite3.Connection) -> None:
    """Give every row of an older gradebook its hash, oldest first (the upgrade to format 4)."""
    previous = ""
    row_id = 0
    for row in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM history ORDER BY id").fetchall():
        previous = row_hash(previous, tuple(row))
        row_id = int(row[0])
        conn.execute("UPDATE history SET hash = ? WHERE id = ?", (previous, row_id))
    set_head(conn, row_id, previous)


@dataclass(frozen=True)
class Break:
    """Where the chain breaks: the first entry that does not follow, and what is wrong with it."""

    entry: int
    what: str


def _describe(row: sqlite3.Row) -> str:
    return f"entry {row['id']} ({row['at']}, {row['what']}{' of ' + row['exercise'] if row['exercise'] else ''})"


def verify(conn: sqlite3.Connection) -> Break | None:
    """The first break in the history's chain, or None when every row follows from the one before."""
    previous, expected = "", 1
    for row in conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM history ORDER BY id"):
        if row["id"] != expected:
            gap = f"entry {expected}" if row["id"] == expected + 1 else f"entries {expected} to {row['id'] - 1}"
            return Break(expected, f"{gap} of the history {'is' if row['id'] == expected + 1 else 'are'} missing "
                                   f"(deleted): {_describe(row)} follows entry {expected - 1}")
        if row["hash"] != row_hash(previous, tuple(row[c] for c in COLUMNS)):
            return Break(row["id"], f"{_describe(row)} of the history was changed after it was written (it no "
                                    "longer matches its hash)")
        previous, expected = row["hash"], expected + 1
    found = expected - 1
    head = conn.execute("SELECT value FROM meta WHERE name = ?", (HEAD,)).fetchone()
    sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'history'").fetchone()
    head_id, _, head_hash = (head[0] if head else "0:").partition(":")
    recorded = max(int(head_id or 0), int(sequence[0]) if sequence else 0)
    if recorded > found:
        return Break(found + 1, f"entries {found + 1} to {recorded} of the history are missing (deleted from its "
                                f"end): the last entry left is {found}")
    if head and head_hash != previous:
        return Break(found, f"entry {found} of the history is not the one the gradebook recorded as its last")
    return None


def entry_hash(conn: sqlite3.Connection, row_id: int) -> str | None:
    """The hash of history entry ``row_id`` (None when there is no such entry)."""
    row = conn.execute("SELECT hash FROM history WHERE id = ?", (row_id,)).fetchone()
    return None if row is None else str(row[0])
