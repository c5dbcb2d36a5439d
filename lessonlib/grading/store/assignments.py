"""Assignments, learners' submissions and their graded results: what ``lessonlib grade`` writes.

Each function is one transaction (or joins the caller's ``with gradebook.transaction():``) and
appends a history row for every value it changes; a value written again unchanged writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lessonlib.grading import records as r
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.store.database import Gradebook, StoreError, now
from lessonlib.grading.store.late import LatePolicy
from lessonlib.grading.store.schema import SUBMISSION_TIME_SOURCES


@dataclass(frozen=True)
class Assignment:
    """One row of the assignments table."""

    id: int
    name: str
    notebooks: tuple[str, ...]
    seed: int
    due_at: datetime | None
    policy: LatePolicy
    lms_points: float | None


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    if when.tzinfo is None:
        raise StoreError(f"the time {when.isoformat()} has no time zone; give it in UTC or with its offset "
                         "(2026-03-01T17:00:00+00:00), so that lateness does not depend on the machine's zone")
    return when.isoformat(timespec="seconds")


def get_assignment(gradebook: Gradebook, name: str) -> Assignment:
    row = gradebook.conn.execute("SELECT * FROM assignments WHERE id = ?", (gradebook.assignment_id(name),)).fetchone()
    return Assignment(row["id"], row["name"], tuple(json.loads(row["notebooks"])), int(row["seed"]),
                      _time(row["due_at"]), LatePolicy(row["late_policy"], row["penalty_per_day"], row["late_floor"]),
                      row["lms_points"])


def new_seed() -> int:
    """A fresh secret seed: 63 bits from the operating system's random source (as ``resume.new_seed``)."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def ensure_assignment(gradebook: Gradebook, name: str, notebooks: Sequence[str], seed: int | None = None
                      ) -> Assignment:
    """The assignment ``name``; when new, created with ``notebooks`` and ``seed`` (None: a new secret one).

    An existing one must have the same notebooks: grading other notebooks under its name is refused.
    Its seed is its own: a ``seed`` that differs from it is refused, None takes it.
    """
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT notebooks, seed FROM assignments WHERE name = ?", (name,)).fetchone()
        if row is None:
            cursor = conn.execute("INSERT INTO assignments (name, notebooks, seed, created_at) VALUES (?, ?, ?, ?)",
                                  (name, json.dumps(list(notebooks)), new_seed() if seed is None else int(seed),
                                   now()))
            gradebook.record("assignment", assignment_id=int(cursor.lastrowid or 0),
                             new={"name": name, "notebooks": list(notebooks)})  # never the seed
        else:
            if json.loads(row["notebooks"]) != list(notebooks):
                raise StoreError(f"the assignment {name!r} grades {', '.join(json.loads(row['notebooks']))}, not "
                                 f"{', '.join(notebooks)}; give the other notebooks another assignment (with "
                                 "`lessonlib grade`, a new --out folder: its name names the assignment)")
            if seed is not None and int(row["seed"]) != int(seed):
                raise StoreError(f"the assignment {name!r} keeps the seed it was first graded with; leave the seed "
                                 "out to use it, or grade under another assignment name")
        return get_assignment(gradebook, name)


def set_late_policy(gradebook: Gradebook, name: str, *, due_at: datetime | None, policy: LatePolicy,
                    lms_points: float | None = None) -> Assignment:
    """Set the due date, late policy and LMS points possible of an assignment (recorded in history)."""
    before = get_assignment(gradebook, name)
    with gradebook.transaction() as conn:
        conn.execute("UPDATE assignments SET due_at = ?, late_policy = ?, penalty_per_day = ?, late_floor = ?, "
                     "lms_points = ? WHERE id = ?", (_iso(due_at), policy.kind, policy.penalty_per_day, policy.floor,
                                                     lms_points, before.id))
        old = {"due_at": _iso(before.due_at), "policy": before.policy.__dict__, "lms_points": before.lms_points}
        new = {"due_at": _iso(due_at), "policy": policy.__dict__, "lms_points": lms_points}
        if old != new:
            gradebook.record("late_policy", assignment_id=before.id, old=old, new=new)
    return get_assignment(gradebook, name)


def grant_extension(gradebook: Gradebook, assignment: str, learner_key: str, due_at: datetime, reason: str) -> None:
    """Give one learner a new due date for one assignment; ``reason`` is required and kept."""
    if not reason.strip():
        raise StoreError(f"an extension for {learner_key} needs a reason (it is kept in the history)")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT due_at, reason FROM extensions WHERE assignment_id = ? AND learner_id = ?",
                           (a, lid)).fetchone()
        conn.execute("INSERT OR REPLACE INTO extensions VALUES (?, ?, ?, ?, ?, ?)",
                     (a, lid, _iso(due_at), reason.strip(), now(), gradebook.command))
        gradebook.record("extension", assignment_id=a, learner_id=lid, old=dict(old) if old else None,
                         new={"due_at": _iso(due_at)}, reason=reason.strip())


