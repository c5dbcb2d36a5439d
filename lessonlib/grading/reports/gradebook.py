"""The gradebook: grades.csv, summary.csv, grades.json, manual.csv, feedback/<learner>.md and .html,
the LMS feedback zips (uploads.py) and, with a roster, lms-import.csv; each written atomically.

grades.csv has one row per learner and exercise (written questions included, with no points until
a person grades them in manual.csv); summary.csv one row per learner with the total (and a row per
roster learner with no submission, and per file no learner could be given); grades.json the same
data with every detail; each feedback file what a learner should read: status, points, the
misconceptions their answers show with hints, and their written answer, with the instructor's
points and comment once graded (feedback.py says it; feedback_html.py makes the page). Of hidden
cases the feedback says how many passed, nothing else; grades.json (the instructor's) keeps which
failed, and the class report counts the misconceptions found on them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_json, atomic_write_text
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.lms.downloads import Unattributed
from lessonlib.grading.lms.roster import Matched, Roster, match, write_lms_import
from lessonlib.grading.lms.submissions import safe_key
from lessonlib.grading.lms.uploads import write_uploads
from lessonlib.grading.reports.class_report import write_class_report
from lessonlib.grading.reports.feedback import feedback_blocks, to_markdown
from lessonlib.grading.reports.feedback_html import feedback_html
from lessonlib.grading.reports.marking import write_marking_pages
from lessonlib.grading.reports.safe_text import csv_row
from lessonlib.grading.store.manual import Mark, apply_marks, write_manual

GRADES_COLUMNS = ("learner", "name", "notebook", "exercise", "points", "max_points", "status", "diagnosis")
SUMMARY_COLUMNS = ("learner", "name", "points", "max_points", "percent", "manual_pending", "passed", "exercises",
                   "flagged", "isolation", "lms_id", "notes")
MISSING = "missing: no submission"
NOT_IN_ROSTER = "not in the roster"


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def _csv(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """CSV text whose cells a spreadsheet never runs as formulas (names come from learners and the LMS)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(csv_row(row) for row in rows)
    return buffer.getvalue()


def grades_rows(results: Sequence[r.LearnerResult]) -> list[list[str]]:
    return [
        [res.key, res.learner, g.notebook, g.exercise, _num(g.points), _num(g.max_points), g.status, g.diagnosis]
        for res in results for g in res.exercises
    ]


def summary_rows(results: Sequence[r.LearnerResult], *, not_in_roster: Sequence[str] = ()) -> list[list[str]]:
    """One row per learner; ``not_in_roster`` holds the keys of learners the roster lacks."""
    rows = []
    for res in results:
        auto = [g for g in res.exercises if g.kind == "auto"]
        percent = 100 * res.points / res.max_points if res.max_points else 0.0
        flagged = "; ".join([f"{g.exercise}: {g.review or g.status}" for g in res.flagged] + res.review)
        notes = ((["late"] if res.late or res.late_deducted else []) + ([res.late_note] if res.late_note else [])
                 + ([NOT_IN_ROSTER] if res.key in not_in_roster else []))
        passed = sum(g.status == r.PASSED for g in auto)
        rows.append([res.key, res.learner, _num(res.points), _num(res.max_points), f"{percent:.1f}",
                     _num(res.manual_pending), str(passed), str(len(auto)), flagged, res.isolation, res.lms_id,
                     "; ".join(notes)])
    return rows


def feedback_markdown(result: r.LearnerResult) -> str:
    """The feedback file of one learner."""
    return to_markdown(feedback_blocks(result))


def _in_assignment(notebook: str, notebooks: Sequence[str]) -> bool:
    return not notebooks or notebook in notebooks


def assignment_max_points(notebooks: Sequence[str] = ()) -> float:
    """Every point of the assignment (all the course when ``notebooks`` is empty): exercises and written questions."""
    items = [*EXERCISES.values(), *MANUAL_QUESTIONS.values()]
    return round(sum(i.points for i in items if _in_assignment(i.notebook, notebooks)), 2)


def gradebook_json(results: Sequence[r.LearnerResult], isolation: Isolation, limits: Limits, workers: int,
                   *, unattributed: Sequence[Unattributed] = (), roster: dict | None = None,
                   notebooks: Sequence[str] = ()) -> dict:
    return {
        "tool": "lessonlib grade",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "isolation": isolation.to_dict(),
        "limits": {"cpu_seconds": limits.cpu_seconds, "wall_seconds": limits.wall_seconds,
                   "memory_mb": limits.memory_mb, "processes": limits.processes, "file_mb": limits.file_mb,
                   "result_mb": limits.result_mb},
        "workers": workers,
        "notebooks": list(notebooks) or sorted({e.notebook for e in EXERCISES.values()}),
        "max_points": assignment_max_points(notebooks),
        "exercises": [{"exercise": e.name, "notebook": e.notebook, "max_points": e.points, "kind": "auto"}
                      for e in EXERCISES.values() if _in_assignment(e.notebook, notebooks)]
                     + [{"exercise": q.name, "notebook": q.notebook, "max_points": q.points, "kind": "manual"}
                        for q in MANUAL_QUESTIONS.values() if _in_assignment(q.notebook, notebooks)],
        "columns": {"grades.csv": list(GRADES_COLUMNS), "summary.csv": list(SUMMARY_COLUMNS)},
        "learners": [res.to_dict() for res in results],
        "unattributed": [{"path": str(u.path), "reason": u.reason} for u in unattributed],
        "roster": roster,
    }


