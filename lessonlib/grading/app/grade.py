"""``lessonlib grade``: open the course gradebook, find the learners, grade them, record every
result and decision, and write the assignment's files from the gradebook.

The run, in order: the options are checked (the time zone, what the assignment grades, the
submissions) before anything is written; the gradebook is opened and locked (an output folder of
the file-based grader is imported first); the assignment's seed is the stored one (or drawn and
stored); the roster is read; the learners are found in the submissions (``lms``), each graded
(``run``) and saved the moment their result is known; manual.csv's marks are recorded; and every
file is written from the gradebook (``reports``), covering every learner of the assignment.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from lessonlib.grading import store
from lessonlib.grading.app import course
from lessonlib.grading.app.commands import recorded_isolation, run_settings
from lessonlib.grading.files import owner_only
from lessonlib.grading.lms.downloads import DownloadError, check_submissions, find_learners
from lessonlib.grading.lms.roster import RosterError, read_roster
from lessonlib.grading.notebooks import course_notebooks
from lessonlib.grading.reports.gradebook import write_gradebook
from lessonlib.grading.reports.manual import ManualError, earlier_marks
from lessonlib.grading.run.batch import GradeSettings, work_folder
from lessonlib.grading.run.batch import grade as grade_batch
from lessonlib.grading.run.errors import GradingError, Interrupted
from lessonlib.grading.run.progress import Progress
from lessonlib.grading.safe_text import printable
from lessonlib.grading.zones import zone_of


def grade(args: argparse.Namespace) -> int:
    """``lessonlib grade SUBMISSION... --out DIR``: its options are checked before anything is written."""
    settings = GradeSettings(out=Path(args.out), timeout=args.timeout, memory_mb=args.memory,
                             workers=args.workers, seed=args.seed, isolation=args.isolation,
                             notebooks=args.notebooks, exercise_set=args.exercise_set,
                             gradebook=course.gradebook_path(Path(args.out), args.gradebook))
    try:
        zone_of(args.timezone)
        settings.scope()
        check_submissions(args.submissions)
    except (ValueError, DownloadError, GradingError) as exc:
        print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
        return 2
    try:
        with course.open_course(settings.out, gradebook=args.gradebook, wait=args.wait) as gb:
            return _grade_into(args, settings, gb)
    except store.GradebookError as exc:
        print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
        return 2


def _roster_of(args: argparse.Namespace, last: dict[str, Any]) -> tuple[Path | None, str | None, bool]:
    """The roster file, its assignment column and whether to create it: given, else the previous run's."""
    if args.roster is not None:
        return args.roster, args.assignment, args.new_column
    saved = last.get("roster") or {}
    if saved:
        print(f"using the roster of the previous run: {saved['file']}" + (f" ({saved['column']})" if saved.get("column")
                                                                            else ""))
        return Path(saved["file"]), saved.get("column"), bool(saved.get("new_column"))
    return None, None, False


