"""The instructor's decisions on an assignment, recorded in the course gradebook with a reason:

    lessonlib override --out DIR LEARNER EXERCISE POINTS --reason TEXT   replace a score (--clear: undo)
    lessonlib extend --out DIR LEARNER --due WHEN --reason TEXT          a learner's own due date
    lessonlib late-policy --out DIR --due WHEN [--per-day F --floor F | --zero | --none] [--lms-points N]
    lessonlib export --out DIR --to FOLDER [--changed-only]              the LMS files: everyone, or what changed
    lessonlib history --out DIR [LEARNER]                                 every recorded change, oldest first
    lessonlib term-report [--gradebook FILE] --to PATH                   the course's term report
    lessonlib similarity SUBMISSION... --out DIR                          near-identical answers, for a look

Each decision adds a history row and then rewrites DIR's files from the gradebook (no learner
code runs), so feedback, summary.csv and the LMS files show it at once. WHEN is an ISO 8601
date and time with its time zone (``2026-03-14T23:59+01:00``).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from lessonlib.grading import store
from lessonlib.grading.reports.safe_text import printable
from lessonlib.grading.store import outputs as course


def _when(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date and time, such as "
                                         "2026-03-14T23:59+01:00") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add one, such as +00:00 or +01:00")
    return when


def rewrite(gb: store.Gradebook, out: Path) -> None:
    """Every file of DIR, from the gradebook, as the last ``lessonlib grade`` wrote them (its isolation
    and roster); nothing is graded again."""
    from lessonlib.grading import write_gradebook
    from lessonlib.grading.files import read_json
    from lessonlib.grading.isolation.sandbox import Isolation, Limits
    from lessonlib.grading.lms.roster import read_roster

    recorded = course.recorded_isolation(out)
    if recorded is None:
        print(f"recorded; {out} has no grades.json yet, so its files are written by the next `lessonlib grade`")
        return
    isolation = Isolation(**{k: v for k, v in recorded.items() if k in Isolation.__dataclass_fields__})
    data = read_json(out / "grades.json")
    ran = data.get("limits", {})
    limits = Limits(cpu_seconds=ran.get("cpu_seconds", Limits.cpu_seconds),
                    memory_mb=ran.get("memory_mb", Limits.memory_mb))
    remembered = read_json(out / ".grading" / "roster.json")
    roster = read_roster(Path(remembered["roster"]), remembered.get("assignment")) if remembered else None
    notebooks = store.get_assignment(gb, course.assignment_name(out)).notebooks
    marks = course.apply_manual(gb, out)
    write_gradebook(out, course.results(gb, out), isolation, limits, int(data.get("workers", 1)), roster=roster,
                    marks=marks, notebooks=notebooks, applied=True)
    print(f"rewrote the files of {out} from the gradebook")


def _decide(args: argparse.Namespace, decision: Any) -> int:
    out = Path(args.out)
    try:
        with course.open_course(out, gradebook=args.gradebook) as gb:
            decision(gb, course.assignment_name(out))
            rewrite(gb, out)
    except (store.GradebookError, ValueError) as exc:
        print(f"lessonlib {args.command}: {printable(exc)}", file=sys.stderr)
        return 2
    return 0


def _cmd_override(args: argparse.Namespace) -> int:
    def decide(gb: store.Gradebook, name: str) -> None:
        if args.clear:
            store.clear_override(gb, name, args.learner, args.exercise, args.reason)
        else:
            store.set_override(gb, name, args.learner, args.exercise, args.points, args.reason)
    return _decide(args, decide)


def _cmd_extend(args: argparse.Namespace) -> int:
    return _decide(args, lambda gb, name: store.grant_extension(gb, name, args.learner, args.due, args.reason))


def _cmd_late_policy(args: argparse.Namespace) -> int:
    policy = (store.LatePolicy("zero") if args.zero else store.LatePolicy("per_day", args.per_day, args.floor)
              if args.per_day is not None else store.LatePolicy("none"))
    return _decide(args, lambda gb, name: store.set_late_policy(gb, name, due_at=args.due, policy=policy,
                                                                lms_points=args.lms_points))


def _cmd_export(args: argparse.Namespace) -> int:
    from lessonlib.grading.files import read_json
    from lessonlib.grading.lms.roster import RosterError, read_roster
    from lessonlib.grading.reports.exports import export_for_lms

    out = Path(args.out)
    remembered = read_json(out / ".grading" / "roster.json")
    try:
        roster = read_roster(Path(remembered["roster"]), remembered.get("assignment")) if remembered else None
        with course.open_course(out, gradebook=args.gradebook) as gb:
            name = course.assignment_name(out)
            exported = export_for_lms(gb, name, course.results(gb, out), Path(args.to), roster=roster,
                                      notebooks=store.get_assignment(gb, name).notebooks,
                                      changed_only=args.changed_only, absent_zero=args.absent_zero,
                                      partial_grades=args.partial_grades)
    except (store.GradebookError, RosterError, OSError) as exc:
        print(f"lessonlib export: {printable(exc)}", file=sys.stderr)
        return 2
    print(printable(f"exported {exported.why}: {', '.join(exported.learners) or 'nobody'}"))
    print(printable(f"wrote {', '.join(p.name for p in exported.paths) or 'no file'} in {args.to}"))
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        with course.open_course(out, gradebook=args.gradebook, lock=False) as gb:
            changes = (store.learner_history(gb, args.learner) if args.learner else
                       store.assignment_history(gb, course.assignment_name(out)))
    except store.GradebookError as exc:
        print(f"lessonlib history: {printable(exc)}", file=sys.stderr)
        return 2
    for c in changes:
        where = " / ".join(x for x in (c.assignment, c.learner, c.exercise) if x)
        why = f" because: {c.reason}" if c.reason else ""
        print(printable(f"{c.at}  {c.what:14}  {where}: {c.old!r} -> {c.new!r}{why}  [{c.command}]"))
    return 0


def _cmd_term_report(args: argparse.Namespace) -> int:
    from lessonlib.grading.reports.term import write_term_report

    try:
        with store.open_gradebook(args.gradebook or Path(course.GRADEBOOK_FILE), course.command_line(),
                                  lock=False) as gb:
            path = write_term_report(Path(args.to), gb)
    except store.GradebookError as exc:
        print(f"lessonlib term-report: {printable(exc)}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _cmd_similarity(args: argparse.Namespace) -> int:
    from lessonlib.grading.lms.downloads import find_learners
    from lessonlib.grading.reports import similarity
    from lessonlib.grading.run.notebooks import course_notebooks

    out = Path(args.out)
    learners = find_learners([Path(s) for s in args.submissions], course_notebooks()).learners
    identical: list[Any] = []
    try:
        with course.open_course(out, gradebook=args.gradebook, lock=False) as gb:
            identical = similarity.identical_files(gb, course.assignment_name(out))
    except store.GradebookError:
        pass  # no gradebook yet: only this run's answers are compared
    out.mkdir(parents=True, exist_ok=True)
    path = similarity.write_similarity_report(out / "similarity.html", learners, identical=identical)
    print(f"wrote {path}: flagged for a look, never a penalty by itself")
    return 0


def add_course_commands(subparsers: argparse._SubParsersAction) -> None:
    """The commands above, each on one assignment's output folder (or the course gradebook)."""
    def command(name: str, help: str, func: Any, *, out: bool = True) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, help=help, description=help)
        if out:
            parser.add_argument("--out", required=True, metavar="DIR", help="the assignment's output folder")
        parser.add_argument("--gradebook", type=Path, metavar="FILE",
                            help="the course gradebook (default: gradebook.db beside DIR)")
        parser.set_defaults(func=func)
        return parser

    p = command("override", "replace one exercise's score for one learner, with a reason", _cmd_override)
    p.add_argument("learner")
    p.add_argument("exercise")
    p.add_argument("points", type=float, nargs="?", default=0.0)
    p.add_argument("--reason", required=True, help="why (recorded, and shown to the learner in the feedback)")
    p.add_argument("--clear", action="store_true", help="undo the override (the graded score counts again)")
    p = command("extend", "give one learner a due date of their own, with a reason", _cmd_extend)
    p.add_argument("learner")
    p.add_argument("--due", type=_when, required=True, metavar="WHEN")
    p.add_argument("--reason", required=True)
    p = command("late-policy", "the assignment's due date, late policy and points in the LMS", _cmd_late_policy)
    p.add_argument("--due", type=_when, metavar="WHEN")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--per-day", type=float, metavar="F", help="deduct F of the points possible per started day")
    how.add_argument("--zero", action="store_true", help="late work gets 0")
    how.add_argument("--none", action="store_true", help="no deduction (the default)")
    p.add_argument("--floor", type=float, default=0.0, metavar="F", help="with --per-day: never below F of the points")
    p.add_argument("--lms-points", type=float, metavar="N", help="the assignment's points possible in the LMS")
    p = command("export", "the LMS files to upload (lms-import.csv, feedback zips) into a folder of their own",
                _cmd_export)
    p.add_argument("--to", required=True, metavar="FOLDER", help="where to write them (created if missing)")
    p.add_argument("--changed-only", action="store_true",
                   help="only the learners whose grade or feedback changed since the last export")
    p.add_argument("--absent-zero", action="store_true", help="roster learners with no submission get 0")
    p.add_argument("--partial-grades", action="store_true",
                   help="learners with written answers still to grade get their points so far")
    p = command("history", "every recorded change of the assignment (or of one learner), oldest first", _cmd_history)
    p.add_argument("learner", nargs="?")
    p = command("term-report", "the course's term report: misconceptions that persist, sections to reteach, who "
                               "needs help", _cmd_term_report, out=False)
    p.add_argument("--to", required=True, metavar="PATH", help="the HTML file (or a folder) to write")
    p = command("similarity", "near-identical answers between learners, and answers copied from the course",
                _cmd_similarity)
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION")
