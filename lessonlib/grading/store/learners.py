"""Learners' stable identities and keys: given once, never moved by a later arrival.

A learner's IDENTITY is what the submission says about who it is: ``lms:<id>`` when the download
carries an LMS id (Canvas user id, Moodle participant id), else ``name:<the submitted folder or
file name, verbatim>``; when two SUBMISSION folders hold same-named learners who are different
people, an ``origin`` (say the section's folder name) keeps them apart: ``name:<origin>/<name>``.

A learner's KEY (feedback/KEY.md, the learner column of every CSV) is derived from the name as
``submissions.safe_key`` makes it. When that key is taken (ignoring case) by another identity,
the newcomer gets the first free ``-2``, ``-3``, ... and the reason is stored beside it. Keys are
stored, never recomputed: a folder ``Bob`` arriving after ``bob`` and ``bob-2`` gets ``Bob-3``,
and whatever was given to ``bob-2`` stays with the folder ``bob-2``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from lessonlib.grading.learners import Learner, safe_key
from lessonlib.grading.store.database import Gradebook, StoreError, now


@dataclass(frozen=True)
class StoredLearner:
    """One row of the learners table."""

    id: int
    identity: str
    key: str
    name: str
    lms_id: str
    disambiguation: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredLearner:
        return cls(row["id"], row["identity"], row["key"], row["name"], row["lms_id"], row["disambiguation"])


def identity_for(name: str, *, lms_id: str = "", origin: str = "") -> str:
    """The stable identity of a submission's learner (see the module docstring)."""
    if lms_id:
        return f"lms:{lms_id}"
    if not name:
        raise StoreError("a learner without an LMS id needs the submitted folder or file name as its identity")
    return f"name:{origin}/{name}" if origin else f"name:{name}"


def base_key(name: str, lms_id: str = "") -> str:
    """The key a learner asks for before any disambiguation (as ``submissions.assign_keys`` derives it)."""
    return safe_key(f"{name}_{lms_id}" if lms_id else name)


def find(gradebook: Gradebook, identity: str) -> StoredLearner | None:
    row = gradebook.conn.execute("SELECT * FROM learners WHERE identity = ?", (identity,)).fetchone()
    return None if row is None else StoredLearner.from_row(row)


def by_key(gradebook: Gradebook, key: str) -> StoredLearner:
    row = gradebook.conn.execute("SELECT * FROM learners WHERE key = ?", (key,)).fetchone()
    if row is None:
        gradebook.learner_id(key)  # raises the error that teaches
    return StoredLearner.from_row(row)


def _free_key(gradebook: Gradebook, base: str) -> str:
    key, n = base, 2
    while gradebook.conn.execute("SELECT 1 FROM learners WHERE key = ?", (key,)).fetchone():  # NOCASE column
        key, n = f"{base}-{n}", n + 1
    return key


def register(gradebook: Gradebook, name: str, *, lms_id: str = "", origin: str = "",
             key: str | None = None) -> StoredLearner:
    """The learner of this submission: the stored one when its identity is known, else a new one.

    A new learner's key is ``key`` when given and free (an imported folder keeps its keys), else the
    base key from the name, else the first free ``-N`` after it. The display name is updated when it
    changed (with a history row); the key never is.
    """
    identity = identity_for(name, lms_id=lms_id, origin=origin)
    with gradebook.transaction() as conn:
        known = find(gradebook, identity)
        if known is not None:
            if name and name != known.name:
                conn.execute("UPDATE learners SET name = ? WHERE id = ?", (name, known.id))
                gradebook.record("learner_name", learner_id=known.id, old=known.name, new=name)
                known = find(gradebook, identity)
            assert known is not None
            return known
        base = safe_key(key) if key else base_key(name, lms_id)
        given = _free_key(gradebook, base)
        why = ""
        if given != base:
            holder = conn.execute("SELECT identity FROM learners WHERE key = ?", (base,)).fetchone()
            why = (f"{base!r} was already the key of {holder['identity']!r} when {identity!r} arrived; "
                   f"{given!r} is this learner's for good")
        cursor = conn.execute(
            "INSERT INTO learners (identity, key, base_key, disambiguation, name, lms_id, created_at, created_by) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (identity, given, base, why, name, lms_id, now(), gradebook.command))
        learner_id = int(cursor.lastrowid or 0)
        gradebook.record("learner", learner_id=learner_id, new={"identity": identity, "key": given, "name": name},
                         reason=why)
        return StoredLearner(learner_id, identity, given, name, lms_id, why)


def all_learners(gradebook: Gradebook) -> list[StoredLearner]:
    """Every learner of the course, by key."""
    rows = gradebook.conn.execute("SELECT * FROM learners ORDER BY key COLLATE NOCASE")
    return [StoredLearner.from_row(row) for row in rows]


def assign_stored_keys(gradebook: Gradebook, found: Sequence[Learner], *,
                       origins: dict[int, str] | None = None) -> list[Learner]:
    """Give each found learner its stored key (``submissions.assign_keys`` for a course with a gradebook).

    Known identities get the key they always had. Newcomers whose key collides with no one's get it
    as it is; the others follow in the order of their identities (case-folded, lower case first),
    so one run's newcomers get the same keys whatever order the files were listed in. All in one
    transaction. ``origins`` maps ``id(learner)`` to its origin where same-named folders of
    different people must stay apart. Returns the learners sorted by key, like ``assign_keys``.
    """
    origins = origins or {}

    def identity(learner: Learner) -> str:
        return identity_for(learner.name, lms_id=learner.lms_id, origin=origins.get(id(learner), ""))

    with gradebook.transaction():
        known = {id(lr) for lr in found if find(gradebook, identity(lr)) is not None}
        wanted: dict[str, int] = {}
        for learner in found:
            if id(learner) not in known:
                base = base_key(learner.name, learner.lms_id).lower()
                wanted[base] = wanted.get(base, 0) + 1

        def clear(learner: Learner) -> bool:
            return id(learner) in known or wanted[base_key(learner.name, learner.lms_id).lower()] == 1

        order = sorted(found, key=lambda lr: (not clear(lr), identity(lr).casefold(), identity(lr).swapcase()))
        for learner in order:
            learner.key = register(gradebook, learner.name, lms_id=learner.lms_id,
                                   origin=origins.get(id(learner), "")).key
    return sorted(found, key=lambda lr: lr.key.lower())