def roster_names(results: Sequence[r.LearnerResult], matched: Matched, roster: Roster, *,
                 late_from_roster: bool = True) -> list[r.LearnerResult]:
    """Each matched learner under the roster's name (their key stays), so every file names them alike;
    late when the roster says so (Moodle's Status column) and ``late_from_roster``: results from the
    course gradebook have the LMS's flag already, weighed against the learner's extension."""
    names = {res.key: roster.learner_name(row).strip() for row, res in matched.pairs if res is not None}
    late = {res.key for row, res in matched.pairs if res is not None and roster.is_late(row) and late_from_roster}
    return [replace(res, learner=names.get(res.key) or res.learner, late=res.late or res.key in late)
            for res in results]


def _missing_key(roster: Roster, row: dict[str, str]) -> str:
    """The key a roster learner without a submission would have had (as ``assign_keys`` makes them)."""
    return safe_key(f"{roster.learner_name(row)}_{roster.learner_id(row)}")


@dataclass
class Written:
    """The files written, and what the roster showed."""

    paths: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # roster learners without a submission
    not_in_roster: list[str] = field(default_factory=list)  # learners the roster lacks
    uploads: list[Path] = field(default_factory=list)  # the feedback zips for Moodle and Canvas
    warnings: list[str] = field(default_factory=list)  # what an import of lms-import.csv would miss

    @property
    def feedback(self) -> list[Path]:
        return [p for p in self.paths if p.parent.name == "feedback" and p.suffix == ".md"]


def write_gradebook(out: Path, results: Sequence[r.LearnerResult], isolation: Isolation, limits: Limits,
                    workers: int, *, unattributed: Sequence[Unattributed] = (), roster: Roster | None = None,
                    marks: dict[tuple[str, str], Mark] | None = None, notebooks: Sequence[str] = (),
                    absent_zero: bool = False, partial_grades: bool = False, applied: bool = False,
                    secret: bytes | None = None) -> Written:
    """Write every gradebook file (each one atomically), with the hand-given ``marks`` applied.

    ``notebooks`` is the assignment (empty: the whole course); totals count only its points.
    ``absent_zero``: roster learners with no submission get 0 in lms-import.csv (default: their
    grade in the LMS is left as it is). ``partial_grades``: learners with written answers still to
    grade get their points so far in lms-import.csv (default: no grade until hand grading is done).
    ``applied``: ``results`` come from the course gradebook, with the hand grades (and overrides)
    applied already; ``marks`` only fill manual.csv. ``secret``: the course's marking secret, which
    numbers learners on the marking pages (None: one drawn for this call).
    """
    out = Path(out)
    marks = marks or {}
    max_points = assignment_max_points(notebooks)
    graded = list(results) if applied else apply_marks(results, marks)
    written = Written()
    summary = None
    roster_info = None
    if roster is not None:
        matched = match(roster, graded)
        written.missing = [roster.learner_name(row) for row in matched.missing]
        written.not_in_roster = [res.key for res in matched.not_in_roster]
        path, written.warnings = write_lms_import(out, roster, matched, max_points, absent_zero=absent_zero,
                                                  partial=partial_grades)
        written.paths.append(path)
        graded = roster_names(graded, matched, roster, late_from_roster=not applied)
        summary = [[_missing_key(roster, row), roster.learner_name(row), "0", _num(max_points), "0.0", "", "0", "",
                    "", "", roster.learner_id(row), MISSING] for row in matched.missing]
        roster_info = {"file": str(roster.path), "kind": roster.kind, "column": roster.column,
                       "new_column": roster.new_column, "missing": written.missing,
                       "not_in_roster": written.not_in_roster}
    rows = summary_rows(graded, not_in_roster=written.not_in_roster) + (summary or [])
    rows += [["(unattributed)", "", "", "", "", "", "", "", "", "", "", f"{u.path}: {u.reason}"]
             for u in unattributed]
    files = {
        "grades.csv": _csv(grades_rows(graded), GRADES_COLUMNS),
        "summary.csv": _csv(rows, SUMMARY_COLUMNS),
    }
    pages = {res.key: feedback_html(res) for res in graded}
    for res in graded:
        files[f"feedback/{res.key}.md"] = feedback_markdown(res)
        files[f"feedback/{res.key}.html"] = pages[res.key]
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.paths.append(out / name)
    written.paths.append(write_manual(out, graded, marks))
    written.paths.append(write_class_report(out, graded, absent=written.missing))
    written.paths += write_marking_pages(out, graded, secret=secret)
    atomic_write_json(out / "grades.json", gradebook_json(graded, isolation, limits, workers,
                                                          unattributed=unattributed, roster=roster_info,
                                                          notebooks=notebooks))
    written.paths.append(out / "grades.json")
    written.uploads = write_uploads(out / "feedback", graded, pages, roster.kind if roster else None)
    written.paths += written.uploads
    return written
