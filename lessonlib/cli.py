"""The ``lessonlib`` command.

    lessonlib exercises build     write exercises/ from solutions/ and execute them
    lessonlib exercises verify    fail when exercises/ is out of date with solutions/
    lessonlib exercises list      the exercises, their points and numbers of cases, and the named assignments
    lessonlib grade SUBMISSION... --out DIR [--roster FILE --assignment NAME]
                                  grade learners' notebooks into a gradebook (and an LMS import file)
    lessonlib gradescope build --notebooks 02_masking.ipynb --out autograder.zip
                                                       the same checks as a Gradescope autograder
    lessonlib override|extend|late-policy|export|history|term-report|similarity ...
                                  an instructor's decisions and reports (see grading/app/commands.py)

This module only parses: each command group is a function that adds its subparser (see
:data:`COMMAND_GROUPS`), with its handler stored as ``func``. The exercises' commands are here; every
grading command is carried out by the grader's application room, ``lessonlib.grading.app``, imported
only when that command runs: a learner's install (no ``grade`` extra) never needs it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lessonlib.grading.arguments import positive_number, whole_number
from lessonlib.grading.isolation.sandbox import LEVELS

# What `pip install "lessonlib[grade]"` adds, and what for: a learner's install has none of it, so the
# grading commands check for it before they import the grader.
GRADER_MODULES = {"pyseccomp": "the seccomp filter around learner code", "copydetect": "the similarity report"}
GRADE_INSTALL = 'pip install "lessonlib[grade]"'


def missing_grader() -> list[str]:
    """The grader's dependencies this environment lacks (empty: the grade extra is installed)."""
    return [name for name in GRADER_MODULES if importlib.util.find_spec(name) is None]


