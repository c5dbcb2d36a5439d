"""Rosters from the LMS in, ``lms-import.csv`` out: a file Canvas or Moodle imports unchanged.

Two rosters are recognised by their header:

- a Canvas gradebook export (Grades, Export): ``Student, ID, SIS User ID, SIS Login ID,
  Section``, then one column per assignment (``Title (assignment id)``) and totals; a second row
  ``Points Possible``. The import file keeps the identifying columns and one assignment column,
  found as instructors name it (``--assignment``, :func:`canvas_column`): its title without the id
  ("Week 2: Masking"), the id ("51002"), or the start of the title up to a word boundary ("Week 2"
  finds "Week 2: Masking (51002)", never "Week 20"), ignoring case and spaces. Two columns that
  fit are refused by name; none is refused too, listing the columns, unless ``new_column``
  (``--new-column``) asks for a new column of that name, which Canvas creates on import.
- a Moodle grading worksheet (Assignment, View all submissions, Download grading worksheet):
  ``Identifier`` (``Participant 123``), ``Full name``, ``Email address``, ``Status``, ``Grade``,
  ``Maximum Grade``, ... The import file is the worksheet with ``Grade`` filled in (scaled to
  ``Maximum Grade`` when that differs from the course's total) and a short summary in
  ``Feedback comments`` for every learner; Moodle checks the other columns. The worksheet's
  headers are in the language of whoever downloaded it: English, German, French, Spanish and
  Portuguese are read (``lms_locale.py``), and the file is written back with its own header.

A roster is written back as it was read: with ``;`` between columns and decimal commas when it
came so (a Canvas export in a locale that writes ``12,5``; a Moodle worksheet's ``"100,00"``).

Canvas's ``Points Possible`` row says what the assignment column is worth. When it differs from
the course's total, every grade is scaled to it (a learner with 7 of 14 gets 50 of 100), the row
keeps Canvas's value, and a note says so: the import never changes what the assignment is worth.

Learners are matched on the LMS id from the download (Canvas user id, Moodle participant id),
else on the folder name against a login, id or e-mail. Submissions not in the roster are listed.

An import never overwrites a grade it has no reason to touch:

- Roster learners with no submission are marked missing and, unless ``absent_zero``, keep their
  grade in the LMS: Moodle skips a row whose Grade is empty, so their row has an empty Grade;
  Canvas reads an empty cell as "remove the grade" (its importer counts a blank against an
  existing score as a change), so their rows are left out of the Canvas file.
- Canvas's test student (``Student, Test``, made by Student View) is left out. Moodle has no
  test-user convention, so every Moodle row is kept.
- A learner whose written answers still wait for hand grading has no grade yet: Moodle's row gets
  an empty Grade (its comment says the grade follows the hand grading) and Canvas's row is left
  out, so nobody sees the automatic part as a failing grade. ``partial=True`` (``--partial-grades``)
  writes the points earned so far instead.
- Moodle's ``Feedback comments`` keep whatever the instructor wrote, before and after the grader's
  summary; only the summary (from "Automatic grading:" to "Your feedback file has the details.")
  is replaced.
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
from datetime import datetime, tzinfo
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.learners import Learner
from lessonlib.grading.lms.localized import (
    MOODLE_HEADERS,
    MOODLE_REQUIRED,
    decimal_of,
    expected_moodle_headers,
    format_number,
    is_late,
    moodle_columns,
    parse_number,
    sniff_delimiter,
)
from lessonlib.grading.lms.times import parse_moodle_time
from lessonlib.grading.safe_text import csv_row, csv_value

LMS_IMPORT = "lms-import.csv"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
CANVAS_REQUIRED = ("Student", "ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
CANVAS_TEST_STUDENTS = ("Student, Test", "Test Student")  # the student Canvas's Student View creates
COMMENTS = "Feedback comments"
MODIFIED = "Last modified (grade)"
SUMMARY_END = "Your feedback file has the details."  # how summary_text ends: the summary lies between the two
WITHHELD = "Your grade is entered once the written answers are graded."
UNDECIDED = "Your grade is entered once your instructor has looked at your resubmission."


class RosterError(ValueError):
    """The roster is not a Canvas gradebook export or a Moodle grading worksheet, or cannot be used."""


@dataclass
class Roster:
    """A roster as read: its kind, header and rows, and the column the points go into."""

    path: Path
    kind: str  # "canvas" or "moodle"
    header: list[str]
    rows: list[dict[str, str]]
    column: str  # the assignment column (Canvas) or the Grade column (Moodle, in the worksheet's language)
    new_column: bool = False
    notes: list[str] = field(default_factory=list)
    delimiter: str = ","
    decimal: str = "."
    language: str = "en"  # of a Moodle worksheet's header
    columns: dict[str, str] = field(default_factory=dict)  # Moodle: what a column holds -> its name here
    points_possible: float | None = None  # Canvas: what the assignment column is worth, from its export

    def col(self, column: str) -> str:
        """The name of a Moodle column here ("grade" is "Bewertung" in a German worksheet)."""
        return self.columns.get(column) or MOODLE_HEADERS[column]["en"][0]

    def learner_id(self, row: dict[str, str]) -> str:
        """The LMS id of a learner row ("" for Canvas's Points Possible and other non-learner rows)."""
        if self.kind == "canvas":
            return (row.get("ID") or "").strip()
        match = re.search(r"(\d+)\s*$", row.get(self.col("identifier")) or "")
        return match.group(1) if match else ""

    def is_test(self, row: dict[str, str]) -> bool:
        """Canvas's test student, which no import should grade."""
        return self.kind == "canvas" and (row.get("Student") or "").strip() in CANVAS_TEST_STUDENTS

    def learner_name(self, row: dict[str, str]) -> str:
        return (row.get("Student") if self.kind == "canvas" else row.get(self.col("full_name"))) or ""

    def is_late(self, row: dict[str, str]) -> bool:
        """Moodle's Status column says the submission came in late ("... 2 days 3 hours late")."""
        return self.kind == "moodle" and is_late(row.get(self.col("status")) or "")

    def submission_times(self, zone: tzinfo | None = None) -> dict[str, datetime]:
        """Moodle: each learner's "Last modified (submission)" by LMS id, read in ``zone`` (None: local
        time); a cell of "-" or in a form not known is left out."""
        if self.kind != "moodle" or "modified_submission" not in self.columns:
            return {}
        times = {}
        for row in self.rows:
            when = parse_moodle_time(row.get(self.col("modified_submission")) or "", zone)
            if when is not None and self.learner_id(row):
                times[self.learner_id(row)] = when
        return times

    def has_times(self) -> bool:
        """Moodle's worksheet holds at least one "Last modified (submission)" time (a local time: read in
        the course's time zone)."""
        if self.kind != "moodle" or "modified_submission" not in self.columns:
            return False
        return any((row.get(self.col("modified_submission")) or "").strip() not in ("", "-") for row in self.rows)

    def late_ids(self) -> set[str]:
        """The LMS ids of the learners whose submission the roster marks late."""
        return {self.learner_id(row) for row in self.rows if self.is_late(row) and self.learner_id(row)}

    def aliases(self, row: dict[str, str]) -> set[str]:
        """Other names a plain learner folder may carry: login, SIS id, e-mail and its local part."""
        names = {self.learner_id(row)}
        for column in ("SIS Login ID", "SIS User ID", self.col("email"), "Integration ID"):
            value = (row.get(column) or "").strip()
            if value:
                names |= {value, value.split("@")[0]}
        return {n.lower() for n in names if n}


def _columns_message() -> str:
    return (f"expected a Canvas gradebook export (columns {', '.join(CANVAS_REQUIRED)}, ...) or a Moodle grading "
            f"worksheet (columns {expected_moodle_headers()}, ...)")


CANVAS_ID = re.compile(r"^(?P<title>.*?)\s*\((?P<id>\d+)\)$")  # "Week 2: Masking (51002)"


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())


