"""What a person decides: hand grades of written answers and overrides of any exercise's score.

The effective score of an exercise is, in this order:

1. its override, when there is one (any exercise, auto-graded or written; a reason is required);
2. else, for a written question (kind ``manual``), its hand grade, when given;
3. else the graded result (None, counted as 0 in totals, for a written answer awaiting a person).

The late policy applies afterwards, to the total of the effective scores (see ``late.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from lessonlib.grading.store.database import Gradebook, StoreError, now


@dataclass(frozen=True)
class Effective:
    """An exercise's effective score and where it came from: override, hand or graded."""

    points: float | None
    source: str
    note: str = ""  # the override's reason, or the hand grade's rubric line


def effective(graded: float | None, kind: str, *, hand: float | None = None, override: float | None = None,
              reason: str = "", rubric: str = "") -> Effective:
    """Pick the effective score (the order is in the module docstring)."""
    if override is not None:
        return Effective(override, "override", reason)
    if kind == "manual" and hand is not None:
        return Effective(hand, "hand", rubric)
    return Effective(graded, "graded")


def answer_digest(detail: str) -> str:
    """The sha256 of the written answer in a result's detail JSON (of "" when there is none)."""
    text = json.loads(detail).get("answer_text") or ""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
        conn.execute("INSERT OR REPLACE INTO overrides VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (a, lid, exercise, float(points), reason.strip(), now(), gradebook.command))
        gradebook.record("override", assignment_id=a, learner_id=lid, exercise=exercise,
                         old=dict(old) if old else None, new={"points": float(points)}, reason=reason.strip())


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