def _app(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of ``lessonlib.grading.app.<module>``, imported when it runs, once the
    grader's dependencies are known to be there (else one line saying what to install, status 1)."""
    def run(args: argparse.Namespace) -> int:
        missing = missing_grader()
        if missing:
            print(f"lessonlib {args.command}: the grader is not installed in this environment (it lacks "
                  f"{', '.join(missing)}); install it with {GRADE_INSTALL}, or pip install -e '.[grade]' in a "
                  "clone of the course", file=sys.stderr)
            return 1
        return int(getattr(importlib.import_module(f"lessonlib.grading.app.{module}"), name)(args) or 0)
    return run


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


def notebook_list(text: str) -> tuple[str, ...]:
    """``--notebooks a.ipynb,b.ipynb``: the names, checked against the course's."""
    from lessonlib.grading.notebooks import assignment_courses

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one notebook name")
    try:
        return tuple(c.name for c in assignment_courses(names))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_exercise_set_option(parser: argparse.ArgumentParser) -> None:
    """``--exercise-set NAME``: a named assignment of the registry, for ``grade`` and ``gradescope build``."""
    from lessonlib.exercises import ASSIGNMENTS

    parser.add_argument("--exercise-set", choices=list(ASSIGNMENTS), metavar="NAME",
                        help=f"the assignment: a named set of exercises and written questions from several "
                             f"notebooks ({', '.join(ASSIGNMENTS)}; `lessonlib exercises list` shows each with its "
                             "points); only these are graded, counted and shown. Instead of --notebooks")


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
    add_exercise_set_option(grade)
    grade.add_argument("--seed", type=int, default=None, metavar="S",
                       help="seed of the hidden cases (default: a secret one drawn at random when the assignment "
                            "is first graded, and kept in the course gradebook for every later run)")
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
    grade.set_defaults(func=_app("grade", "grade"))


def add_gradescope_commands(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib gradescope build|run``."""
    from lessonlib.grading.gradescope import HIDDEN_VISIBILITIES

    group = subparsers.add_parser("gradescope", help="the checks as a Gradescope autograder")
    commands = group.add_subparsers(dest="gradescope_command", required=True)
    build = commands.add_parser("build", help="write the autograder zip (setup.sh, run_autograder, the wheel, "
                                              "the assignment's notebooks and seed)")
    build.add_argument("--out", default="autograder.zip", metavar="ZIP", help="the zip to write")
    build.add_argument("--notebooks", metavar="NAMES", help="the assignment: course notebooks to grade, comma-"
                                                           "separated (default: all of them)")
    add_exercise_set_option(build)
    build.add_argument("--seed", type=int, default=None, metavar="S",
                       help="seed of the hidden cases (default: a secret one drawn at random, kept only in the zip)")
    build.add_argument("--hidden-visibility", default="after_due_date", choices=HIDDEN_VISIBILITIES,
                       help="when learners see how many hidden cases passed, and their points: Gradescope's "
                            "visibility of each exercise's hidden part (default after_due_date; its public "
                            "part is always visible)")
    build.set_defaults(func=_app("commands", "gradescope_build"))
    run = commands.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json (run_autograder "
                                          "calls this inside Gradescope)")
    run.add_argument("--root", default="/autograder", metavar="DIR", help="Gradescope's folder (default /autograder)")
    run.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="CPU seconds per exercise")
    run.add_argument("--memory", type=int, default=1024, metavar="MB", help="memory per exercise")
    run.add_argument("--isolation", default="auto", choices=["auto", *LEVELS],
                     help="default auto: bubblewrap where a trial sandbox works, else limits (as nobody, for root)")
    run.set_defaults(func=_app("commands", "gradescope_run"))


# One entry per command group.
def add_course_commands(subparsers: argparse._SubParsersAction) -> None:
    """``lessonlib override|extend|submission-time|late-policy|timezone|restore|export|history|term-report|
    similarity``: each on one assignment's output folder (or the course gradebook); ``grading/app/commands.py``
    carries them out."""
    from lessonlib.grading.arguments import fraction, points, when

    def command(name: str, help: str, func: Any, *, out: bool = True) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, help=help, description=help)
        if out:
            parser.add_argument("--out", required=True, metavar="DIR", help="the assignment's output folder")
        parser.add_argument("--gradebook", type=Path, metavar="FILE",
                            help="the course gradebook (default: gradebook.db beside DIR)")
        parser.set_defaults(func=func)
        return parser

    p = command("override", "replace one exercise's score for one learner, with a reason", _app("commands", "override"))
    p.add_argument("learner")
    p.add_argument("exercise")
    p.add_argument("points", type=points, nargs="?", default=None)
    p.add_argument("--reason", required=True, help="why (recorded, and shown to the learner in the feedback)")
    keep_or_clear = p.add_mutually_exclusive_group()
    keep_or_clear.add_argument("--clear", action="store_true", help="undo the override (the graded score counts again)")
    keep_or_clear.add_argument("--keep", action="store_true",
                               help="keep an override the run suspended (the answer changed) for the answer graded now")
    p = command("extend", "give one learner a due date of their own, with a reason", _app("commands", "extend"))
    p.add_argument("learner")
    p.add_argument("--due", type=when, metavar="WHEN")
    p.add_argument("--keep", action="store_true", help="keep a flagged extension (the submission time changed)")
    p.add_argument("--clear", action="store_true", help="remove the extension (the assignment's due date applies)")
    p.add_argument("--reason", required=True)
    p = command("submission-time", "correct when one learner handed in (it outranks the LMS's times), with a reason",
                _app("commands", "submission_time"))
    p.add_argument("learner")
    p.add_argument("when", type=when, metavar="WHEN", help="ISO 8601 with its offset, such as 2026-03-16T23:10+01:00")
    p.add_argument("--reason", required=True)
    p = command("late-policy", "the assignment's due date and late policy", _app("commands", "late_policy"))
    p.add_argument("--due", type=when, metavar="WHEN")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--per-day", type=fraction, metavar="F",
                     help="deduct F of the assignment's points possible per started day late")
    how.add_argument("--zero", action="store_true", help="late work gets 0")
    how.add_argument("--none", action="store_true", help="no deduction (the default)")
    p.add_argument("--floor", type=fraction, default=0.0, metavar="F",
                   help="with --per-day: no deduction takes a score below F of the assignment's points possible")
    p = command("timezone", "show, set or change the course's time zone (changing it reads every stored LMS time "
                            "again)", _app("commands", "timezone"))
    p.add_argument("zone", nargs="?", metavar="ZONE", help="an IANA name such as Europe/Berlin")
    p.add_argument("--reason", help="why it changes (kept in the history)")
    p = command("restore", "put a backup of the course gradebook back (the file it replaces is kept aside)",
                _app("commands", "restore"), out=False)
    p.add_argument("--out", metavar="DIR", help="an assignment's output folder (the gradebook beside it)")
    p.add_argument("--backup", type=Path, metavar="FILE", help="the backup to restore (default: the newest that "
                                                               "passes every check)")
    p.add_argument("--list", action="store_true", help="list the backups, newest first, and change nothing")
    p = command("export", "the LMS files to upload (lms-import.csv, feedback zips) into a folder of their own",
                _app("commands", "export"))
    p.add_argument("--to", required=True, metavar="FOLDER", help="where to write them (created if missing)")
    p.add_argument("--changed-only", action="store_true",
                   help="only the learners whose grade or feedback changed since the last export")
    p.add_argument("--absent-zero", action="store_true", help="roster learners with no submission get 0")
    p.add_argument("--partial-grades", action="store_true",
                   help="learners with written answers still to grade get their points so far")
    p = command("history", "every recorded change of the assignment (or of one learner), oldest first",
                _app("commands", "history"))
    p.add_argument("learner", nargs="?")
    p = command("term-report", "the course's term report: misconceptions that persist, sections to reteach, who "
                               "needs help", _app("commands", "term_report"), out=False)
    p.add_argument("--to", required=True, metavar="PATH", help="the HTML file (or a folder) to write")
    p = command("similarity", "near-identical answers between learners, and answers copied from the course",
                _app("commands", "similarity"))
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                   help="learners' notebooks, folders or the LMS's download zips; give every section's to compare "
                        "them in one report")
    p.add_argument("--also", action="append", default=[], metavar="DIR",
                   help="another section's output folder of the same assignment: its identical files are compared "
                        "too (repeat for each section)")


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