# --- submissions and results --------------------------------------------------------------------


@dataclass(frozen=True)
class SubmittedFile:
    notebook: str
    file_name: str
    sha256: str
    size: int

    @classmethod
    def of(cls, notebook: str, path: Path) -> SubmittedFile:
        """Hash ``path`` in chunks (a file of any size in little memory)."""
        h, size = hashlib.sha256(), 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        return cls(notebook, Path(path).name, h.hexdigest(), size)


def record_submission(gradebook: Gradebook, assignment: str, learner_key: str, files: Sequence[SubmittedFile], *,
                      submitted_at: datetime | None = None, submitted_from: str = "", lms_late: bool = False,
                      attempt: int = 0, chosen_because: str = "", notes: Sequence[str] = ()) -> int:
    """Record (or replace) the learner's submission to the assignment: its files, its time and where
    that time comes from (``schema.SUBMISSION_TIME_SOURCES``; "" when unknown), and the late flag."""
    if submitted_from not in ("", *SUBMISSION_TIME_SOURCES):
        raise StoreError(f"a submission time's source is one of {', '.join(SUBMISSION_TIME_SOURCES)}, "
                         f"not {submitted_from!r}")
    if submitted_from and submitted_at is None:
        raise StoreError(f"a submission time from {submitted_from} needs the time itself")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    new = {"submitted_at": _iso(submitted_at), "submitted_from": submitted_from if submitted_at else "",
           "lms_late": bool(lms_late), "attempt": attempt,
           "chosen_because": chosen_because, "notes": list(notes),
           "files": {f.notebook: {"file": f.file_name, "sha256": f.sha256, "size": f.size} for f in files}}
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT * FROM submissions WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchone()
        old = _submission(gradebook, row["id"]) if row else None
        if row is None:
            sid = int(conn.execute("INSERT INTO submissions (assignment_id, learner_id) VALUES (?, ?)",
                                   (a, lid)).lastrowid or 0)
        else:
            sid = int(row["id"])
        conn.execute("UPDATE submissions SET submitted_at = ?, submitted_from = ?, lms_late = ?, attempt = ?, "
                     "chosen_because = ?, notes = ? WHERE id = ?",
                     (new["submitted_at"], new["submitted_from"], int(lms_late), attempt, chosen_because,
                      json.dumps(list(notes)), sid))
        conn.execute("DELETE FROM submission_files WHERE submission_id = ?", (sid,))
        conn.executemany("INSERT INTO submission_files VALUES (?, ?, ?, ?, ?)",
                         [(sid, f.notebook, f.file_name, f.sha256, f.size) for f in files])
        if old != new:
            gradebook.record("submission", assignment_id=a, learner_id=lid, old=old, new=new)
        return sid


def update_submission_time(gradebook: Gradebook, assignment: str, learner_key: str, submitted_at: datetime,
                           submitted_from: str) -> bool:
    """Set a stored submission's time from a better source than the stored one's (a history row says
    so), as when a later run brings Moodle's worksheet for files already graded; a time from an equal
    or weaker source changes nothing. Returns whether anything changed."""
    if submitted_from not in SUBMISSION_TIME_SOURCES:
        raise StoreError(f"a submission time's source is one of {', '.join(SUBMISSION_TIME_SOURCES)}, "
                         f"not {submitted_from!r}")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    new = {"submitted_at": _iso(submitted_at), "submitted_from": submitted_from}
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT id, submitted_at, submitted_from FROM submissions WHERE assignment_id = ? "
                           "AND learner_id = ?", (a, lid)).fetchone()
        if row is None:
            raise StoreError(f"{learner_key!r} has no submission to {assignment!r} whose time could be set")
        old = {"submitted_at": row["submitted_at"], "submitted_from": row["submitted_from"]}
        rank = {source: n for n, source in enumerate((*SUBMISSION_TIME_SOURCES, ""))}  # 0 is the best
        if rank[submitted_from] >= rank.get(row["submitted_from"], len(rank)):
            return False
        conn.execute("UPDATE submissions SET submitted_at = ?, submitted_from = ? WHERE id = ?",
                     (new["submitted_at"], submitted_from, row["id"]))
        gradebook.record("submission_time", assignment_id=a, learner_id=lid, old=old, new=new)
        return True


