"""The ``lessonlib`` command.

    lessonlib exercises build     write exercises/ from solutions/ and execute them
    lessonlib exercises verify    fail when exercises/ is out of date with solutions/
    lessonlib exercises list      the exercises, their points and numbers of cases, and the named assignments
    lessonlib grade SUBMISSION... --out DIR [--roster FILE --assignment NAME]
                                  grade learners' notebooks into a gradebook (and an LMS import file)
    lessonlib gradescope build --notebooks 02_masking.ipynb --out autograder.zip
                                                       the same checks as a Gradescope autograder
    lessonlib override|extend|late-policy|export|history|term-report|similarity ...
                                  an instructor's decisions and reports (see grading/commands.py)

Each command group is a function that adds its subparser (see :data:`COMMAND_GROUPS`), with its
handler stored as ``func``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lessonlib.grading.arguments import positive_number, whole_number
from lessonlib.grading.isolation.sandbox import LEVELS


def _exercise_dirs(args: argparse.Namespace) -> tuple[Path, Path]:
    root = Path(args.root)
    return root / args.solutions, root / args.exercises


def _cmd_build(args: argparse.Namespace) -> int:
    from lessonlib.exercises.build import BuildError, build

    solutions, exercises = _exercise_dirs(args)
    try:
        written = build(solutions, exercises, execute=None if args.no_execute else _executor(args.timeout))
    except BuildError as exc:
        print(f"lessonlib exercises build: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} exercise notebook(s) to {exercises}")
    return 0


def _executor(timeout: int) -> Callable[[Path], None]:
    from lessonlib.notebook_tools import execute_notebook

    return lambda path: execute_notebook(path, timeout=timeout)


def _cmd_verify(args: argparse.Namespace) -> int:
    from lessonlib.exercises.build import verify

    solutions, exercises = _exercise_dirs(args)
    problems = verify(solutions, exercises)
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{exercises} is out of date with {solutions}: run `lessonlib exercises build`",
              file=sys.stderr)
        return 1
    print(f"{exercises} is up to date with {solutions}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from lessonlib.exercises import ASSIGNMENTS, EXERCISES, MANUAL_QUESTIONS

    print(f"{'exercise':30} {'notebook':18} {'points':>6} {'public':>6} {'hidden':>6}  diagnoses")
    for ex in EXERCISES.values():
        names = ", ".join(d.name for d in ex.diagnoses)
        n_public = len(ex.public_cases()) + sum(1 for r in ex.requirements if r.applies(ex.public_cases()))
        print(f"{ex.name:30} {ex.notebook:18} {ex.points:>6g} {n_public:>6} "
              f"{len(ex.hidden_cases(args.seed)):>6}  {names}")
    for q in MANUAL_QUESTIONS.values():
        print(f"{q.name:30} {q.notebook:18} {q.points:>6g} {'manual':>6} {'':>6}  cell id {q.cell_id}")
    print()
    print(f"{'assignment':30} {'items':>24} {'points':>6}  exercises and written questions")
    for assignment in ASSIGNMENTS.values():
        counts = f"{len(assignment.exercises)} exercises, {len(assignment.questions)} written"
        listed = ", ".join(f"{name} {assignment.points_of(name):g}" for name in assignment.items)
        print(f"{assignment.name:30} {counts:>24} {assignment.points:>6g}  {listed}")
    return 0


def add_exercises_commands(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib exercises build|verify|list``."""
    group = subparsers.add_parser("exercises", help="build and verify exercises/ from solutions/")
    commands = group.add_subparsers(dest="exercises_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--root", default=".", help="repository root (default: current directory)")
        p.add_argument("--solutions", default="solutions", help="solutions folder, relative to the root")
        p.add_argument("--exercises", default="exercises", help="exercises folder, relative to the root")

    build = commands.add_parser("build", help="write exercises/ from solutions/ and execute it")
    common(build)
    build.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    build.add_argument("--timeout", type=int, default=120, help="seconds allowed per cell")
    build.set_defaults(func=_cmd_build)

    check = commands.add_parser("verify", help="fail when exercises/ is out of date with solutions/")
    common(check)
    check.set_defaults(func=_cmd_verify)

    listing = commands.add_parser("list", help="the exercises, their points and numbers of cases, and the named "
                                               "assignments with their points")
    listing.add_argument("--seed", type=int, default=0, help="seed for counting hidden cases")
    listing.set_defaults(func=_cmd_list)


def _cmd_grade(args: argparse.Namespace) -> int:
    from lessonlib.grading import GradeSettings, store
    from lessonlib.grading.lms.downloads import DownloadError, check_submissions
    from lessonlib.grading.reports.safe_text import printable
    from lessonlib.grading.store import outputs as course

    settings = GradeSettings(out=Path(args.out), timeout=args.timeout, memory_mb=args.memory,
                             workers=args.workers, seed=args.seed, isolation=args.isolation,
                             notebooks=args.notebooks, timezone=args.timezone, gradebook=args.gradebook)
    try:
        settings.zone()
        check_submissions(args.submissions)
    except (ValueError, DownloadError) as exc:
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


