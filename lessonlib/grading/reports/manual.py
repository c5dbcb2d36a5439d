"""Written answers graded by hand: ``manual.csv`` out, the instructor's points and comments back in.

The grader writes one row per written answer (any cell tagged ``manual``) that needs a person::

    learner,name,lms_id,notebook,exercise,rubric,points,max_points,comment,answer_id,note,answer

``learner`` is the learner's key (as in summary.csv, grades.csv and ``feedback/KEY.md``, where the
answer is quoted for reading); ``name`` is for reading only (the roster's name where there is one).
``answer_id`` names the version of the answer beside it (``records.answer_id``): points typed on a
row are given to that version only. When the learner hands in another answer, the row's points are
not applied, the row is written again with empty points for the new answer, and ``note`` keeps
what was typed for the earlier one (the hand grade it became, if any, is withdrawn and stays in the
history). A row without an ``answer_id`` (a file from an older version) applies to the answer graded now.
The instructor fills ``points`` (0 to ``max_points``; empty = not graded yet) and may write a
``rubric`` line and a ``comment`` (shown to the learner). Running ``lessonlib grade`` again with
the same ``--out`` reads the file back: every line is checked first, and one bad line
(points out of range or not a number, an unknown learner or question, a row given twice) refuses
the whole file, naming each line, before anything is rewritten. The rows are kept on every run
(a newly graded learner adds rows), so nothing typed in is lost.
"""

from __future__ import annotations

import copy
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.reports import marking
from lessonlib.grading.safe_text import csv_row, csv_value

MANUAL_FILE = "manual.csv"
MANUAL_COLUMNS = ("learner", "name", "lms_id", "notebook", "exercise", "rubric", "points", "max_points", "comment",
                  "answer_id", "note")
REQUIRED = ("learner", "exercise", "points")


class ManualError(ValueError):
    """manual.csv holds lines that cannot be applied; the message names each one."""


@dataclass(frozen=True)
class Mark:
    """One filled-in (or still empty) row of manual.csv."""

    learner: str
    exercise: str
    points: float | None
    rubric: str = ""
    comment: str = ""
    line: int = 0
    earlier: bool = False  # typed beside another version of the answer than the one graded now: not applied
    unread: bool = False  # the grader failed on the submission (records.NOT_READ): kept for the next run
    answer_id: str = ""  # as typed in the row

    @property
    def applies(self) -> bool:
        """Whether the row is for the answer graded now (so it is recorded as a hand grade)."""
        return not self.earlier and not self.unread

    def typed(self) -> str:
        """What the instructor typed, in words (for the note that keeps it)."""
        given = [f"{self.points:g} points" if self.points is not None else "",
                 f"rubric {self.rubric!r}" if self.rubric else "", f"comment {self.comment!r}" if self.comment else ""]
        return ", ".join(g for g in given if g)


def _written(result: r.LearnerResult) -> dict[str, r.ExerciseGrade]:
    return {g.exercise: g for g in result.exercises if g.kind == "manual"}


