"""What the exports read: an assignment's every learner with effective scores, a learner's history,
results across assignments, and what changed since an export.

Every export covers every learner the assignment has ever had a submission from, whichever run
graded them; it never starts from one run's results.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lessonlib.grading import records as r
from lessonlib.grading.lms.times import describe_source
from lessonlib.grading.store.assignments import get_assignment
from lessonlib.grading.store.database import Gradebook, StoreError, now
from lessonlib.grading.store.late import LateAdjustment, late_adjusted
from lessonlib.grading.store.marks import effective


@dataclass(frozen=True)
class ExerciseScore:
    """One exercise of one learner: the graded result and the score that counts."""

    notebook: str
    exercise: str
    kind: str  # auto or manual
    status: str  # as graded; graded_by_hand once a hand grade is given
    graded_points: float | None
    points: float | None  # effective: override, else hand grade (written), else graded
    max_points: float
    source: str  # override, hand or graded
    note: str  # the override's reason or the rubric line
    diagnoses: tuple[str, ...]
    comment: str = ""  # the hand grade's comment for the learner
    review: str = ""  # a decision about it that waits for the instructor (see ``marks``), "" when none

    @property
    def pending(self) -> bool:
        """A written answer still waiting for a person."""
        return self.points is None and self.status == r.NEEDS_MANUAL


@dataclass(frozen=True)
class LearnerSheet:
    """One learner of an assignment: scores, totals and lateness."""

    key: str
    name: str
    lms_id: str
    submitted: bool
    lms_late: bool
    submitted_at: datetime | None
    submitted_from: str  # where submitted_at comes from (schema.SUBMISSION_TIME_SOURCES; "" unknown)
    exercises: tuple[ExerciseScore, ...]
    late: LateAdjustment | None  # None without a submission
    review: str = ""  # the learner's extension needs a look (their submission time changed), "" when not

    @property
    def points(self) -> float:
        """The total of the effective scores, before the late policy."""
        return round(sum(e.points or 0.0 for e in self.exercises), 4)

    @property
    def max_points(self) -> float:
        return round(sum(e.max_points for e in self.exercises), 4)

    @property
    def total(self) -> float:
        """The total after the late policy."""
        return self.late.points if self.late else self.points

    @property
    def pending(self) -> float:
        return round(sum(e.max_points for e in self.exercises if e.pending), 4)



def _scores(gradebook: Gradebook, a: int, lid: int) -> tuple[ExerciseScore, ...]:
    rows = gradebook.conn.execute(
        "SELECT r.*, h.points AS hand, h.rubric, h.comment, o.points AS override, o.reason, o.suspended "
        "FROM results r "
        "LEFT JOIN hand_grades h USING (assignment_id, learner_id, exercise) "
        "LEFT JOIN overrides o USING (assignment_id, learner_id, exercise) "
        "WHERE r.assignment_id = ? AND r.learner_id = ? ORDER BY r.position", (a, lid))
    scores = []
    for row in rows:
        chosen = effective(row["points"], row["kind"], hand=row["hand"], override=row["override"],
                           reason=row["reason"] or "", rubric=row["rubric"] or "", suspended=row["suspended"] or "")
        status = r.GRADED_BY_HAND if row["kind"] == "manual" and row["hand"] is not None else row["status"]
        withdrawn = json.loads(row["detail"]).get("review", "") if row["hand"] is None else ""
        scores.append(ExerciseScore(row["notebook"], row["exercise"], row["kind"], str(status), row["points"],
                                    chosen.points, row["max_points"], chosen.source, chosen.note,
                                    tuple(json.loads(row["diagnoses"])), row["comment"] or "",
                                    row["suspended"] or withdrawn))
    return tuple(scores)


def assignment_sheet(gradebook: Gradebook, assignment: str, *, every_learner: bool = False) -> list[LearnerSheet]:
    """Every learner with a submission to ``assignment`` (with every_learner=True, every learner of the
    course, those without a submission having no exercises), by key."""
    info = get_assignment(gradebook, assignment)
    join = "LEFT JOIN" if every_learner else "JOIN"
    rows = gradebook.conn.execute(
        f"SELECT l.id, l.key, l.name, l.lms_id, s.id AS sid, s.submitted_at, s.submitted_from, s.lms_late, "
        f"e.due_at AS extended, e.review "
        f"FROM learners l {join} submissions s ON s.learner_id = l.id AND s.assignment_id = ? "
        f"LEFT JOIN extensions e ON e.learner_id = l.id AND e.assignment_id = ? "
        f"ORDER BY l.key COLLATE NOCASE", (info.id, info.id))
    sheets = []
    for row in rows:
        submitted = row["sid"] is not None
        exercises = _scores(gradebook, info.id, row["id"]) if submitted else ()
        when = datetime.fromisoformat(row["submitted_at"]) if row["submitted_at"] else None
        late = None
        if submitted:
            extension = datetime.fromisoformat(row["extended"]) if row["extended"] else None
            points = round(sum(e.points or 0.0 for e in exercises), 4)
            late = late_adjusted(points, round(sum(e.max_points for e in exercises), 4), info.policy,
                                 due=info.due_at, submitted=when, extension=extension, lms_late=bool(row["lms_late"]),
                                 source=describe_source(row["submitted_from"] or ""))
        sheets.append(LearnerSheet(row["key"], row["name"], row["lms_id"], submitted, bool(row["lms_late"]), when,
                                   row["submitted_from"] or "", exercises, late, row["review"] or ""))
    return sheets


def _late_note(sheet: LearnerSheet) -> str:
    """The late policy's sentence when the work is late, or when the LMS says late but the work is
    not (an extension, a corrected time): the learner sees why; "" for work on time."""
    if sheet.late is None:
        return ""
    return sheet.late.sentence if sheet.late.late or sheet.lms_late else ""


def learner_results(gradebook: Gradebook, assignment: str) -> list[r.LearnerResult]:
    """Every learner's result as the gradebook writers take it, with hand grades and overrides applied
    (a hand grade as ``manual.apply_marks`` applies it; an override as the points, with a note)."""
    info = get_assignment(gradebook, assignment)
    results = []
    for sheet in assignment_sheet(gradebook, assignment):
        lid = gradebook.learner_id(sheet.key)
        sub = gradebook.conn.execute("SELECT * FROM submissions WHERE assignment_id = ? AND learner_id = ?",
                                     (info.id, lid)).fetchone()
        files = {f["notebook"]: f["file_name"] for f in gradebook.conn.execute(
            "SELECT notebook, file_name FROM submission_files WHERE submission_id = ?", (sub["id"],))}
        details = {row["exercise"]: json.loads(row["detail"]) for row in gradebook.conn.execute(
            "SELECT exercise, detail FROM results WHERE assignment_id = ? AND learner_id = ?", (info.id, lid))}
        grades = []
        for score in sheet.exercises:
            grade = r.ExerciseGrade.from_dict(copy.deepcopy(details[score.exercise]))
            if score.source == "hand":
                grade.points, grade.status, grade.diagnosis, grade.reason = (score.points, r.GRADED_BY_HAND,
                                                                             score.note, score.comment)
            elif score.source == "override":
                grade.points = score.points
                grade.override_reason = score.note
                grade.notes = [*grade.notes, f"Score set to {score.points:g} by the instructor: {score.note}"]
            grade.review = score.review
            grades.append(grade)
        results.append(r.LearnerResult(
            learner=sheet.name, key=sheet.key, fingerprint=sub["fingerprint"], isolation=sub["isolation"],
            graded_at=sub["graded_at"] or "", exercises=grades, notes=json.loads(sub["notes"]), files=files,
            seconds=sub["seconds"], lms_id=sheet.lms_id, late=sheet.late.late if sheet.late else sheet.lms_late,
            late_deducted=sheet.late.deducted if sheet.late else 0.0, late_note=_late_note(sheet),
            review=[f"extension: {sheet.review}"] if sheet.review else []))
    return results


# --- history and exports -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One history row, with names instead of ids."""

    id: int
    at: str
    command: str
    what: str
    assignment: str | None
    learner: str | None
    exercise: str | None
    old: Any
    new: Any
    reason: str