def canvas_column(header: Sequence[str], assignment: str, path: Path, *, new_column: bool = False) -> str | None:
    """The assignment column of a Canvas export that ``assignment`` names (see the module docstring);
    None for a new column (``new_column``). Raises RosterError when none fits, or when several do."""
    columns = [h for h in header if CANVAS_ID.match(h)]
    wanted = _plain(assignment)
    titles = {h: _plain(CANVAS_ID.match(h)["title"]) for h in columns}  # type: ignore[index]
    exact = [h for h in columns if _plain(h) == wanted or titles[h] == wanted
             or CANVAS_ID.match(h)["id"] == assignment.strip()]  # type: ignore[index]
    starts = [h for h in columns if titles[h].startswith(wanted) and not titles[h][len(wanted):][:1].isalnum()]
    found = exact or starts
    listed = "; ".join(repr(h) for h in columns) or "none"
    if new_column:
        if found:
            raise RosterError(f"{path}: --new-column {assignment!r}, but Canvas already has the column "
                              f"{found[0]!r}; leave --new-column out to fill it, or name the new column differently")
        return None
    if len(found) > 1:
        several = "; ".join(map(repr, found))
        raise RosterError(f"{path}: --assignment {assignment!r} fits several Canvas columns ({several}); give more "
                          "of the title, or the id in parentheses")
    if not found:
        raise RosterError(f"{path}: no Canvas assignment column is called {assignment!r}; its assignment columns are: "
                          f"{listed}. Give one of these titles (or its id), or add --new-column to create a column "
                          f"called {assignment!r} on import")
    return found[0]