def read_manual(path: Path, results: Sequence[r.LearnerResult]) -> dict[tuple[str, str], Mark]:
    """The marks in ``path`` (none when it does not exist), checked against ``results``.

    Raises ManualError naming every bad line.
    """
    path = Path(path)
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManualError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ManualError(f"{path}: the columns {', '.join(missing)} are missing "
                          f"(expected {', '.join(MANUAL_COLUMNS)})")
    reader.fieldnames = header
    learners = {res.key: res for res in results}
    marks: dict[tuple[str, str], Mark] = {}
    problems: list[str] = []
    for line, raw in enumerate(reader, start=2):  # the row as a spreadsheet numbers it (answers span lines)
        row = {k: csv_value(v) if isinstance(v, str) else v for k, v in raw.items()}  # as written: see safe_text
        learner, exercise = (row.get("learner") or "").strip(), (row.get("exercise") or "").strip()
        result = learners.get(learner)
        if result is None:
            problems.append(f"line {line}: unknown learner {learner!r} (the learner column holds the key used in "
                            "feedback/KEY.md)")
            continue
        grade = _written(result).get(exercise)
        if grade is None:
            problems.append(f"line {line}: {learner} has no written question {exercise!r} "
                            f"(written questions: {', '.join(_written(result)) or 'none'})")
            continue
        text = (row.get("points") or "").strip()
        points = None
        if text:
            try:
                points = float(text)
            except ValueError:
                problems.append(f"line {line}: points {text!r} for {learner} / {exercise} is not a number")
                continue
            if not math.isfinite(points) or not 0 <= points <= grade.max_points:
                problems.append(f"line {line}: points {text} for {learner} / {exercise} is out of range "
                                f"(0 to {grade.max_points:g})")
                continue
        if (learner, exercise) in marks:
            problems.append(f"line {line}: a second row for {learner} / {exercise} (the first is on line "
                            f"{marks[learner, exercise].line})")
            continue
        given_for = (row.get("answer_id") or "").strip()
        unread = grade.answer_sha256 == r.NOT_READ
        marks[learner, exercise] = Mark(learner, exercise, points, (row.get("rubric") or "").strip(),
                                        (row.get("comment") or "").strip(), line,
                                        earlier=not unread and bool(given_for) and given_for != r.answer_id(grade),
                                        unread=unread, answer_id=given_for)
    if problems:
        raise ManualError(f"{path}: " + "; ".join(problems[:20])
                          + (f"; and {len(problems) - 20} more" if len(problems) > 20 else ""))
    return marks


def apply_marks(results: Sequence[r.LearnerResult], marks: dict[tuple[str, str], Mark]) -> list[r.LearnerResult]:
    """Copies of ``results`` with the hand-given points, rubric and comment in their written answers."""
    applied = []
    for result in results:
        result = copy.deepcopy(result)
        for grade in result.exercises:
            mark = marks.get((result.key, grade.exercise))
            if grade.kind != "manual" or mark is None or mark.points is None or not mark.applies:
                continue
            grade.points = mark.points
            grade.status = r.GRADED_BY_HAND
            grade.diagnosis = mark.rubric
            grade.reason = mark.comment
        applied.append(result)
    return applied


def manual_rows(results: Sequence[r.LearnerResult], marks: dict[tuple[str, str], Mark]) -> list[list[str]]:
    """A row per written answer needing a person, with whatever the instructor already wrote."""
    rows = []
    for result in results:
        for grade in _written(result).values():
            mark = marks.get((result.key, grade.exercise))
            if mark is None and grade.status not in (r.NEEDS_MANUAL, r.GRADED_BY_HAND):
                continue  # nothing written: 0 points already, nothing to read
            note, answer = grade.review, r.answer_id(grade)
            if mark is not None and mark.earlier:
                note = f"the answer changed after this row was filled in; typed for the earlier answer: {mark.typed()}"
                mark = None
            elif mark is not None and mark.unread:  # kept as typed, for the run that reads the answer
                answer = mark.answer_id
            points = "" if mark is None or mark.points is None else f"{mark.points:g}"
            rows.append([result.key, result.learner, result.lms_id, grade.notebook, grade.exercise,
                         mark.rubric if mark else "", points, f"{grade.max_points:g}", mark.comment if mark else "",
                         answer, note])
    return rows


def earlier_marks(marks: dict[tuple[str, str], Mark]) -> list[Mark]:
    """The filled-in rows typed for an answer the learner has since replaced (not applied)."""
    return [m for m in marks.values() if m.earlier and (m.points is not None or m.rubric or m.comment)]


def write_manual(out: Path, results: Sequence[r.LearnerResult], marks: dict[tuple[str, str], Mark]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(MANUAL_COLUMNS + (marking.ANSWER_COLUMN,))  # the answer, to read beside the points
    writer.writerows(csv_row(row) for row in marking.with_answers(manual_rows(results, marks), results))
    path = Path(out) / MANUAL_FILE
    atomic_write_text(path, buffer.getvalue())
    return path
