"""``check(name, answer)``: run an answer on the public cases, judge it, show the report."""

from __future__ import annotations

from lessonlib.exercises.judge import error_result, judge, run_cases
from lessonlib.exercises.registry import EXERCISES
from lessonlib.exercises.results import CheckResult, show


def check(name: str, answer: object, *, seed: int | None = None, quiet: bool = False) -> CheckResult:
    """Check ``answer`` for exercise ``name`` and show what is right, what is wrong and why.

    answer: the learner's function (or, for a value exercise such as ``q1_context``, the value).
    seed: also run hidden cases drawn from this seed. quiet: return the result without showing it.
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
            result = judge(exercise, cases, run_cases(answer, cases))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a broken check must read as a message, not a traceback
        result = error_result(str(name), f"the checker failed ({type(exc).__name__}: {exc})")
    if not quiet:
        show(result)
    return result
