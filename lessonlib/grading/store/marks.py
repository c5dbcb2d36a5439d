"""What a person decides: hand grades of written answers and overrides of any exercise's score.

The effective score of an exercise is, in this order:

1. its override, when there is one (any exercise, auto-graded or written; a reason is required);
2. else, for a written question (kind ``manual``), its hand grade, when given;
3. else the graded result (None, counted as 0 in totals, for a written answer awaiting a person).

The late policy applies afterwards, to the total of the effective scores (see ``late.py``).

A decision is tied to the answer it was about (``records.answer_digest``). When a regrade brings a
different answer (``review_decisions``, called as the new result is stored): a hand grade is
withdrawn, so the written answer waits for a person again (the grade stays in the history, and the
result says why for the instructor); an override is suspended: it stays stored but no longer
counts, and the learner's grade waits (the LMS import leaves it out) until the instructor keeps it
for the new answer (``keep_override``) or clears it (``clear_override``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from lessonlib.grading import records as r
from lessonlib.grading.store.database import Gradebook, StoreError, now


@dataclass(frozen=True)
class Effective:
    """An exercise's effective score and where it came from: override, hand or graded."""

    points: float | None
    source: str
    note: str = ""  # the override's reason, or the hand grade's rubric line


def effective(graded: float | None, kind: str, *, hand: float | None = None, override: float | None = None,
              reason: str = "", rubric: str = "", suspended: str = "") -> Effective:
    """Pick the effective score (the order is in the module docstring; a suspended override does not count)."""
    if override is not None and not suspended:
        return Effective(override, "override", reason)
    if kind == "manual" and hand is not None:
        return Effective(hand, "hand", rubric)
    return Effective(graded, "graded")


def answer_digest(detail: str) -> str:
    """The digest of the answer a result's detail JSON was graded from: its ``answer_sha256``, else (a
    result stored before it was recorded) the digest of its written answer."""
    data = json.loads(detail)
    return str(data.get("answer_sha256") or r.answer_digest(data.get("answer_text")))


def _result(gradebook: Gradebook, assignment: str, learner_key: str, exercise: str) -> tuple[int, int, dict]:
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    row = gradebook.conn.execute("SELECT kind, max_points, detail FROM results WHERE assignment_id = ? "
                                 "AND learner_id = ? AND exercise = ?", (a, lid, exercise)).fetchone()
    if row is None:
        known = [x[0] for x in gradebook.conn.execute(
            "SELECT exercise FROM results WHERE assignment_id = ? AND learner_id = ? ORDER BY position", (a, lid))]
        raise StoreError(f"{learner_key} has no graded exercise {exercise!r} in {assignment}; their exercises are: "
                         f"{', '.join(known) or 'none (grade the submission first)'}")
    return a, lid, dict(row)


def _check_points(points: float, max_points: float, what: str) -> None:
    if not isinstance(points, (int, float)) or not math.isfinite(points) or not 0 <= points <= max_points:
        raise StoreError(f"{what}: {points!r} points is out of range (0 to {max_points:g})")


def set_hand_grade(gradebook: Gradebook, assignment: str, learner_key: str, exercise: str, points: float | None,
                   *, rubric: str = "", comment: str = "") -> None:
    """Give (or, with points=None, withdraw) the hand grade of a written answer, with history.

    The answer's digest is kept with it: when a resubmission changes the answer, the hand grade
    still counts but the sheet marks it ``stale`` for the instructor to look at again.
    """
    a, lid, row = _result(gradebook, assignment, learner_key, exercise)
    what = f"{learner_key} / {exercise}"
    if row["kind"] != "manual":
        raise StoreError(f"{what} is auto-graded; a hand grade is for written questions. To change its points, "
                         "override it with a reason")
    if points is not None:
        _check_points(points, row["max_points"], what)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT points, rubric, comment FROM hand_grades WHERE assignment_id = ? AND learner_id = ? "
                           "AND exercise = ?", (a, lid, exercise)).fetchone()
        old_value = dict(old) if old else None
        new_value = None if points is None else {"points": float(points), "rubric": rubric, "comment": comment}
        if old_value == new_value:
            return
        if points is None:
            conn.execute("DELETE FROM hand_grades WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                         (a, lid, exercise))
        else:
            conn.execute("INSERT OR REPLACE INTO hand_grades VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (a, lid, exercise, float(points), rubric, comment, answer_digest(row["detail"]), now(),
                          gradebook.command))
        gradebook.record("hand_grade", assignment_id=a, learner_id=lid, exercise=exercise, old=old_value,
                         new=new_value)


def set_override(gradebook: Gradebook, assignment: str, learner_key: str, exercise: str, points: float,
                 reason: str) -> None:
    """Replace any exercise's score by ``points``; the ``reason`` is required and kept in the history."""
    what = f"{learner_key} / {exercise}"
    if not isinstance(reason, str) or not reason.strip():
        raise StoreError(f"an override of {what} needs a reason (say why the score is replaced: it is kept "
                         "in the history and shown to whoever reads it)")
    a, lid, row = _result(gradebook, assignment, learner_key, exercise)
    _check_points(points, row["max_points"], what)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT points, reason FROM overrides WHERE assignment_id = ? AND learner_id = ? "
                           "AND exercise = ?", (a, lid, exercise)).fetchone()
        conn.execute("INSERT OR REPLACE INTO overrides (assignment_id, learner_id, exercise, points, reason, at, "
                     "command, answer_sha256, suspended) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '')",
                     (a, lid, exercise, float(points), reason.strip(), now(), gradebook.command,
                      answer_digest(row["detail"])))
        gradebook.record("override", assignment_id=a, learner_id=lid, exercise=exercise,
                         old=dict(old) if old else None, new={"points": float(points)}, reason=reason.strip())


