"""The course gradebook's schema: one DDL, its format version, and the way an older file is upgraded.

Tables (every time is ISO 8601 in UTC, ``2026-03-01T17:00:00+00:00``; every JSON column is text)::

    meta              name, value                       the format version ("format"), when it was made, the
                                                        history's head ("history_head": id and hash), the
                                                        course's time zone ("timezone") and the marking
                                                        pages' secret ("marking_secret")
    learners          identity, key, base_key, disambiguation, name, lms_id, created_at, created_by
    assignments       name, notebooks (JSON), seed, due_at, late_policy, penalty_per_day, late_floor, lms_points,
                      last_run (JSON: isolation, limits, workers and roster of the last run that graded it)
    submissions       assignment, learner, submitted_at, submitted_from, read_in (the zone a local time was
                      read in), lms_late, attempt, chosen_because, fingerprint, isolation, graded_at, seconds,
                      notes (JSON)
    submission_files  submission, notebook, file_name, sha256, size
    results           assignment, learner, exercise, notebook, position, kind, status, points, max_points,
                      diagnoses (JSON names), detail (JSON: the ExerciseGrade as graded)
    hand_grades       assignment, learner, exercise, points, rubric, comment, answer_sha256, graded_at, command
    overrides         assignment, learner, exercise, points, reason (required), at, command, answer_sha256
                      (the answer it was given for), suspended (why it no longer counts: the answer changed)
    extensions        assignment, learner, due_at, reason (required), at, command, submitted_at (the
                      submission time it was given against), review (why it needs a look: that time changed)
    history           id, at, command, what, assignment, learner, exercise, old (JSON), new (JSON), reason,
                      hash (sha256 of the previous row's hash and this row: the chain, see ``chain.py``)
    exports           id, assignment, kind, at, command, history_id (the last history row it covered)
    enrolments        assignment, learner, at, command   the learners an assignment's roster lists (format 3)

Rules the database itself enforces (triggers and CHECKs, so no code path can break them): history
rows are never updated or deleted; a learner's identity and key never change and no learner is
deleted; an assignment's seed never changes; an override and an extension carry a reason. What
the database cannot enforce against someone who edits the file, the hash chain shows: every open
checks it (``chain.py``).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from lessonlib.grading.store.errors import GradebookError

FORMAT = 4  # bump with every change to DDL, and add the step from the previous format to MIGRATIONS

# Added in format 3 (also the step from format 2).
ENROLMENTS_DDL = """
CREATE TABLE IF NOT EXISTS enrolments (          -- who an assignment expects: its roster's learners
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    at TEXT NOT NULL,
    command TEXT NOT NULL,
    PRIMARY KEY (assignment_id, learner_id)
)"""

DDL = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE learners (
    id INTEGER PRIMARY KEY,
    identity TEXT NOT NULL UNIQUE,               -- lms:<id>, else name:<submitted name, verbatim>
    key TEXT NOT NULL UNIQUE COLLATE NOCASE,     -- file-safe, unique ignoring case: feedback/<key>.md
    base_key TEXT NOT NULL,                      -- the key the name asked for before disambiguation
    disambiguation TEXT NOT NULL DEFAULT '',     -- why key differs from base_key (empty when it does not)
    name TEXT NOT NULL,                          -- for reading; may be updated (a roster's spelling)
    lms_id TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL
);
CREATE TRIGGER learner_identity_fixed BEFORE UPDATE OF identity, key, base_key, disambiguation ON learners
BEGIN SELECT RAISE(ABORT, 'a learner''s identity and key never change once given'); END;
CREATE TRIGGER learner_kept BEFORE DELETE ON learners
BEGIN SELECT RAISE(ABORT, 'learners are never deleted: their grades and history refer to them'); END;

CREATE TABLE assignments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    notebooks TEXT NOT NULL,                     -- JSON list of course notebook file names
    seed INTEGER NOT NULL,                       -- the hidden cases' secret seed
    due_at TEXT,
    late_policy TEXT NOT NULL DEFAULT 'none' CHECK (late_policy IN ('none', 'zero', 'per_day')),
    penalty_per_day REAL NOT NULL DEFAULT 0 CHECK (penalty_per_day >= 0 AND penalty_per_day <= 1),
    late_floor REAL NOT NULL DEFAULT 0 CHECK (late_floor >= 0 AND late_floor <= 1),
    lms_points REAL,                             -- unused since format 4 (the roster says what the LMS gives)
    created_at TEXT NOT NULL,
    last_run TEXT NOT NULL DEFAULT '{}'          -- JSON: the isolation, limits, workers and roster last used
);
CREATE TRIGGER assignment_seed_fixed BEFORE UPDATE OF seed ON assignments
BEGIN SELECT RAISE(ABORT, 'an assignment''s seed never changes: every grade was computed with it'); END;

CREATE TABLE submissions (
    id INTEGER PRIMARY KEY,
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    submitted_at TEXT,                           -- when the LMS received it, when known
    submitted_from TEXT NOT NULL DEFAULT '',     -- where that time comes from (SUBMISSION_TIME_SOURCES)
    read_in TEXT NOT NULL DEFAULT '',            -- the time zone a local time (zip entry, worksheet) was read in
    lms_late INTEGER NOT NULL DEFAULT 0,         -- the LMS marked it late
    attempt INTEGER NOT NULL DEFAULT 0,          -- which resubmission was taken (Canvas's -N; 0 the first)
    chosen_because TEXT NOT NULL DEFAULT '',     -- why that one
    fingerprint TEXT NOT NULL DEFAULT '',
    isolation TEXT NOT NULL DEFAULT '',
    graded_at TEXT,
    seconds REAL NOT NULL DEFAULT 0,
    notes TEXT NOT NULL DEFAULT '[]',
    UNIQUE (assignment_id, learner_id)
);
CREATE TABLE submission_files (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    notebook TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,                        -- empty (and size -1) when imported, not hashed
    size INTEGER NOT NULL,
    PRIMARY KEY (submission_id, notebook)
);

CREATE TABLE results (
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    exercise TEXT NOT NULL,
    notebook TEXT NOT NULL,
    position INTEGER NOT NULL,                   -- the order of the learner's exercises
    kind TEXT NOT NULL CHECK (kind IN ('auto', 'manual')),
    status TEXT NOT NULL,
    points REAL,                                 -- None: a written answer awaiting a person
    max_points REAL NOT NULL,
    diagnoses TEXT NOT NULL DEFAULT '[]',
    detail TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (assignment_id, learner_id, exercise)
);

CREATE TABLE hand_grades (
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    exercise TEXT NOT NULL,
    points REAL NOT NULL,
    rubric TEXT NOT NULL DEFAULT '',
    comment TEXT NOT NULL DEFAULT '',
    answer_sha256 TEXT NOT NULL DEFAULT '',      -- the written answer graded: a resubmission shows as stale
    graded_at TEXT NOT NULL,
    command TEXT NOT NULL,
    PRIMARY KEY (assignment_id, learner_id, exercise)
);
CREATE TABLE overrides (
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    exercise TEXT NOT NULL,
    points REAL NOT NULL,
    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    at TEXT NOT NULL,
    command TEXT NOT NULL,
    answer_sha256 TEXT NOT NULL DEFAULT '',      -- the answer it was given for ('' : not known)
    suspended TEXT NOT NULL DEFAULT '',          -- why it no longer counts ('' : it counts)
    PRIMARY KEY (assignment_id, learner_id, exercise)
);
CREATE TABLE extensions (
    assignment_id INTEGER NOT NULL REFERENCES assignments(id),
    learner_id INTEGER NOT NULL REFERENCES learners(id),
    due_at TEXT NOT NULL,
    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    at TEXT NOT NULL,
    command TEXT NOT NULL,
    submitted_at TEXT,                           -- the submission time when it was given
    review TEXT NOT NULL DEFAULT '',             -- why it needs a look ('' : it does not)
    PRIMARY KEY (assignment_id, learner_id)
);

CREATE TABLE history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,        -- never reused: exports remember the last one they saw
    at TEXT NOT NULL,
    command TEXT NOT NULL,
    what TEXT NOT NULL,                          -- learner, assignment, submission, result, hand_grade, ...
    assignment_id INTEGER REFERENCES assignments(id),
    learner_id INTEGER REFERENCES learners(id),
    exercise TEXT,
    old TEXT,                                    -- JSON, None for a new row
    new TEXT,                                    -- JSON, None for a removed row
    reason TEXT NOT NULL DEFAULT '',
    hash TEXT NOT NULL DEFAULT ''                -- the chain: sha256 of the previous hash and this row
);
CREATE INDEX history_by_learner ON history (learner_id, id);
CREATE INDEX history_by_assignment ON history (assignment_id, id);
CREATE TRIGGER history_no_update BEFORE UPDATE ON history
BEGIN SELECT RAISE(ABORT, 'the history is append-only: its rows are never changed'); END;
CREATE TRIGGER history_no_delete BEFORE DELETE ON history
BEGIN SELECT RAISE(ABORT, 'the history is append-only: its rows are never deleted'); END;

CREATE TABLE exports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    assignment_id INTEGER REFERENCES assignments(id),
    kind TEXT NOT NULL,                          -- grades.csv, lms-import.csv, feedback, ...
    at TEXT NOT NULL,
    command TEXT NOT NULL,
    history_id INTEGER NOT NULL                  -- the newest history row the export reflects
);
""" + ENROLMENTS_DDL + ";\n"