def _grade_into(args: argparse.Namespace, settings: Any, gb: Any) -> int:
    """``lessonlib grade`` with the course gradebook ``gb`` open and locked."""
    from dataclasses import replace

    from lessonlib.grading import GradingError, Interrupted, grade, store, write_gradebook
    from lessonlib.grading.commands import recorded_isolation, run_settings
    from lessonlib.grading.lms.roster import RosterError, read_roster
    from lessonlib.grading.reports.safe_text import printable
    from lessonlib.grading.run.notebooks import assignment_courses
    from lessonlib.grading.run.progress import Progress
    from lessonlib.grading.store import outputs as course
    from lessonlib.grading.store.manual import ManualError, earlier_marks

    notebooks = [c.name for c in assignment_courses(settings.notebooks)]
    settings = replace(settings, seed=course.seed_of(gb, settings.out, notebooks, settings.seed))
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
    settings = replace(settings, timezone=zone_name or None)
    progress = Progress(quiet=args.quiet)
    saver = course.Saver(gb, settings.out, zone_name)
    try:
        batch = grade(args.submissions, settings, reporter=progress, on_result=saver,
                      rekey=course.rekey(gb, roster, zone), saved=course.saved(gb, settings.out, args.regrade),
                      recorded=recorded_isolation(last))
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
                              unattributed=batch.unattributed, roster=roster, marks=marks,
                              notebooks=batch.notebooks, absent_zero=args.absent_zero, applied=True,
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
    graded_by_hand = sum(m.points is not None and not m.earlier for m in marks.values())
    pending = sum(1 for res in results for g in res.exercises if g.status == "needs_manual_grading")
    print(f"written answers: {graded_by_hand} graded in manual.csv, {max(pending - graded_by_hand, 0)} still to grade")
    _print_reviews(saver.reviews, earlier_marks(marks), results, settings.out)
    for item in batch.unattributed:
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
    return 0


def _print_reviews(reviews: list[str], earlier: list[Any], results: list[Any], out: Path) -> None:
    """Say which decisions the run withdrew or suspended, and what is still waiting for the instructor."""
    from lessonlib.grading.reports.safe_text import printable

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