def read_roster(path: Path, assignment: str | None, *, new_column: bool = False) -> Roster:
    """Read ``path`` and decide, from its header, which LMS it comes from (and its separators);
    ``assignment`` names a Canvas column (``canvas_column``), ``new_column`` creates it instead."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RosterError(f"{path}: no such roster file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    delimiter = sniff_delimiter(text.split("\n", 1)[0])
    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    rows = [{k: (csv_value(v) if isinstance(v, str) else "") for k, v in row.items() if k is not None}
            for row in reader]  # csv_value: a roster that is an lms-import.csv reads back unquoted
    decimal = decimal_of([v for row in rows for v in row.values()], delimiter)
    if all(c in header for c in CANVAS_REQUIRED):
        if not assignment:
            raise RosterError(f"{path} is a Canvas gradebook: name the assignment column with --assignment NAME")
        existing = canvas_column(header, assignment, path, new_column=new_column)
        column = existing or assignment.strip()
        roster = Roster(path, "canvas", header, rows, column, new_column=existing is None, delimiter=delimiter,
                        decimal=decimal)
        if existing is not None and _plain(existing) != _plain(assignment):
            roster.notes.append(f"--assignment {assignment!r} is Canvas's column {existing!r}")
        if existing is not None:
            possible = [parse_number(row.get(column)) for row in rows
                        if (row.get("Student") or "").strip() == POINTS_POSSIBLE]
            roster.points_possible = next((p for p in possible if p is not None and p > 0), None)
        if any(roster.is_test(row) for row in rows):
            roster.notes.append("Canvas's test student (Student, Test) is left out of lms-import.csv")
        return roster
    columns, language = moodle_columns(header)
    if all(c in columns for c in MOODLE_REQUIRED):
        roster = Roster(path, "moodle", header, rows, columns["grade"], delimiter=delimiter, decimal=decimal,
                        language=language, columns=columns)
        if assignment or new_column:
            roster.notes.append(f"a Moodle worksheet belongs to one assignment: --assignment {assignment!r} is not "
                                "needed (the Grade column is filled)")
        return roster
    shown = ", ".join(header[:12]) + (" ..." if len(header) > 12 else "") if header else "none"
    known = ", ".join(f"{c} ({name})" for c, name in columns.items())
    found = f"; of a Moodle worksheet's columns it has {known} only" if columns else ""
    raise RosterError(f"{path}: not a roster this grader knows; {_columns_message()}; its columns are: {shown}"
                      f"{found}")


LATE_NOTE = "The LMS marks this submission late."


def mark_late(learners: Sequence[Learner], roster: Roster) -> list[Learner]:
    """Set ``late`` on every learner the roster marks late (Moodle's Status column), with the same note
    Canvas's ``_LATE`` gives; returns the learners changed."""
    late = roster.late_ids()
    changed = [lr for lr in learners if lr.lms_id and lr.lms_id in late and not lr.late]
    for learner in changed:
        learner.late = True
        learner.notes.append(LATE_NOTE)
    return changed


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


def _withheld(res: r.LearnerResult | None, partial: bool) -> bool:
    """True when the learner's grade waits for hand grading, or for the instructor's decision on an
    override given for an answer since replaced (see the module's docstring), or for any grading at
    all: the grader failed on the submission (so even with ``partial``)."""
    if res is None:
        return False
    return res.grader_failed or ((res.manual_pending > 0 or bool(res.undecided)) and not partial)


def lms_import_text(roster: Roster, matched: Matched, max_points: float, *, absent_zero: bool = False,
                    partial: bool = False) -> str:
    """The import file's text, in the roster's own format (absent learners and written answers still to
    grade: see the module's docstring)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=roster.delimiter, lineterminator="\n")
    num = lambda x: format_number(x, roster.decimal)  # noqa: E731
    if roster.kind == "canvas":
        ids = [c for c in roster.header if c in CANVAS_COLUMNS]
        worth = roster.points_possible or max_points
        scale = worth / max_points if max_points else 1.0
        writer.writerow([*ids, roster.column])
        for row in roster.rows:
            if (row.get("Student") or "").strip() == POINTS_POSSIBLE:
                writer.writerow(csv_row([row.get(c, "") for c in ids] + [num(worth)]))
        for row, res in matched.pairs:
            if (res is not None or absent_zero) and not _withheld(res, partial):
                writer.writerow(csv_row([row.get(c, "") for c in ids] + [num(res.points * scale if res else 0.0)]))
        return buffer.getvalue()
    grade, comments = roster.col("grade"), roster.col("comments")
    writer.writerow(roster.header)
    for row, res in matched.pairs:
        out = dict(row)
        scale = _maximum(roster, row, max_points) / max_points if max_points else 1.0
        withheld = _withheld(res, partial)
        if res is None:
            out[grade] = "0" if absent_zero else ""
        else:
            out[grade] = "" if withheld else num(res.points * scale)
        if comments in out:
            out[comments] = replace_summary(out[comments], _summary(res, withheld))
        writer.writerow(csv_row(out.get(c, "") for c in roster.header))
    return buffer.getvalue()


def _summary(res: r.LearnerResult | None, withheld: bool) -> str:
    text = r.summary_text(res)
    if withheld:
        why = WITHHELD if res is not None and res.manual_pending > 0 else UNDECIDED
        text = text.removesuffix(SUMMARY_END).rstrip() + f" {why} {SUMMARY_END}"
    return text


def replace_summary(existing: str, summary: str) -> str:
    """The comment cell with ``summary`` in place of the grader's earlier one; whatever the instructor
    wrote in Moodle, before it and after it, is kept as it is.

    The grader's summary runs from SUMMARY_MARK to SUMMARY_END (an earlier one without its end, cut
    short by hand, runs to the end of the cell). A cell without a summary gets it at the end.
    """
    start = existing.find(r.SUMMARY_MARK)
    if start < 0:
        before, after = existing, ""
    else:
        before = existing[:start]
        stop = existing.find(SUMMARY_END, start)
        after = existing[stop + len(SUMMARY_END):] if stop >= 0 else ""
    if before.strip().endswith("Missing: no submission was found."):  # this grader's earlier wording
        before = before.rstrip().removesuffix("Missing: no submission was found.")
    before, after = before.rstrip(), after.lstrip()
    return " ".join(part for part in (before, summary, after) if part)


def _maximum(roster: Roster, row: dict[str, str], default: float) -> float:
    value = parse_number(row.get(roster.col("maximum")))
    return value if value is not None and value > 0 else default


def scale_notes(roster: Roster, matched: Matched, max_points: float, *, partial: bool = False) -> list[str]:
    """What lms-import.csv does that the instructor should know: grades scaled to the LMS's points,
    grades left empty until the written answers are graded."""
    notes = []
    if roster.kind == "canvas" and roster.points_possible and abs(roster.points_possible - max_points) > 1e-9:
        notes.append(f"Canvas's {roster.column!r} is worth {format_number(roster.points_possible)} points (its "
                     f"Points Possible) and this assignment {format_number(max_points)}: lms-import.csv scales every "
                     f"grade to {format_number(roster.points_possible)} (points x "
                     f"{format_number(roster.points_possible)} / {format_number(max_points)}) and keeps Canvas's "
                     "Points Possible. To import raw points instead, change the assignment's points in Canvas "
                     "and export the gradebook again")
    withheld = [res for _, res in matched.pairs if res and _withheld(res, partial)]
    failed = [res for res in withheld if res.grader_failed]
    waiting = [res for res in withheld if not res.grader_failed and res.manual_pending > 0]
    undecided = [res for res in withheld if not res.grader_failed and not res.manual_pending]
    where = "left out of" if roster.kind == "canvas" else "left empty in"
    if waiting:
        notes.append(f"{len(waiting)} learner(s) have written answers still to grade by hand: their grade is {where} "
                     "lms-import.csv until manual.csv gives their points, so nobody sees the automatic part as "
                     "the grade (--partial-grades writes the points earned so far)")
    if undecided:
        notes.append(f"{len(undecided)} learner(s) have an override given for an answer they have since replaced: "
                     f"their grade is {where} lms-import.csv until you keep or clear it (lessonlib override ... "
                     "--keep or --clear)")
    if failed:
        notes.append(f"the grader failed on {len(failed)} learner(s)' submission: their grade is {where} "
                     "lms-import.csv until a run grades it")
    return notes


def moodle_skipped(previous: str, current: str, roster: Roster | None = None) -> list[str]:
    """Identifiers of the rows Moodle would skip on importing ``current`` after ``previous``.

    Moodle skips a row whose grade was modified after the worksheet's "Last modified (grade)"
    (mod/assign/feedback/offline: ``$usergrade->timemodified > ($modified + 60)``). Importing
    ``previous`` modified every row it changed, so a row that ``current`` changes again while its
    "Last modified (grade)" is still the one ``previous`` carried is skipped: the worksheet is stale.
    The columns are found by their names in the worksheet's language (``roster``; English without one).
    """
    delimiter = roster.delimiter if roster else ","
    ident, modified, grade, comments = (roster.col(c) if roster else MOODLE_HEADERS[c]["en"][0]
                                        for c in ("identifier", "modified_grade", "grade", "comments"))

    def rows(text: str) -> dict[str, dict[str, str]]:
        return {row.get(ident, ""): {k: csv_value(v or "") for k, v in row.items() if k}
                for row in csv.DictReader(io.StringIO(text), delimiter=delimiter)}

    before = rows(previous)
    skipped = []
    for key, row in rows(current).items():
        old = before.get(key)
        if old is None or old.get(modified, "") != row.get(modified, ""):
            continue  # a new row, or a fresh worksheet
        if any(old.get(c, "") != row.get(c, "") for c in (grade, comments)):
            skipped.append(key)
    return skipped


def write_lms_import(out: Path, roster: Roster, matched: Matched, max_points: float, *,
                     absent_zero: bool = False, partial: bool = False) -> tuple[Path, list[str]]:
    """Write lms-import.csv; returns its path and warnings (a Moodle worksheet that is stale).

    What the file does that the instructor should know (grades scaled, grades left empty) joins the
    roster's notes, which the command prints.
    """
    path = Path(out) / LMS_IMPORT
    text = lms_import_text(roster, matched, max_points, absent_zero=absent_zero, partial=partial)
    roster.notes += [n for n in scale_notes(roster, matched, max_points, partial=partial) if n not in roster.notes]
    warnings = []
    if roster.kind == "moodle" and path.exists():
        skipped = moodle_skipped(path.read_text(encoding="utf-8"), text, roster)
        if skipped:
            shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
            warnings.append(
                f"{len(skipped)} row(s) of lms-import.csv changed since the previous run ({shown}) but carry the same "
                f"'{roster.col('modified_grade')}' as then: if the previous lms-import.csv was imported, Moodle will "
                "skip these rows without a word. Download a fresh grading worksheet from Moodle and run again with "
                "--roster FILE.")
    atomic_write_text(path, text)
    return path, warnings
