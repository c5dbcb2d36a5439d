"""The instructor's decisions on an assignment, recorded in the course gradebook with a reason:

    lessonlib override --out DIR LEARNER EXERCISE POINTS --reason TEXT   replace a score (--clear: undo;
                                                                         --keep: keep it for a new answer)
    lessonlib extend --out DIR LEARNER --due WHEN --reason TEXT          a learner's own due date (--keep, --clear)
    lessonlib submission-time --out DIR LEARNER WHEN --reason TEXT       correct when a learner handed in
    lessonlib late-policy --out DIR --due WHEN [--per-day F --floor F | --zero | --none]
    lessonlib timezone --out DIR [ZONE]                                   the course's time zone: show, set, change
    lessonlib export --out DIR --to FOLDER [--changed-only]              the LMS files: everyone, or what changed
    lessonlib history --out DIR [LEARNER]                                 every recorded change, oldest first
    lessonlib restore --out DIR [--backup FILE] [--list]                 put a backup of the gradebook back
    lessonlib term-report [--gradebook FILE] --to PATH                   the course's term report
    lessonlib similarity SUBMISSION... --out DIR [--also DIR]            near-identical answers, for a look

Each decision adds a history row and then rewrites DIR's files from the gradebook (no learner
code runs), so feedback, summary.csv and the LMS files show it at once. WHEN is an ISO 8601
date and time with its time zone (``2026-03-14T23:59+01:00``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonlib.grading import store
from lessonlib.grading.arguments import fraction, points, when
from lessonlib.grading.reports.safe_text import printable
from lessonlib.grading.store import outputs as course

if TYPE_CHECKING:
    from lessonlib.grading.isolation.sandbox import Isolation, Limits
    from lessonlib.grading.lms.roster import Roster


def recorded_isolation(last: dict[str, Any]) -> Isolation | None:
    """The isolation a run recorded (``store.record_run``), None before any run."""
    from lessonlib.grading.isolation.sandbox import Isolation

    recorded = last.get("isolation")
    if not isinstance(recorded, dict):
        return None
    return Isolation(**{k: v for k, v in recorded.items() if k in Isolation.__dataclass_fields__})


def run_settings(isolation: Isolation, limits: Limits, workers: int, roster: Roster | None,
                 column: str | None) -> dict[str, Any]:
    """What a run ran under, as ``store.record_run`` keeps it for the commands that rewrite files."""
    return {"isolation": isolation.to_dict(), "limits": {"cpu_seconds": limits.cpu_seconds,
                                                         "memory_mb": limits.memory_mb},
            "workers": workers,
            "roster": {"file": str(roster.path.resolve()), "column": column, "new_column": roster.new_column}
            if roster is not None else None}


def recorded_roster(last: dict[str, Any]) -> Roster | None:
    """The roster the last run used (its file read again), None when it had none."""
    from lessonlib.grading.lms.roster import read_roster

    saved = last.get("roster")
    if not saved:
        return None
    return read_roster(Path(saved["file"]), saved.get("column"), new_column=bool(saved.get("new_column")))


def rewrite(gb: store.Gradebook, out: Path) -> None:
    """Every file of DIR, from the gradebook, as the last ``lessonlib grade`` wrote them (its isolation,
    limits and roster, as the gradebook recorded them); nothing is graded again."""
    from lessonlib.grading import write_gradebook
    from lessonlib.grading.isolation.sandbox import Limits

    last = course.last_run(gb, out)
    isolation = recorded_isolation(last)
    if isolation is None:
        print(f"recorded; {out} has not been graded yet, so its files are written by the next `lessonlib grade`")
        return
    ran = last.get("limits", {})
    limits = Limits(cpu_seconds=ran.get("cpu_seconds", Limits.cpu_seconds),
                    memory_mb=ran.get("memory_mb", Limits.memory_mb))
    notebooks = store.get_assignment(gb, course.assignment_name(out)).notebooks
    marks = course.apply_manual(gb, out)
    write_gradebook(out, course.results(gb, out), isolation, limits, int(last.get("workers", 1)),
                    roster=recorded_roster(last), marks=marks, notebooks=notebooks, applied=True,
                    secret=store.marking_secret(gb))
    print(f"rewrote the files of {out} from the gradebook")


def _decide(args: argparse.Namespace, decision: Any) -> int:
    from lessonlib.grading.lms.roster import RosterError

    out = Path(args.out)
    try:
        with course.open_course(out, gradebook=args.gradebook) as gb:
            decision(gb, course.assignment_name(out))
            rewrite(gb, out)
    except (store.GradebookError, RosterError, ValueError) as exc:
        print(f"lessonlib {args.command}: {printable(exc)}", file=sys.stderr)
        return 2
    return 0


def _cmd_override(args: argparse.Namespace) -> int:
    if args.clear and args.keep:
        print("lessonlib override: give --keep or --clear, not both", file=sys.stderr)
        return 2
    if args.points is None and not (args.clear or args.keep):
        print("lessonlib override: give the POINTS that replace the score (or --keep, or --clear)", file=sys.stderr)
        return 2

    def decide(gb: store.Gradebook, name: str) -> None:
        if args.clear:
            store.clear_override(gb, name, args.learner, args.exercise, args.reason)
        elif args.keep:
            kept = store.keep_override(gb, name, args.learner, args.exercise, args.reason)
            print(f"kept the override of {args.learner} / {args.exercise} ({kept:g} points) for the answer graded now")
        else:
            store.set_override(gb, name, args.learner, args.exercise, args.points, args.reason)
    return _decide(args, decide)


def _cmd_extend(args: argparse.Namespace) -> int:
    if sum((args.due is not None, args.keep, args.clear)) != 1:
        print("lessonlib extend: give one of --due WHEN, --keep or --clear", file=sys.stderr)
        return 2

    def decide(gb: store.Gradebook, name: str) -> None:
        if args.clear:
            store.clear_extension(gb, name, args.learner, args.reason)
        elif args.keep:
            store.keep_extension(gb, name, args.learner, args.reason)
        else:
            store.grant_extension(gb, name, args.learner, args.due, args.reason)
    return _decide(args, decide)


def _cmd_submission_time(args: argparse.Namespace) -> int:
    return _decide(args, lambda gb, name: store.correct_submission_time(gb, name, args.learner, args.when,
                                                                         args.reason))


def _cmd_late_policy(args: argparse.Namespace) -> int:
    policy = (store.LatePolicy("zero") if args.zero else store.LatePolicy("per_day", args.per_day, args.floor)
              if args.per_day is not None else store.LatePolicy("none"))
    return _decide(args, lambda gb, name: store.set_late_policy(gb, name, due_at=args.due, policy=policy))


def _cmd_timezone(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        with course.open_course(out, gradebook=args.gradebook, lock=args.zone is not None) as gb:
            if args.zone is None:
                stored = store.time_zone(gb)
                print(f"the course's time zone: {stored}" if stored else
                      "the course has no time zone yet: give it with `lessonlib timezone --out DIR ZONE`, or with "
                      "--timezone on the first `lessonlib grade` that reads LMS times")
                return 0
            before = store.time_zone(gb)
            changed = store.set_time_zone(gb, args.zone, args.reason or "set with lessonlib timezone")
            print(f"the course's time zone is {args.zone}" + (f" (it was {before}); {changed} stored submission "
                                                             "time(s) read again in it" if before else ""))
            if _graded(gb, out):
                rewrite(gb, out)
    except (store.GradebookError, ValueError) as exc:
        print(f"lessonlib timezone: {printable(exc)}", file=sys.stderr)
        return 2
    return 0


def _graded(gb: store.Gradebook, out: Path) -> bool:
    try:
        store.get_assignment(gb, course.assignment_name(out))
    except store.StoreError:
        return False
    return True


def _cmd_restore(args: argparse.Namespace) -> int:
    from lessonlib.grading.store import backups

    path = course.gradebook_path(Path(args.out), args.gradebook) if args.out else args.gradebook
    if path is None:
        print("lessonlib restore: give --out DIR (the gradebook beside it) or --gradebook FILE", file=sys.stderr)
        return 2
    if args.list:
        found = backups.backups(path)
        for backup in reversed(found):
            print(f"{backup}  taken {backups.taken_at(backup)}")
        print(f"{len(found)} backup(s) of {path}")
        return 0
    try:
        restored, kept = store.restore_gradebook(path, course.command_line(), args.backup)
    except store.GradebookError as exc:
        print(f"lessonlib restore: {printable(exc)}", file=sys.stderr)
        return 2
    print(printable(f"restored {path} from {restored.name} (taken {backups.taken_at(restored)})"
                    + (f"; the file it replaced is kept as {kept}" if kept else "")))
    print("run the week's `lessonlib grade` command again: what was graded after the backup is graded again, and "
          "the files are rewritten from the restored gradebook")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from lessonlib.grading.lms.roster import RosterError
    from lessonlib.grading.reports.exports import export_for_lms

    out = Path(args.out)
    try:
        with course.open_course(out, gradebook=args.gradebook) as gb:
            name = course.assignment_name(out)
            roster = recorded_roster(course.last_run(gb, out))
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
    import tempfile

    from lessonlib.grading.lms.downloads import DownloadError, find_learners
    from lessonlib.grading.reports import similarity
    from lessonlib.grading.run.notebooks import course_notebooks

    out = Path(args.out)
    sections = [out, *(Path(d) for d in args.also)]
    try:
        with tempfile.TemporaryDirectory(prefix="lessonlib-similarity-") as unpacked:
            identical: list[Any] = []
            try:
                with course.open_course(out, gradebook=args.gradebook, lock=False) as gb:
                    zone = store.course_zone(gb, None, needed=False, change="")[0]
                    identical = similarity.identical_files(gb, [course.assignment_name(d) for d in sections])
            except store.StoreError:
                zone = None  # no gradebook yet: only this run's answers are compared
            learners = find_learners([Path(s) for s in args.submissions], course_notebooks(),
                                     unpack_to=Path(unpacked), zone=zone).learners  # a .zip is unpacked
            out.mkdir(parents=True, exist_ok=True)
            path = similarity.write_similarity_report(out / "similarity.html", learners, identical=identical)
    except (DownloadError, store.GradebookError, OSError) as exc:
        print(f"lessonlib similarity: {printable(exc)}", file=sys.stderr)
        return 2
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
    p.add_argument("points", type=points, nargs="?", default=None)
    p.add_argument("--reason", required=True, help="why (recorded, and shown to the learner in the feedback)")
    keep_or_clear = p.add_mutually_exclusive_group()
    keep_or_clear.add_argument("--clear", action="store_true", help="undo the override (the graded score counts again)")
    keep_or_clear.add_argument("--keep", action="store_true",
                               help="keep an override the run suspended (the answer changed) for the answer graded now")
    p = command("extend", "give one learner a due date of their own, with a reason", _cmd_extend)
    p.add_argument("learner")
    p.add_argument("--due", type=when, metavar="WHEN")
    p.add_argument("--keep", action="store_true", help="keep a flagged extension (the submission time changed)")
    p.add_argument("--clear", action="store_true", help="remove the extension (the assignment's due date applies)")
    p.add_argument("--reason", required=True)
    p = command("submission-time", "correct when one learner handed in (it outranks the LMS's times), with a reason",
                _cmd_submission_time)
    p.add_argument("learner")
    p.add_argument("when", type=when, metavar="WHEN", help="ISO 8601 with its offset, such as 2026-03-16T23:10+01:00")
    p.add_argument("--reason", required=True)
    p = command("late-policy", "the assignment's due date and late policy", _cmd_late_policy)
    p.add_argument("--due", type=when, metavar="WHEN")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--per-day", type=fraction, metavar="F",
                     help="deduct F of the assignment's points possible per started day late")
    how.add_argument("--zero", action="store_true", help="late work gets 0")
    how.add_argument("--none", action="store_true", help="no deduction (the default)")
    p.add_argument("--floor", type=fraction, default=0.0, metavar="F",
                   help="with --per-day: no deduction takes a score below F of the assignment's points possible")
    p = command("timezone", "show, set or change the course's time zone (changing it reads every stored LMS time "
                            "again)", _cmd_timezone)
    p.add_argument("zone", nargs="?", metavar="ZONE", help="an IANA name such as Europe/Berlin")
    p.add_argument("--reason", help="why it changes (kept in the history)")
    p = command("restore", "put a backup of the course gradebook back (the file it replaces is kept aside)",
                _cmd_restore, out=False)
    p.add_argument("--out", metavar="DIR", help="an assignment's output folder (the gradebook beside it)")
    p.add_argument("--backup", type=Path, metavar="FILE", help="the backup to restore (default: the newest that "
                                                               "passes every check)")
    p.add_argument("--list", action="store_true", help="list the backups, newest first, and change nothing")
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
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                   help="learners' notebooks, folders or the LMS's download zips; give every section's to compare "
                        "them in one report")
    p.add_argument("--also", action="append", default=[], metavar="DIR",
                   help="another section's output folder of the same assignment: its identical files are compared "
                        "too (repeat for each section)")
