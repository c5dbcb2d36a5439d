"""``check(name, answer)``: run an answer on the public cases, judge it, show the report."""

from __future__ import annotations

from lessonlib.exercises.cells import check_notes
from lessonlib.exercises.judge import error_result, judge, run_cases
from lessonlib.exercises.registry import EXERCISES
from lessonlib.exercises.results import CheckResult, jupyter_shell, show


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
            result = judge(exercise, cases, run_cases(answer, cases)).for_learner()
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
