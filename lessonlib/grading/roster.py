"""Rosters from the LMS in, ``lms-import.csv`` out: a file Canvas or Moodle imports unchanged.

Two rosters are recognised by their header:

- a Canvas gradebook export (Grades, Export): ``Student, ID, SIS User ID, SIS Login ID,
  Section``, then one column per assignment (``Name (assignment id)``) and totals; a second row
  ``Points Possible``. The import file keeps the identifying columns and one assignment column:
  the existing one called NAME (``--assignment``), or a new one, which Canvas creates on import.
- a Moodle grading worksheet (Assignment, View all submissions, Download grading worksheet):
  ``Identifier`` (``Participant 123``), ``Full name``, ``Email address``, ``Status``, ``Grade``,
  ``Maximum Grade``, ... The import file is the worksheet with ``Grade`` filled in (scaled to
  ``Maximum Grade`` when that differs from the course's total) and a short summary in
  ``Feedback comments`` for every learner; Moodle checks the other columns.

Learners are matched on the LMS id from the download (Canvas user id, Moodle participant id),
else on the folder name against a login, id or e-mail. Submissions not in the roster are listed.

An import never overwrites a grade it has no reason to touch:

- Roster learners with no submission are marked missing and, unless ``absent_zero``, keep their
  grade in the LMS: Moodle skips a row whose Grade is empty, so their row has an empty Grade;
  Canvas reads an empty cell as "remove the grade" (its importer counts a blank against an
  existing score as a change), so their rows are left out of the Canvas file.
- Canvas's test student (``Student, Test``, made by Student View) is left out. Moodle has no
  test-user convention, so every Moodle row is kept.
- Moodle skips, without a word, a row whose grade changed in Moodle after the worksheet's
  ``Last modified (grade)``. The column is not rewritten (that would defeat Moodle's guard against
  overwriting a grade changed in Moodle by hand); instead a re-run that changes a row of the
  previous lms-import.csv while its ``Last modified (grade)`` is unchanged warns that Moodle will
  skip that row if the previous file was imported, and that a fresh worksheet is needed.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.feedback import SUMMARY_MARK, summary_text
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.safe_text import csv_row, csv_value

LMS_IMPORT = "lms-import.csv"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
CANVAS_REQUIRED = ("Student", "ID", "SIS Login ID", "Section")
MOODLE_REQUIRED = ("Identifier", "Full name", "Grade")
POINTS_POSSIBLE = "Points Possible"
CANVAS_TEST_STUDENTS = ("Student, Test", "Test Student")  # the student Canvas's Student View creates
COMMENTS = "Feedback comments"
MODIFIED = "Last modified (grade)"


class RosterError(ValueError):
    """The roster is not a Canvas gradebook export or a Moodle grading worksheet, or cannot be used."""


@dataclass
class Roster:
    """A roster as read: its kind, header and rows, and the column the points go into."""

    path: Path
    kind: str  # "canvas" or "moodle"
    header: list[str]
    rows: list[dict[str, str]]
    column: str  # the assignment column (Canvas) or "Grade" (Moodle)
    new_column: bool = False
    notes: list[str] = field(default_factory=list)

    def learner_id(self, row: dict[str, str]) -> str:
        """The LMS id of a learner row ("" for Canvas's Points Possible and other non-learner rows)."""
        if self.kind == "canvas":
            return (row.get("ID") or "").strip()
        match = re.search(r"(\d+)\s*$", row.get("Identifier") or "")
        return match.group(1) if match else ""

    def is_test(self, row: dict[str, str]) -> bool:
        """Canvas's test student, which no import should grade."""
        return self.kind == "canvas" and (row.get("Student") or "").strip() in CANVAS_TEST_STUDENTS

    def learner_name(self, row: dict[str, str]) -> str:
        return (row.get("Student") if self.kind == "canvas" else row.get("Full name")) or ""

    def aliases(self, row: dict[str, str]) -> set[str]:
        """Other names a plain learner folder may carry: login, SIS id, e-mail and its local part."""
        names = {self.learner_id(row)}
        for column in ("SIS Login ID", "SIS User ID", "Email address", "Integration ID"):
            value = (row.get(column) or "").strip()
            if value:
                names |= {value, value.split("@")[0]}
        return {n.lower() for n in names if n}


def _columns_message() -> str:
    return (f"expected a Canvas gradebook export (columns {', '.join(CANVAS_REQUIRED)}, ...) or a Moodle grading "
            f"worksheet (columns {', '.join(MOODLE_REQUIRED)}, ...)")


def read_roster(path: Path, assignment: str | None) -> Roster:
    """Read ``path`` and decide, from its header, which LMS it comes from."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RosterError(f"{path}: no such roster file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    rows = [{k: (csv_value(v) if isinstance(v, str) else "") for k, v in row.items() if k is not None}
            for row in reader]  # csv_value: a roster that is an lms-import.csv reads back unquoted
    if all(c in header for c in CANVAS_REQUIRED):
        if not assignment:
            raise RosterError(f"{path} is a Canvas gradebook: name the assignment column with --assignment NAME")
        pattern = re.compile(re.escape(assignment) + r"(\s*\(\d+\))?")
        existing = [h for h in header if pattern.fullmatch(h)]
        column = existing[0] if existing else assignment
        roster = Roster(path, "canvas", header, rows, column, new_column=not existing)
        if any(roster.is_test(row) for row in rows):
            roster.notes.append("Canvas's test student (Student, Test) is left out of lms-import.csv")
        return roster
    if all(c in header for c in MOODLE_REQUIRED):
        roster = Roster(path, "moodle", header, rows, "Grade")
        if assignment:
            roster.notes.append(f"a Moodle worksheet belongs to one assignment: --assignment {assignment!r} is not "
                                "needed (the Grade column is filled)")
        return roster
    shown = ", ".join(header[:8]) + (" ..." if len(header) > 8 else "") if header else "none"
    raise RosterError(f"{path}: not a roster this grader knows; {_columns_message()}; its columns are: {shown}")


@dataclass
class Matched:
    """Roster rows paired with results; what is missing on either side."""

    pairs: list[tuple[dict[str, str], r.LearnerResult | None]]
    not_in_roster: list[r.LearnerResult]

    @property
    def missing(self) -> list[dict[str, str]]:
        return [row for row, res in self.pairs if res is None]


def match(roster: Roster, results: Sequence[r.LearnerResult]) -> Matched:
    """Pair every learner row of the roster with its result (by LMS id, else by login or e-mail)."""
    by_id = {res.lms_id: res for res in results if res.lms_id}
    by_name = {res.key.lower(): res for res in results} | {res.learner.lower(): res for res in results}
    used: set[str] = set()
    pairs = []
    for row in roster.rows:
        lms_id = roster.learner_id(row)
        if not lms_id or roster.is_test(row):
            continue  # Points Possible, the test student and other rows that are not learners
        res = by_id.get(lms_id) or next((by_name[a] for a in sorted(roster.aliases(row)) if a in by_name), None)
        if res is not None and res.key in used:
            res = None
        if res is not None:
            used.add(res.key)
        pairs.append((row, res))
    return Matched(pairs, [res for res in results if res.key not in used])


def _num(x: float) -> str:
    return f"{round(x, 2):g}"


def lms_import_text(roster: Roster, matched: Matched, max_points: float, *, absent_zero: bool = False) -> str:
    """The import file's text, in the roster's own format (absent learners: see the module's docstring)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if roster.kind == "canvas":
        ids = [c for c in roster.header if c in CANVAS_COLUMNS]
        writer.writerow([*ids, roster.column])
        for row in roster.rows:
            if (row.get("Student") or "").strip() == POINTS_POSSIBLE:
                writer.writerow(csv_row([row.get(c, "") for c in ids] + [_num(max_points)]))
        for row, res in matched.pairs:
            if res is not None or absent_zero:
                writer.writerow(csv_row([row.get(c, "") for c in ids] + [_num(res.points if res else 0.0)]))
        return buffer.getvalue()
    writer.writerow(roster.header)
    for row, res in matched.pairs:
        out = dict(row)
        scale = _maximum(row, max_points) / max_points if max_points else 1.0
        out["Grade"] = _num(res.points * scale) if res else ("0" if absent_zero else "")
        if COMMENTS in out:
            out[COMMENTS] = _comment(out[COMMENTS], summary_text(res))
        writer.writerow(csv_row(out.get(c, "") for c in roster.header))
    return buffer.getvalue()


def _comment(existing: str, summary: str) -> str:
    """The comment cell with ``summary`` in place of an earlier one; a comment typed in Moodle is kept before it."""
    kept = existing.split(SUMMARY_MARK, 1)[0].strip()
    if kept.startswith("Missing: no submission was found."):  # this grader's earlier wording
        kept = kept.removeprefix("Missing: no submission was found.").strip()
    return f"{kept} {summary}" if kept else summary


def _maximum(row: dict[str, str], default: float) -> float:
    try:
        value = float((row.get("Maximum Grade") or "").strip())
    except ValueError:
        return default
    return value if value > 0 else default


def moodle_skipped(previous: str, current: str) -> list[str]:
    """Identifiers of the rows Moodle would skip on importing ``current`` after ``previous``.

    Moodle skips a row whose grade was modified after the worksheet's "Last modified (grade)"
    (mod/assign/feedback/offline: ``$usergrade->timemodified > ($modified + 60)``). Importing
    ``previous`` modified every row it changed, so a row that ``current`` changes again while its
    "Last modified (grade)" is still the one ``previous`` carried is skipped: the worksheet is stale.
    """
    def rows(text: str) -> dict[str, dict[str, str]]:
        return {row.get("Identifier", ""): {k: csv_value(v or "") for k, v in row.items() if k}
                for row in csv.DictReader(io.StringIO(text))}

    before = rows(previous)
    skipped = []
    for ident, row in rows(current).items():
        old = before.get(ident)
        if old is None or old.get(MODIFIED, "") != row.get(MODIFIED, ""):
            continue  # a new row, or a fresh worksheet
        if any(old.get(c, "") != row.get(c, "") for c in ("Grade", COMMENTS)):
            skipped.append(ident)
    return skipped


def write_lms_import(out: Path, roster: Roster, matched: Matched, max_points: float, *,
                     absent_zero: bool = False) -> tuple[Path, list[str]]:
    """Write lms-import.csv; returns its path and warnings (a Moodle worksheet that is stale)."""
    path = Path(out) / LMS_IMPORT
    text = lms_import_text(roster, matched, max_points, absent_zero=absent_zero)
    warnings = []
    if roster.kind == "moodle" and path.exists():
        skipped = moodle_skipped(path.read_text(encoding="utf-8"), text)
        if skipped:
            shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
            warnings.append(
                f"{len(skipped)} row(s) of lms-import.csv changed since the previous run ({shown}) but carry the same "
                f"'{MODIFIED}' as then: if the previous lms-import.csv was imported, Moodle will skip these rows "
                "without a word. Download a fresh grading worksheet from Moodle and run again with --roster FILE.")
    atomic_write_text(path, text)
    return path, warnings
