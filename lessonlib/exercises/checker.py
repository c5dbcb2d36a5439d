"""``check(name, answer)``: run an answer on the public cases, judge it, show the report."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from lessonlib.exercises.cells import check_notes
from lessonlib.exercises.judge import error_result, judge, run_cases
from lessonlib.exercises.limits import CappedOutput
from lessonlib.exercises.registry import EXERCISES
from lessonlib.exercises.results import CheckResult, jupyter_shell, show
from lessonlib.exercises.runner import NOT_RUN, TIMED_OUT, Outcome
from lessonlib.exercises.spec import Case

# Seconds one case may take before check() calls it an endless loop and stops. The slowest correct
# answer we know of (one query row at a time, in Python) takes 14 s on the largest hidden case,
# whose memory is traced; the limit leaves room for a slower machine.
CASE_TIME_LIMIT = 60.0
# What check() shows of the answer's own printing, over all its cases; the rest is counted and cut.
MAX_PRINTED_LINES = 100
MAX_PRINTED_CHARACTERS = 10_000


def grader_notes(name: str) -> list[str]:
    """What a grader would not run of what this answer uses, read from the cells run so far.

    Empty outside Jupyter or when the answer's cell cannot be found in the kernel's history. The
    history is the cells as typed (``%magic`` lines included), which is what the grader reads from
    the notebook; ``In`` holds them translated into ``get_ipython()`` calls.
    """
    shell = jupyter_shell()
    if shell is None:
        return []
    manager = getattr(shell, "history_manager", None)
    history = getattr(manager, "input_hist_raw", None) or shell.user_ns.get("In")
    if not isinstance(history, list) or not all(isinstance(h, str) for h in history):
        return []
    try:
        return check_notes(name, history, [n for n in EXERCISES if n != name])
    except (RecursionError, MemoryError, ValueError):
        return []


def check(name: str, answer: object, *, seed: int | None = None, quiet: bool = False) -> CheckResult:
    """Check ``answer`` for exercise ``name`` and show what is right, what is wrong and why.

    answer: the learner's function (or, for a value exercise such as ``q1_context``, the value).
    seed: also run hidden cases drawn from this seed; the report (and the result returned) says how
    many of them passed, nothing else of them. quiet: return the result without showing it.
    Prints plain text, or shows an HTML report in Jupyter. Never raises for anything the answer
    does: a stub raising NotImplementedError reads "not attempted yet".

    Each case may take CASE_TIME_LIMIT (60) seconds: a function still running then is interrupted,
    reported as "did not return within 60 s on case ...: an endless loop?", and the cases after it
    are not run. What the function prints is shown up to MAX_PRINTED_LINES (100) lines or
    MAX_PRINTED_CHARACTERS (10,000) characters, with a note of how much was cut.
    """
    try:
        exercise = EXERCISES.get(name)
        if exercise is None:
            result = error_result(
                str(name), f"There is no exercise called {name!r}. Known: {', '.join(EXERCISES)}."
            )
        else:
            cases = exercise.public_cases()
            if seed is not None:
                cases += exercise.hidden_cases(seed)
            outcomes = _run_in_kernel(answer, cases)
            result = judge(exercise, cases, outcomes).for_learner()
            result.message = "\n".join(filter(None, [_timeout_note(cases, outcomes), result.message]))
            notes = grader_notes(exercise.name) if exercise.kind == "function" else []
            if notes:
                result.message = "\n".join(
                    [result.message] * bool(result.message)
                    + ["Your instructor's grader would not run everything this answer uses, so its verdict may "
                       "differ from this one:"] + [f"- {note}" for note in notes]
                    + ["Rewrite the answer or its helpers without these (the top of this notebook says where "
                       "helpers may live)."])
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a broken check must read as a message, not a traceback
        result = error_result(str(name), f"the checker failed ({type(exc).__name__}: {exc})")
    if not quiet:
        show(result)
    return result


def _run_in_kernel(answer: object, cases: Sequence[Case]) -> list[Outcome]:
    """The answer's outcomes on ``cases``, each case within CASE_TIME_LIMIT, its printing capped and shown."""
    printed = CappedOutput(MAX_PRINTED_LINES, MAX_PRINTED_CHARACTERS)
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            return run_cases(answer, cases, time_limit=CASE_TIME_LIMIT)
    finally:
        shown = printed.text
        if printed.note():
            shown += ("\n" if shown and not shown.endswith("\n") else "") + printed.note() + "\n"
        print(shown, end="")


def _timeout_note(cases: Sequence[Case], outcomes: Sequence[Outcome]) -> str:
    """The sentence for a case that did not return ("" if none): which case, and how many were not run."""
    for case, outcome in zip(cases, outcomes):
        if outcome.status == TIMED_OUT:
            where = "a hidden case" if case.hidden else f"case {case.id}"
            skipped = sum(o.status == NOT_RUN for o in outcomes)
            rest = f" The {skipped} case(s) after it were not run." if skipped else ""
            return f"Your function did not return within {CASE_TIME_LIMIT:g} s on {where}: an endless loop?{rest}"
    return ""