def _grade_into(args: argparse.Namespace, settings: GradeSettings, gb: store.Gradebook) -> int:
    """``lessonlib grade`` with the course gradebook ``gb`` open and locked."""
    settings = replace(settings, seed=course.seed_of(gb, settings.out, settings.scope(), settings.seed))
    name = course.assignment_name(settings.out)
    last = store.get_assignment(gb, name).last_run
    if args.roster is None and (args.assignment is not None or args.new_column):
        print("lessonlib grade: --assignment and --new-column name a column of the --roster file; give --roster too",
              file=sys.stderr)
        return 2
    roster_path, column, new_column = _roster_of(args, last)
    roster = None
    if roster_path is not None:
        try:
            roster = read_roster(roster_path, column, new_column=new_column)
        except RosterError as exc:  # it may quote the roster's columns
            print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
            return 2
    needed = any(Path(s).suffix.lower() == ".zip" for s in args.submissions) or (
        roster is not None and roster.has_times())
    zone, zone_name = store.course_zone(gb, args.timezone, needed=needed,
                                        change=f"lessonlib timezone --out {settings.out}")
    unpacked = work_folder(settings.out) / "unpacked"
    unpacked.parent.mkdir(parents=True, exist_ok=True)
    owner_only(settings.out)  # the instructor's alone before anything a learner handed in is unpacked there
    try:
        found = find_learners(args.submissions, course_notebooks(), unpack_to=unpacked, zone=zone)  # a .zip: unpacked
    except (FileNotFoundError, DownloadError) as exc:
        print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
        return 2
    progress = Progress(quiet=args.quiet)
    saver = course.Saver(gb, settings.out, zone_name)
    try:
        batch = grade_batch(found.learners, settings, submissions=args.submissions, reporter=progress,
                            on_result=saver, rekey=course.rekey(gb, roster, zone),
                            saved=course.saved(gb, settings.out, args.regrade), recorded=recorded_isolation(last))
    except GradingError as exc:
        progress.close()
        print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
        return 2
    except Interrupted:
        progress.close()
        print("lessonlib grade: interrupted; every saved result is kept: run the same command again to "
              "grade the rest", file=sys.stderr)
        return 130
    progress.close()
    try:
        marks = course.apply_manual(gb, settings.out)
    except ManualError as exc:
        print(f"lessonlib grade: {printable(exc)}", file=sys.stderr)
        print("lessonlib grade: nothing was rewritten (every automatic grade is saved); correct manual.csv and "
              "run the same command again", file=sys.stderr)
        return 2
    results = course.results(gb, settings.out)  # every learner of the assignment, from every run
    if roster is not None:  # whom this assignment expects: its roster's learners, submitted or not
        course.enrol_roster(gb, settings.out, roster, results)
    store.record_run(gb, name, run_settings(batch.isolation, settings.limits(), settings.workers, roster,
                                                   column))
    written = write_gradebook(settings.out, results, batch.isolation, settings.limits(), settings.workers,
                              unattributed=found.unattributed, roster=roster, marks=marks,
                              scope=batch.scope, absent_zero=args.absent_zero, applied=True,
                              partial_grades=args.partial_grades, secret=store.marking_secret(gb))
    flagged = sum(len(res.flagged) for res in results)
    print(f"graded {batch.graded} learner(s) in {batch.seconds:.1f} s ({len(batch.results) - batch.graded} "
          f"already saved; {len(results)} in the assignment {name!r}); "
          f"isolation: {batch.isolation.level}; {flagged} exercise(s) flagged for a look")
    print(f"wrote {settings.out / 'grades.csv'}, summary.csv, grades.json, manual.csv, class-report.html (what the "
          f"class got wrong) and {len(written.feedback)} feedback file(s) in {settings.out / 'feedback'} "
          "(Markdown and HTML)")
    for path in written.uploads:
        print(f"wrote {path} (feedback to upload to the LMS; see the instructor's guide)")
    graded_by_hand = sum(m.points is not None and m.applies for m in marks.values())
    pending = sum(1 for res in results for g in res.exercises if g.status == "needs_manual_grading")
    print(f"written answers: {graded_by_hand} graded in manual.csv, {max(pending - graded_by_hand, 0)} still to grade")
    _print_reviews(saver.reviews, earlier_marks(marks), results, settings.out)
    for item in found.unattributed:
        print(printable(f"not attributed to any learner: {item.path} ({item.reason})"), file=sys.stderr)
    if roster is not None:
        column_words = f"new column {roster.column!r}" if roster.new_column else f"column {roster.column!r}"
        print(f"wrote {settings.out / 'lms-import.csv'} for {roster.kind.capitalize()} ({column_words})")
        for note in roster.notes:
            print(printable(f"note: {note}"))
        for learner in written.missing:
            kept = "0 points" if args.absent_zero else "their grade in the LMS is left as it is; --absent-zero gives 0"
            print(printable(f"missing: {learner} is in the roster but handed nothing in ({kept})"))
        for warning in written.warnings:
            print(printable(f"warning: {warning}"), file=sys.stderr)
        for key in written.not_in_roster:
            print(printable(f"not in the roster: {key} (graded, but not in lms-import.csv)"), file=sys.stderr)
    failed = [res.key for res in results if res.grader_failed]
    if failed:
        print(printable(f"lessonlib grade: the grader failed on {len(failed)} learner(s)' submission "
                        f"({', '.join(failed)}): grades.csv says why, nothing of it counts yet and lms-import.csv "
                        "leaves them out; run the same command again to grade them (please report a failure that "
                        "repeats)"), file=sys.stderr)
        return 1
    return 0


def _print_reviews(reviews: list[str], earlier: list[Any], results: list[Any], out: Path) -> None:
    """Say which decisions the run withdrew or suspended, and what is still waiting for the instructor."""
    for line in reviews:
        print(printable(f"review: {line}"))
    for mark in earlier:
        print(printable(f"review: manual.csv line {mark.line} ({mark.learner} / {mark.exercise}) was filled in for an "
                        "earlier answer and was not applied: grade the new one"))
    waiting = [(res.key, g.exercise) for res in results for g in res.undecided]
    extensions = [(res.key, line) for res in results for line in res.review]
    if waiting:
        shown = ", ".join(f"{key} / {exercise}" for key, exercise in waiting)
        print(printable(f"waiting for you: {len(waiting)} override(s) given for an answer since replaced ({shown}); "
                        f"lessonlib override --out {out} LEARNER EXERCISE --keep --reason TEXT keeps one, --clear "
                        "--reason TEXT removes it; until then the graded points count and lms-import.csv leaves "
                        "the learner out"))
    for key, line in extensions:
        print(printable(f"waiting for you: {key}'s {line} (lessonlib extend --out {out} {key} --keep or --clear, "
                        "with --reason)"))