def _submission(gradebook: Gradebook, sid: int) -> dict[str, Any]:
    row = gradebook.conn.execute("SELECT * FROM submissions WHERE id = ?", (sid,)).fetchone()
    files = gradebook.conn.execute("SELECT * FROM submission_files WHERE submission_id = ?", (sid,))
    return {"submitted_at": row["submitted_at"], "submitted_from": row["submitted_from"],
            "lms_late": bool(row["lms_late"]), "attempt": row["attempt"],
            "chosen_because": row["chosen_because"], "notes": json.loads(row["notes"]),
            "files": {f["notebook"]: {"file": f["file_name"], "sha256": f["sha256"], "size": f["size"]}
                      for f in files}}


def _diagnosis_names(grade: r.ExerciseGrade) -> list[str]:
    return [str(d.get("name", d.get("misconception", ""))) for d in grade.diagnoses if isinstance(d, dict)]


def record_result(gradebook: Gradebook, assignment: str, result: r.LearnerResult) -> None:
    """Store one learner's graded result (its key must be registered): every exercise, the run's facts.

    A result row whose status or points change gets a history row; the submission row is created
    when ``record_submission`` was not called first (files unknown).
    """
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(result.key)
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT id FROM submissions WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchone()
        if row is None:
            conn.execute("INSERT INTO submissions (assignment_id, learner_id, lms_late) VALUES (?, ?, ?)",
                         (a, lid, int(result.late)))
        conn.execute("UPDATE submissions SET fingerprint = ?, isolation = ?, graded_at = ?, seconds = ?, notes = ? "
                     "WHERE assignment_id = ? AND learner_id = ?",
                     (result.fingerprint, result.isolation, result.graded_at, result.seconds,
                      json.dumps(result.notes), a, lid))
        before = {row["exercise"]: row for row in conn.execute(
            "SELECT exercise, status, points FROM results WHERE assignment_id = ? AND learner_id = ?", (a, lid))}
        for position, grade in enumerate(result.exercises):
            old = before.pop(grade.exercise, None)
            conn.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (a, lid, grade.exercise, grade.notebook, position, grade.kind, str(grade.status), grade.points,
                          grade.max_points, json.dumps(_diagnosis_names(grade)),
                          json.dumps(grade.to_dict(), allow_nan=False)))
            new_value = {"status": str(grade.status), "points": grade.points}
            old_value = None if old is None else {"status": old["status"], "points": old["points"]}
            if old_value != new_value:
                gradebook.record("result", assignment_id=a, learner_id=lid, exercise=grade.exercise,
                                 old=old_value, new=new_value)
        for exercise, old in before.items():  # no longer graded (the assignment's exercises changed)
            conn.execute("DELETE FROM results WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                         (a, lid, exercise))
            gradebook.record("result", assignment_id=a, learner_id=lid, exercise=exercise,
                             old={"status": old["status"], "points": old["points"]}, new=None)


def saved_fingerprint(gradebook: Gradebook, assignment: str, learner_key: str) -> str:
    """The fingerprint the learner's stored result was graded from ("" when none): for resuming."""
    row = gradebook.conn.execute(
        "SELECT s.fingerprint FROM submissions s JOIN assignments a ON a.id = s.assignment_id "
        "JOIN learners l ON l.id = s.learner_id WHERE a.name = ? AND l.key = ?", (assignment, learner_key)).fetchone()
    return row["fingerprint"] if row else ""


def stored_files(files: Mapping[str, Path]) -> list[SubmittedFile]:
    """The SubmittedFile of each notebook path (a ``Learner.files`` mapping)."""
    return [SubmittedFile.of(notebook, path) for notebook, path in sorted(files.items())]


def save_learner_result(gradebook: Gradebook, assignment: str, learner: Learner, result: r.LearnerResult, *,
                        attempt: int = 0, chosen_because: str = "") -> None:
    """One graded learner, all or nothing: the submission (its files hashed) and every result.

    ``learner.key`` must be its stored key (``assign_stored_keys``) and equal ``result.key``; the
    submission's time and its source are the learner's (``submitted_at``, ``submitted_from``).
    """
    if learner.key != result.key:
        raise StoreError(f"the result of {result.key!r} was given for the learner {learner.key!r}; give each "
                         "learner its own result")
    files = stored_files(learner.files)  # hashed before the transaction: no lock held while reading files
    with gradebook.transaction():
        record_submission(gradebook, assignment, learner.key, files, submitted_at=learner.submitted_at,
                          submitted_from=learner.submitted_from, lms_late=learner.late, attempt=attempt,
                          chosen_because=chosen_because, notes=learner.notes)
        record_result(gradebook, assignment, result)
