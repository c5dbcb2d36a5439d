"""An output folder and its course gradebook: where the database is, which assignment a folder
is, and the files of an assignment written from the database.

``lessonlib grade SUBMISSION... --out DIR`` grades one assignment, named after ``DIR`` (its folder
name), into the course gradebook ``gradebook.db`` beside ``DIR`` (``--gradebook FILE`` names
another): one database for every assignment of the course, so a course folder holding
``grades-week2/`` and ``grades-week5/`` has one ``gradebook.db``. The run holds the gradebook's
lock from start to end (a second grader stops, naming the first, or waits with ``--wait``).

Every file in ``DIR`` (grades.csv, summary.csv, grades.json, manual.csv, feedback, the LMS files,
the class report) is written from the database and covers every learner of the assignment, from
every run into it: a late-submissions folder graded into ``DIR`` adds its learners and rewrites
the files for all of them. Hand grades from manual.csv, overrides, extensions and the late
policy are decisions recorded in the database, each with a history row.

An output folder graded before the gradebook existed (``DIR/.grading/state.json``) is imported
the first time it is graded again, with its seed, saved results and manual.csv. Nothing of the
gradebook's state is kept in files any more: the seed, the results and their fingerprints, the
roster and the settings of the last run live in the database alone, and ``grades.json`` is a view
that nothing reads back. An output folder holding grades whose gradebook is missing is refused.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any

from lessonlib.grading import records as r
from lessonlib.grading import store
from lessonlib.grading.app.importer import import_output_folder
from lessonlib.grading.learners import Learner
from lessonlib.grading.lms.roster import Roster, mark_late, match
from lessonlib.grading.lms.times import stamp_worksheet_times
from lessonlib.grading.notebooks import Scope
from lessonlib.grading.reports.manual import MANUAL_FILE, Mark, read_manual
from lessonlib.grading.store.errors import DamagedGradebook


def gradebook_path(out: Path, given: Path | None = None) -> Path:
    """The course gradebook of output folder ``out``: ``given``, else ``gradebook.db`` beside ``out``."""
    return Path(given) if given is not None else Path(out).resolve().parent / store.GRADEBOOK_FILE


def assignment_name(out: Path) -> str:
    """The assignment an output folder holds: the folder's own name."""
    return Path(out).resolve().name


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as typed, for the lock and every history row."""
    return shlex.join(["lessonlib", *(sys.argv[1:] if argv is None else argv)])


@contextmanager
def open_course(out: Path, *, gradebook: Path | None = None, command: str = "", wait: bool = False,
                lock: bool = True) -> Iterator[store.Gradebook]:
    """The course gradebook of ``out``, locked for this command (``lock=False``: read only). An output
    folder graded before the gradebook existed is imported into it first."""
    path = gradebook_path(out, gradebook)
    if not path.exists() and (Path(out) / "grades.json").is_file() and not _old_folder(out):
        raise DamagedGradebook(f"{out} holds grades (grades.json) but its course gradebook {path} is missing: restore "
                               f"it (`lessonlib restore --gradebook {path}` when its backups are beside it), or give "
                               "its place with --gradebook FILE; a new gradebook would start the assignment again")
    with store.open_gradebook(path, command or command_line(), lock=lock, wait=wait) as gb:
        if lock and _unimported(gb, out):
            import_output_folder(gb, out, assignment=assignment_name(out))
        yield gb


def _old_folder(out: Path) -> bool:
    """``out`` was written by the file-based grader (before the course gradebook)."""
    return (Path(out) / ".grading" / "state.json").is_file()


def _unimported(gb: store.Gradebook, out: Path) -> bool:
    """``out`` holds grades of the file-based grader that the gradebook does not have yet."""
    if not _old_folder(out):
        return False
    try:
        store.get_assignment(gb, assignment_name(out))
    except store.StoreError:
        return True
    return False


def seed_of(gb: store.Gradebook, out: Path, scope: Scope, requested: int | None) -> int:
    """The assignment's secret seed: the stored one, else ``requested``, else drawn now and stored with
    what the assignment grades (``scope``; a stored assignment must grade the same)."""
    return store.ensure_assignment(gb, assignment_name(out), scope.notebooks, seed=requested,
                                   exercises=scope.items).seed


def scope(gb: store.Gradebook, out: Path) -> Scope:
    """What the assignment of ``out`` grades, as the gradebook recorded it when it was first graded."""
    assignment = store.get_assignment(gb, assignment_name(out))
    return Scope(assignment.notebooks, assignment.exercises)


def rekey(gb: store.Gradebook, roster: Roster | None = None,
          zone: tzinfo | None = None) -> Callable[[list[Learner]], list[Learner]]:
    """Stored keys for the learners a run found (a key once given never changes or moves), late
    where the roster says so (Moodle's Status column; Canvas says it in the file names), and the
    submission time of Moodle's worksheet where it has one (read in ``zone``)."""
    def keyed(learners: list[Learner]) -> list[Learner]:
        learners = store.assign_stored_keys(gb, learners)
        if roster is not None:
            mark_late(learners, roster)
            stamp_worksheet_times(learners, roster.submission_times(zone))
        return learners
    return keyed


def enrol_roster(gb: store.Gradebook, out: Path, roster: Roster, results: Sequence[r.LearnerResult]) -> list[str]:
    """Enrol every learner of ``roster`` in the assignment of ``out``: those with a submission under
    their key, those without one registered first (as the LMS names them), so the term report knows
    whom each section's assignment expects. Nothing is graded for them (``--absent-zero`` only fills
    lms-import.csv). Returns the keys newly enrolled."""
    keys = []
    for row, res in match(roster, results).pairs:
        if res is not None:
            keys.append(res.key)
        else:
            keys.append(store.register(gb, roster.learner_name(row).strip(), lms_id=roster.learner_id(row)).key)
    return store.enrol(gb, assignment_name(out), keys)


@dataclass
class Saver:
    """Saves one learner's result, with its submission, in one transaction; a result the gradebook
    already holds (the same fingerprint: the same files and seed) is not written again, but its
    submission time and late flag are updated when the run knows them better (Moodle's worksheet,
    given later). ``reviews`` collects, for the instructor, the decisions a regrade withdrew or
    suspended (``marks.review_decisions``)."""

    gb: store.Gradebook
    out: Path
    zone: str = ""  # the course's time zone, which local times were read in
    reviews: list[str] = field(default_factory=list)

    def __call__(self, result: r.LearnerResult, learner: Learner) -> None:
        name = assignment_name(self.out)
        if not result.fingerprint or store.saved_fingerprint(self.gb, name, result.key) != result.fingerprint:
            said = store.save_learner_result(self.gb, name, learner, result, read_in=self.zone)
            self.reviews += [f"{result.key} / {line}" for line in said]
        else:  # the same files: a better-sourced time may have come
            store.update_submission_time(self.gb, name, learner.key, learner.submitted_at, learner.submitted_from,
                                         lms_late=learner.late, read_in=self.zone)


def saved(gb: store.Gradebook, out: Path, regrade: Sequence[str] = ()) -> Callable[[Learner, str],
                                                                                  r.LearnerResult | None]:
    """The stored result of a learner when it was graded from ``fingerprint`` (the same files and
    seed), else None: what a run resumes from. The learners ``regrade`` names are graded again (the
    markers a dead grader left for them are dropped first)."""
    name = assignment_name(out)
    for key in regrade:
        gb.learner_id(key)  # an unknown key: StoreError naming it
        shutil.rmtree(Path(out) / ".grading" / "work" / key, ignore_errors=True)

    def lookup(learner: Learner, fingerprint: str) -> r.LearnerResult | None:
        if learner.key in regrade or store.saved_fingerprint(gb, name, learner.key) != fingerprint:
            return None
        return store.graded_result(gb, name, learner.key)
    return lookup


def apply_manual(gb: store.Gradebook, out: Path) -> dict[tuple[str, str], Mark]:
    """manual.csv's marks recorded as hand grades (each change with a history row). Raises
    ManualError, naming every bad line, before anything is recorded. A row typed beside an earlier
    version of the answer, or beside one the grader failed to read, is not applied (``manual.py``)."""
    name = assignment_name(out)
    marks = read_manual(Path(out) / MANUAL_FILE, store.learner_results(gb, name))
    with gb.transaction():
        for (key, exercise), mark in marks.items():
            if mark.applies:
                store.set_hand_grade(gb, name, key, exercise, mark.points, rubric=mark.rubric, comment=mark.comment)
    return marks


def results(gb: store.Gradebook, out: Path) -> list[r.LearnerResult]:
    """Every learner of the assignment, from every run, with hand grades, overrides and the late
    policy applied."""
    return store.learner_results(gb, assignment_name(out))


def last_run(gb: store.Gradebook, out: Path) -> dict[str, Any]:
    """What the last run that graded ``out`` ran under: isolation, limits, workers, roster ({} before any)."""
    return store.get_assignment(gb, assignment_name(out)).last_run
