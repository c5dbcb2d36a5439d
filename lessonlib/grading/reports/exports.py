"""What to upload to the LMS, for every learner or only those changed since the last export.

``lessonlib export --out DIR --to FOLDER [--changed-only]`` writes into FOLDER (a folder of its
own, so that an upload is never mixed with the output folder's files):

- ``lms-import.csv`` for the roster the assignment was graded with (``--roster``), holding only
  the exported learners' rows (Canvas's *Points Possible* row stays);
- the feedback zips (``feedback-canvas.zip``, ``feedback-moodle.zip``) with only their pages.

Every export is recorded in the course gradebook (its ``exports`` table and a history row naming
the learners), so ``--changed-only`` exports the learners whose grade or feedback changed after
the last export of the assignment: a regrade that changed a result, a hand grade, an override, an
extension or a new submission. A change of the due date or late policy may move every total, so
it exports everyone. With no earlier export, everyone is exported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading import store
from lessonlib.grading.lms.roster import Matched, Roster, match, write_lms_import
from lessonlib.grading.lms.uploads import write_uploads
from lessonlib.grading.reports.feedback_html import feedback_html
from lessonlib.grading.reports.gradebook import assignment_max_points, roster_names

EXPORT_KIND = "lms-upload"


@dataclass
class Exported:
    """What an export wrote: the learners' keys, the files, and why that selection."""

    learners: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    why: str = ""


def last_export(gb: store.Gradebook, assignment: str) -> int | None:
    """The number of the assignment's last LMS export, None when there was none."""
    row = gb.conn.execute("SELECT MAX(e.id) FROM exports e JOIN assignments a ON a.id = e.assignment_id "
                          "WHERE a.name = ? AND e.kind = ?", (assignment, EXPORT_KIND)).fetchone()
    return row[0] if row and row[0] is not None else None


def changed_learners(gb: store.Gradebook, assignment: str, keys: Sequence[str]) -> tuple[set[str], str]:
    """The keys among ``keys`` to export again, and a sentence saying why."""
    last = last_export(gb, assignment)
    if last is None:
        return set(keys), "no earlier export of this assignment: every learner"
    changes = store.changed_since(gb, last)
    if changes.assignment_wide:
        return set(keys), f"the due date or late policy changed since export {last}: every learner"
    chosen = set(changes.learners) & set(keys)
    return chosen, f"{len(chosen)} learner(s) whose grade or feedback changed since export {last}"


def export_for_lms(gb: store.Gradebook, assignment: str, results: Sequence[r.LearnerResult], folder: Path, *,
                   roster: Roster | None, notebooks: Sequence[str], changed_only: bool = False,
                   absent_zero: bool = False, partial_grades: bool = False) -> Exported:
    """Write the LMS files into ``folder`` for every learner (or, ``changed_only``, those changed since
    the last export) and record the export with a history row naming them."""
    keys = [res.key for res in results]
    chosen, why = changed_learners(gb, assignment, keys) if changed_only else (set(keys), "every learner")
    selected = [res for res in results if res.key in chosen]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    exported = Exported(sorted(chosen, key=str.lower), why=why)
    if roster is not None:
        matched = match(roster, results)
        selected = [res for res in roster_names(results, matched, roster, late_from_roster=False) if res.key in chosen]
        absent = absent_zero and not changed_only  # a learner with no submission never changes
        only = Matched([(row, res) for row, res in matched.pairs
                        if (res is not None and res.key in chosen) or (res is None and absent)], [])
        path, _ = write_lms_import(folder, roster, only, assignment_max_points(notebooks), absent_zero=absent_zero,
                                   partial=partial_grades)
        exported.paths.append(path)
    pages = {res.key: feedback_html(res) for res in selected}
    exported.paths += write_uploads(folder, selected, pages, roster.kind if roster else None)
    info = store.get_assignment(gb, assignment)
    with gb.transaction():
        gb.record("export", assignment_id=info.id, new={
            "kind": EXPORT_KIND, "changed_only": changed_only, "learners": exported.learners,
            "files": [p.name for p in exported.paths], "to": str(folder)}, reason=why)
        store.record_export(gb, assignment, EXPORT_KIND)
    return exported