_HISTORY = ("SELECT h.*, a.name AS assignment, l.key AS learner FROM history h "
            "LEFT JOIN assignments a ON a.id = h.assignment_id LEFT JOIN learners l ON l.id = h.learner_id ")


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _change(row: Any) -> Change:
    return Change(row["id"], row["at"], row["command"], row["what"], row["assignment"], row["learner"],
                  row["exercise"], _load(row["old"]), _load(row["new"]), row["reason"])


def learner_history(gradebook: Gradebook, learner_key: str) -> list[Change]:
    """Everything recorded about one learner, oldest first."""
    lid = gradebook.learner_id(learner_key)
    return [_change(row) for row in gradebook.conn.execute(_HISTORY + "WHERE h.learner_id = ? ORDER BY h.id", (lid,))]


def assignment_history(gradebook: Gradebook, assignment: str) -> list[Change]:
    """Everything recorded about one assignment (its learners' results, marks and decisions), oldest first."""
    info = get_assignment(gradebook, assignment)
    return [_change(row) for row in gradebook.conn.execute(_HISTORY + "WHERE h.assignment_id = ? ORDER BY h.id",
                                                           (info.id,))]


@dataclass(frozen=True)
class TermRow:
    """One learner's result in one assignment, for a term report."""

    key: str
    name: str
    assignment: str
    points: float  # after the late policy
    max_points: float
    pending: float
    late_sentence: str