def keep_override(gradebook: Gradebook, assignment: str, learner_key: str, exercise: str, reason: str) -> float:
    """Keep a suspended override for the answer graded now (it counts again); a reason is required.
    Returns its points."""
    what = f"{learner_key} / {exercise}"
    if not isinstance(reason, str) or not reason.strip():
        raise StoreError(f"keeping the override of {what} for the new answer needs a reason (it is kept in the "
                         "history)")
    a, lid, row = _result(gradebook, assignment, learner_key, exercise)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT points, suspended FROM overrides WHERE assignment_id = ? AND learner_id = ? "
                           "AND exercise = ?", (a, lid, exercise)).fetchone()
        if old is None:
            raise StoreError(f"{what} has no override to keep")
        conn.execute("UPDATE overrides SET answer_sha256 = ?, suspended = '', at = ?, command = ? "
                     "WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                     (answer_digest(row["detail"]), now(), gradebook.command, a, lid, exercise))
        gradebook.record("override", assignment_id=a, learner_id=lid, exercise=exercise,
                         old={"points": old["points"], "suspended": old["suspended"]},
                         new={"points": old["points"], "kept_for_new_answer": True}, reason=reason.strip())
        return float(old["points"])


def clear_override(gradebook: Gradebook, assignment: str, learner_key: str, exercise: str, reason: str) -> None:
    """Remove an override (the graded or hand-given score counts again); a reason is required."""
    what = f"{learner_key} / {exercise}"
    if not reason.strip():
        raise StoreError(f"removing the override of {what} needs a reason (it is kept in the history)")
    a, lid, _ = _result(gradebook, assignment, learner_key, exercise)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT points, reason FROM overrides WHERE assignment_id = ? AND learner_id = ? "
                           "AND exercise = ?", (a, lid, exercise)).fetchone()
        if old is None:
            raise StoreError(f"{what} has no override to remove")
        conn.execute("DELETE FROM overrides WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                     (a, lid, exercise))
        gradebook.record("override", assignment_id=a, learner_id=lid, exercise=exercise, old=dict(old), new=None,
                         reason=reason.strip())


def review_decisions(gradebook: Gradebook, a: int, lid: int, grades: list[r.ExerciseGrade]) -> list[str]:
    """Withdraw the hand grades and suspend the overrides given for another answer than the one in
    ``grades`` (a regrade of learner ``lid``; the caller holds the transaction), each with a history
    row, and set each grade's ``review``. Returns a line per decision, for the instructor."""
    by_exercise = {g.exercise: g for g in grades}
    said: list[str] = []
    hands = gradebook.conn.execute("SELECT exercise, points, rubric, comment, answer_sha256 FROM hand_grades "
                                   "WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchall()
    for hand in hands:
        grade = by_exercise.get(hand["exercise"])
        if grade is None or grade.answer_sha256 == r.NOT_READ or hand["answer_sha256"] == _digest_of(grade):
            continue
        gradebook.conn.execute("DELETE FROM hand_grades WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                               (a, lid, hand["exercise"]))
        old: dict[str, Any] = {k: hand[k] for k in ("points", "rubric", "comment")}
        grade.review = (f"the written answer changed after it was graded by hand ({hand['points']:g} of "
                        f"{grade.max_points:g} withdrawn): grade it again")
        gradebook.record("hand_grade", assignment_id=a, learner_id=lid, exercise=hand["exercise"], old=old, new=None,
                         reason="the written answer changed (a resubmission): it waits for a person again")
        said.append(f"{hand['exercise']}: {grade.review}")
    overrides = gradebook.conn.execute("SELECT exercise, points, reason, answer_sha256, suspended FROM overrides "
                                       "WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchall()
    for override in overrides:
        grade = by_exercise.get(override["exercise"])
        if grade is None or grade.answer_sha256 == r.NOT_READ:
            continue
        same = override["answer_sha256"] == _digest_of(grade)
        why = "" if same else (f"the answer changed after the override to {override['points']:g} "
                               f"({override['reason']}); the graded {grade.points or 0:g} counts, and the grade "
                               "waits, until you keep the override or clear it")
        if override["suspended"] != why:
            gradebook.conn.execute("UPDATE overrides SET suspended = ? WHERE assignment_id = ? AND learner_id = ? "
                                   "AND exercise = ?", (why, a, lid, override["exercise"]))
            gradebook.record("override", assignment_id=a, learner_id=lid, exercise=override["exercise"],
                             old={"points": override["points"], "suspended": bool(override["suspended"])},
                             new={"points": override["points"], "suspended": not same},
                             reason="the answer changed (a resubmission)" if why else
                                    "the answer is again the one the override was given for")
        if why:  # (the sheet reads it from the override itself, so keeping or clearing it ends it)
            said.append(f"{override['exercise']}: {why}")
    return said


def _digest_of(grade: r.ExerciseGrade) -> str:
    return grade.answer_sha256 or r.answer_digest(grade.answer_text)