def notebook_list(text: str) -> tuple[str, ...]:
    """``--notebooks a.ipynb,b.ipynb``: the names, checked against the course's."""
    from lessonlib.grading.run.notebooks import assignment_courses

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one notebook name")
    try:
        return tuple(c.name for c in assignment_courses(names))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_grade_command(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib grade SUBMISSION... --out DIR``."""
    grade = subparsers.add_parser(
        "grade", help="grade learners' exercise notebooks into a gradebook and feedback",
        description="Grade exercise notebooks in isolated workers. A SUBMISSION is a notebook, a folder "
                    "per learner, or a folder of such folders. Re-running the same command after an "
                    "interruption grades only what is missing.",
    )
    grade.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION")
    grade.add_argument("--out", required=True, metavar="DIR", help="folder for the gradebook and feedback")
    grade.add_argument("--timeout", type=positive_number, default=10.0, metavar="SECONDS",
                       help="CPU seconds per exercise (the clock allows twice that plus one; default 10)")
    grade.add_argument("--memory", type=whole_number(64), default=1024, metavar="MB",
                       help="memory per exercise (default 1024, at least 64)")
    grade.add_argument("--workers", type=whole_number(1), default=2, metavar="N",
                       help="learners graded at once (default 2)")
    grade.add_argument("--notebooks", type=notebook_list, default=(), metavar="NAMES",
                       help="the assignment: the course notebooks to grade, separated by commas, e.g. "
                            "02_masking.ipynb,04_cost.ipynb (default: all of them)")
    grade.add_argument("--seed", type=int, default=None, metavar="S",
                       help="seed of the hidden cases (default: a secret one drawn at random when the output "
                            "folder is first graded, and kept there for every later run)")
    grade.add_argument("--isolation", default="auto", choices=["auto", *LEVELS],
                       help="bubblewrap: a sandbox (needs bwrap); limits: resource limits only, with a warning, "
                            "for root alone (learner code runs as nobody) (default auto: bubblewrap where a trial "
                            "sandbox works, else limits)")
    grade.add_argument("--roster", type=Path, metavar="FILE",
                       help="a Canvas gradebook export or a Moodle grading worksheet: write DIR/lms-import.csv "
                            "in the same format, for the LMS to import")
    grade.add_argument("--assignment", metavar="NAME",
                       help="the Canvas assignment column to fill, by its title as Canvas shows it (\"Week 2\" finds "
                            "\"Week 2: Masking (51002)\"; the id alone works too)")
    grade.add_argument("--new-column", action="store_true",
                       help="with --assignment: create a new Canvas column of that name (Canvas adds it on import) "
                            "instead of filling an existing one")
    grade.add_argument("--absent-zero", action="store_true",
                       help="give roster learners with no submission 0 in lms-import.csv (default: leave their "
                            "grade in the LMS as it is)")
    grade.add_argument("--timezone", metavar="ZONE",
                       help="the time zone of the LMS's local times (zip entries, Moodle's worksheet), e.g. "
                            "Europe/Berlin: given once, it is stored in the course gradebook for every later run "
                            "(`lessonlib timezone` changes it)")
    grade.add_argument("--gradebook", type=Path, metavar="FILE",
                       help="the course gradebook, one SQLite file for every assignment of the course (default: "
                            "gradebook.db beside DIR); DIR's folder name names the assignment")
    grade.add_argument("--wait", action="store_true",
                       help="when another grader holds the course gradebook, wait for it instead of stopping")
    grade.add_argument("--partial-grades", action="store_true",
                       help="give learners whose written answers are still to grade their points so far in "
                            "lms-import.csv (default: no grade until the hand grading is done)")
    grade.add_argument("--regrade", action="append", default=[], metavar="LEARNER",
                       help="grade this learner (their key) again even though their files have not changed; repeat "
                            "for several")
    grade.add_argument("--quiet", action="store_true", help="no progress display")
    grade.set_defaults(func=_cmd_grade)


def _cmd_gradescope_build(args: argparse.Namespace) -> int:
    from lessonlib.grading.gradescope.autograder import GradescopeError, build_autograder

    try:
        notebooks = [n.strip() for n in (args.notebooks or "").split(",") if n.strip()]
        path = build_autograder(Path(args.out), notebooks, args.seed, args.hidden_visibility)
    except GradescopeError as exc:
        print(f"lessonlib gradescope build: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}: upload it as the assignment's autograder (Configure Autograder, Zip file upload)")
    return 0


def _cmd_gradescope_run(args: argparse.Namespace) -> int:
    from lessonlib.grading.gradescope.autograder import run_autograder

    results = run_autograder(Path(args.root), timeout=args.timeout, memory_mb=args.memory, isolation=args.isolation)
    print(f"wrote {results}")
    return 0


def add_gradescope_commands(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib gradescope build|run``."""
    from lessonlib.grading.gradescope.autograder import HIDDEN_VISIBILITIES

    group = subparsers.add_parser("gradescope", help="the checks as a Gradescope autograder")
    commands = group.add_subparsers(dest="gradescope_command", required=True)
    build = commands.add_parser("build", help="write the autograder zip (setup.sh, run_autograder, the wheel, "
                                              "the assignment's notebooks and seed)")
    build.add_argument("--out", default="autograder.zip", metavar="ZIP", help="the zip to write")
    build.add_argument("--notebooks", metavar="NAMES", help="the assignment: course notebooks to grade, comma-"
                                                           "separated (default: all of them)")
    build.add_argument("--seed", type=int, default=None, metavar="S",
                       help="seed of the hidden cases (default: a secret one drawn at random, kept only in the zip)")
    build.add_argument("--hidden-visibility", default="after_due_date", choices=HIDDEN_VISIBILITIES,
                       help="when learners see how many hidden cases passed, and their points: Gradescope's "
                            "visibility of each exercise's hidden part (default after_due_date; its public "
                            "part is always visible)")
    build.set_defaults(func=_cmd_gradescope_build)
    run = commands.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json (run_autograder "
                                          "calls this inside Gradescope)")
    run.add_argument("--root", default="/autograder", metavar="DIR", help="Gradescope's folder (default /autograder)")
    run.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="CPU seconds per exercise")
    run.add_argument("--memory", type=int, default=1024, metavar="MB", help="memory per exercise")
    run.add_argument("--isolation", default="auto", choices=["auto", *LEVELS],
                     help="default auto: bubblewrap where a trial sandbox works, else limits (as nobody, for root)")
    run.set_defaults(func=_cmd_gradescope_run)


# One entry per command group.
def add_course_commands(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib override|extend|late-policy|export|history|term-report|similarity`` (grading/commands.py)."""
    from lessonlib.grading.commands import add_course_commands as add

    add(subparsers)


COMMAND_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_exercises_commands, add_grade_command, add_gradescope_commands, add_course_commands,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lessonlib", description="Course tools for 'Attention, masks, and position'.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add_group in COMMAND_GROUPS:
        add_group(subparsers)
    return parser


# Imported only by maintainers' commands (building exercises/, executing notebooks); a plain
# `pip install lessonlib` into a learner's kernel leaves them out.
MAINTAINER_MODULES = frozenset({"nbformat", "nbclient"})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except OSError as exc:  # a full disk, a read-only folder: one line, never a traceback
        from lessonlib.grading.files import os_error_line

        print(f"lessonlib {args.command}: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name not in MAINTAINER_MODULES:
            raise
        print(f"lessonlib: this command needs {exc.name}, which a plain install of the package does not "
              "bring (learners never need it). Install the maintainers' extras into this environment: "
              "pip install -e '.[lab,test]' from a clone of the repository, as `make test` does.",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