class StoreFormatError(GradebookError, RuntimeError):
    """The file is not a gradebook this version of lessonlib can read (the message says what to do)."""


# Where a submission's time can come from, as ``submissions.submitted_from`` records it (empty: unknown),
# the most trusted first: a time the instructor set with a reason, then the LMS's own, then the files'.
SUBMISSION_TIME_SOURCES = ("instructor", "moodle_worksheet", "zip_entry", "file_mtime")
LOCAL_TIME_SOURCES = ("moodle_worksheet", "zip_entry")  # local times, read in the course's time zone

# The triggers that keep the rules above; a gradebook without one of them is refused.
GUARDS = ("learner_identity_fixed", "learner_kept", "assignment_seed_fixed", "history_no_update",
          "history_no_delete")


def _add_submitted_from(conn: sqlite3.Connection) -> None:
    """Format 1 to 2: where each submission's time came from (existing rows: unknown)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(submissions)")}
    if "submitted_from" not in columns:
        conn.execute("ALTER TABLE submissions ADD COLUMN submitted_from TEXT NOT NULL DEFAULT ''")


def _add_enrolments(conn: sqlite3.Connection) -> None:
    """Format 2 to 3: which learners each assignment expects (existing assignments: none recorded,
    so every learner stays expected at them until they are graded again with a roster)."""
    conn.execute(ENROLMENTS_DDL)


def _add_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for name, definition in columns.items():
        if name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")


def _add_chain_and_bases(conn: sqlite3.Connection) -> None:
    """Format 3 to 4: the history's hash chain (computed for the rows there are, oldest first), what
    each override and extension was given against, where a local time was read, the last run's
    settings. Existing overrides have no known answer ('': flagged at the learner's next regrade)."""
    _add_columns(conn, "history", {"hash": "TEXT NOT NULL DEFAULT ''"})
    _add_columns(conn, "overrides", {"answer_sha256": "TEXT NOT NULL DEFAULT ''",
                                     "suspended": "TEXT NOT NULL DEFAULT ''"})
    _add_columns(conn, "extensions", {"submitted_at": "TEXT", "review": "TEXT NOT NULL DEFAULT ''"})
    _add_columns(conn, "submissions", {"read_in": "TEXT NOT NULL DEFAULT ''"})
    _add_columns(conn, "assignments", {"last_run": "TEXT NOT NULL DEFAULT '{}'"})
    from lessonlib.grading.store import chain  # beside this module; it needs the columns above

    conn.execute("DROP TRIGGER IF EXISTS history_no_update")  # the rows get their hashes, once
    chain.seal_existing(conn)
    conn.execute("CREATE TRIGGER history_no_update BEFORE UPDATE ON history "
                 "BEGIN SELECT RAISE(ABORT, 'the history is append-only: its rows are never changed'); END")


# MIGRATIONS[n] upgrades a gradebook of format n to format n + 1, inside one transaction.
Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: dict[int, Migration] = {1: _add_submitted_from, 2: _add_enrolments, 3: _add_chain_and_bases}


def create(conn: sqlite3.Connection, now: str) -> None:
    """Lay out an empty gradebook of the current format (the caller holds a transaction)."""
    for statement in _statements(DDL):
        conn.execute(statement)
    conn.execute("INSERT INTO meta (name, value) VALUES ('format', ?), ('created_at', ?)", (str(FORMAT), now))


def _statements(script: str) -> list[str]:
    """The DDL split into statements (``executescript`` would commit the caller's transaction)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s]


def stored_format(conn: sqlite3.Connection) -> int | None:
    """The format a gradebook says it has; None for an empty file."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    if "meta" not in tables:
        raise StoreFormatError("this SQLite file is not a lessonlib gradebook (it has no meta table); "
                               "give the path of the course's gradebook.db, or a new path to start one")
    row = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise StoreFormatError(f"the gradebook's meta table holds no readable format ({row!r}); "
                               "restore it from a backup") from None


def check_format(found: int, path: Path) -> list[int]:
    """The migration steps from ``found`` to FORMAT, or a StoreFormatError saying why there are none."""
    if found > FORMAT:
        raise StoreFormatError(f"{path} has gradebook format {found}, newer than this lessonlib's {FORMAT}: "
                               "it was written by a later version; upgrade lessonlib (pip install -U lessonlib)")
    missing = [n for n in range(found, FORMAT) if n not in MIGRATIONS]
    if missing:
        raise StoreFormatError(f"{path} has gradebook format {found} and this lessonlib reads format {FORMAT}, "
                               f"but knows no upgrade from format {missing[0]}; open it with the lessonlib "
                               "version that wrote it and export the grades")
    return list(range(found, FORMAT))


def backup_before_upgrade(path: Path, found: int) -> Path:
    """Copy the gradebook aside (``gradebook.db.format1.bak``) before an upgrade changes it."""
    target = path.with_name(f"{path.name}.format{found}.bak")
    shutil.copy2(path, target)
    return target


def upgrade(conn: sqlite3.Connection, steps: list[int]) -> None:
    """Run the migration steps in order (the caller holds a transaction) and record the new format."""
    for n in steps:
        MIGRATIONS[n](conn)
        conn.execute("UPDATE meta SET value = ? WHERE name = 'format'", (str(n + 1),))