def term_results(gradebook: Gradebook) -> list[TermRow]:
    """Every learner's totals in every assignment they submitted to, by learner then assignment."""
    names = [row[0] for row in gradebook.conn.execute("SELECT name FROM assignments ORDER BY name")]
    rows = [TermRow(s.key, s.name, name, s.total, s.max_points, s.pending, s.late.sentence if s.late else "")
            for name in names for s in assignment_sheet(gradebook, name)]
    return sorted(rows, key=lambda t: (t.key.lower(), t.assignment))


def record_export(gradebook: Gradebook, assignment: str | None, kind: str) -> int:
    """Note that ``kind`` (grades.csv, lms-import.csv, feedback, ...) was exported now; returns its number."""
    a = gradebook.assignment_id(assignment) if assignment else None
    with gradebook.transaction() as conn:
        last = conn.execute("SELECT COALESCE(MAX(id), 0) FROM history").fetchone()[0]
        cursor = conn.execute("INSERT INTO exports (assignment_id, kind, at, command, history_id) "
                              "VALUES (?, ?, ?, ?, ?)", (a, kind, now(), gradebook.command, last))
        return int(cursor.lastrowid or 0)


@dataclass
class Changes:
    """What changed in an assignment since an export: the learners to export again."""

    learners: list[str] = field(default_factory=list)  # keys, sorted
    assignment_wide: bool = False  # the due date or late policy changed: every learner's total may move
    changes: list[Change] = field(default_factory=list)


NOT_A_GRADE = ("enrolment",)  # history rows that change no learner's grade or feedback


def changed_since(gradebook: Gradebook, export_id: int) -> Changes:
    """The history after export ``export_id``, for that export's assignment (or all, for a course export)."""
    row = gradebook.conn.execute("SELECT assignment_id, history_id FROM exports WHERE id = ?", (export_id,)).fetchone()
    if row is None:
        last = gradebook.conn.execute("SELECT COALESCE(MAX(id), 0) FROM exports").fetchone()[0]
        raise StoreError(f"no export number {export_id} (the last one is {last})")
    where, args = "WHERE h.id > ?", [row["history_id"]]
    if row["assignment_id"] is not None:
        where += " AND (h.assignment_id = ? OR (h.assignment_id IS NULL AND h.learner_id IS NOT NULL))"
        args.append(row["assignment_id"])
    changes = [_change(c) for c in gradebook.conn.execute(_HISTORY + where + " ORDER BY h.id", args)]
    grades = [c for c in changes if c.what not in NOT_A_GRADE]
    return Changes(sorted({c.learner for c in grades if c.learner}, key=str.lower),
                   any(c.what == "late_policy" for c in changes), changes)
