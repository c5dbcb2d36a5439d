"""From what the worker sent for one exercise to its grade: read, judge, name the status.

The worker's output is read once, as data only (JSON and ``.npy`` through :mod:`wire`), into a
:class:`TaskResult` per exercise. Cases with no outcome (the process was stopped, crashed or
exited) count as failed, with that reason; they are never counted as passed. The check itself is
:func:`lessonlib.exercises.judge`, the same one ``check()`` uses in a notebook. A status beyond
passed or failed comes from the zygote's account of how a child ended (its fate) or from an
exception's class and errno, never from the text of a message.
"""

from __future__ import annotations

import errno
import signal
from dataclasses import replace
from typing import Any

from lessonlib.exercises import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Case,
    CheckResult,
    Exercise,
    Outcome,
    judge,
)
from lessonlib.exercises.runner import RAISED
from lessonlib.grading import records as r
from lessonlib.grading.isolation import wire
from lessonlib.grading.isolation.sandbox import Limits
from lessonlib.grading.run.plans import ExercisePlan, ManualAnswer
from lessonlib.grading.run.results import TaskResult, clip

# --- why a process ended ---------------------------------------------------------------------------


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _fate(task: TaskResult, limits: Limits, *, hidden: bool = False) -> tuple[str, str] | None:
    """(status, what happened) when the process did not end normally, else None.

    ``hidden``: the process ran hidden cases, so the words say nothing learner code chose (no
    exit status, no signal, no error text): only which limit or kind of ending it was.
    """
    fate = task.fate or {}
    if hidden:
        ended = _fate(task, limits)
        return None if ended is None else (ended[0], _HIDDEN_ENDINGS.get(ended[0], "it ended before it finished"))
    if fate.get("oom_kills") and not (task.done and not task.broken):  # the control group ran out of memory
        return r.MEMORY, (f"its processes together used more than the memory limit ({limits.memory_mb} MB for "
                          "the exercise), and the kernel stopped them")
    if fate.get("timed_out") == "cpu":
        return r.TIMEOUT, f"it used more than {limits.cpu_seconds:g} s of CPU time (an endless loop, or far too slow)"
    if fate.get("timed_out") == "wall":
        return r.TIMEOUT, (f"it was still running after {limits.wall_seconds:g} s (waiting or looping; the "
                           f"allowance is {limits.cpu_seconds:g} s of CPU time)")
    if fate.get("over_limit") and fate.get("job_limit"):
        return r.TOO_LARGE, f"the answers together sent back more than {limits.job_result_mb} MB"
    if fate.get("over_limit"):
        return r.TOO_LARGE, f"it sent back more than {limits.result_mb} MB"
    if task.done and not task.broken:
        return None
    if task.broken and fate.get("exit_code") == 0:
        return r.CRASHED, f"it sent back a malformed result ({task.broken})"
    number = fate.get("signal")
    if isinstance(number, int):
        if number == signal.SIGXFSZ:
            return r.CRASHED, f"it wrote a file larger than {limits.file_mb} MB"
        return r.CRASHED, f"the process running it was killed by {_signal_name(number)}"
    code = fate.get("exit_code")
    return r.EXITED, (f"the process running it ended (exit status {code}) before it finished: "
                      "os._exit() or a crash")


_HIDDEN_ENDINGS = {
    r.TIMEOUT: "the hidden cases ran out of time",
    r.TOO_LARGE: "the hidden cases sent back more than the grader accepts",
    r.CRASHED: "the process running the hidden cases was stopped or crashed",
    r.EXITED: "the process running the hidden cases ended before it finished",
    r.MEMORY: "the hidden cases ran out of memory",
    r.PROCESS_LIMIT: "the hidden cases tried to start more processes than allowed",
}


def _status_from_error(error: str, types: tuple[str, ...], number: int | None, limits: Limits, *,
                       hidden: bool = False) -> tuple[str, str] | None:
    """A status for an exception that says more than "failed" (the program itself hit a limit), from
    its classes and errno as the worker reported them, never its text. Learner code can raise any
    class, so this names a status and a reason only; the points come from the cases.
    ``hidden``: the error came from a hidden case: the status only, none of the error's text."""
    if hidden:
        found = _status_from_error(error, types, number, limits)
        return None if found is None else (found[0], _HIDDEN_ENDINGS.get(found[0], ""))
    if "grader.LessonlibUnavailable" in types:
        return r.USES_LESSONLIB, ""
    if "SystemExit" in types:
        return r.EXITED, f"it called sys.exit() ({error}); an answer must return its result"
    if "MemoryError" in types:
        return r.MEMORY, f"it ran out of memory (the limit is {limits.memory_mb} MB): {error}"
    if "grader.ResultTooLarge" in types:
        return r.TOO_LARGE, error.removeprefix("ResultTooLarge: ")
    if "BlockingIOError" in types and number == errno.EAGAIN:
        return r.PROCESS_LIMIT, f"it tried to start more processes than allowed ({limits.processes}): {error}"
    return None


def _lessonlib_reason(names: set[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in sorted(names)[:3]) or "lessonlib"
    return (f"The answer calls {shown}, the course's own implementation: the exercise is to write it "
            "yourself with NumPy, so that earns no points.")


# --- grades ---------------------------------------------------------------------------------------


def _grade(plan: ExercisePlan, exercise: Exercise, status: str, reason: str, points: float = 0.0,
           notes: list[str] | None = None) -> r.ExerciseGrade:
    return r.ExerciseGrade(plan.notebook, exercise.name, points, exercise.points, status,
                           diagnosis=_first_sentence(reason), reason=reason, notes=list(notes or []))


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".")[:300]


def _diagnosis_dicts(diagnoses: list) -> list[dict[str, Any]]:
    return [{"name": d.name, "title": d.title, "message": d.message, "hint": d.hint, "reread": d.reread}
            for d in diagnoses]


def _from_check(plan: ExercisePlan, result: CheckResult, notes: list[str]) -> r.ExerciseGrade:
    failed = [
        {"case": f.case, "description": f.description, "reason": f.reason, "expected": f.expected,
         "got": f.got, "detail": f.detail, "hidden": False} if not f.hidden else
        {"case": f.case, "description": f.description, "reason": f.reason, "expected": "", "got": "",
         "detail": "", "hidden": True}  # for the instructor; what learner code produced on it is never kept
        for f in result.failed_cases
    ]
    diagnoses = _diagnosis_dicts(result.diagnoses)
    everything = _diagnosis_dicts(result.instructor_diagnoses)
    if result.status == PASSED:
        diagnosis, reason = "", ""
    elif result.status == NOT_ATTEMPTED:
        diagnosis, reason = "not attempted", "The answer cell still holds the stub: not attempted yet."
    elif result.status == FAILED:
        if everything:
            diagnosis = "; ".join(f"{d['title']} [{d['name']}]" for d in everything)
        else:
            first = result.failed_cases[0] if result.failed_cases else None
            diagnosis = "no known misconception"
            if first is not None and first.reason == "raised" and not first.hidden:
                diagnosis += f"; {first.case} {first.got}"
            elif first is not None:
                diagnosis += f"; first failure: {first.reason.replace('_', ' ')} on {first.case}"
        public_total = result.total_cases - result.hidden_total
        reason = f"{result.passed_cases - result.hidden_passed} of {public_total} public cases passed." \
            if result.hidden_total else f"{result.passed_cases} of {result.total_cases} cases passed."
    else:
        diagnosis, reason = _first_sentence(result.message), result.message
    return r.ExerciseGrade(
        plan.notebook, result.exercise, result.points, result.max_points, result.status, diagnosis, reason,
        passed_cases=result.passed_cases, total_cases=result.total_cases, diagnoses=diagnoses,
        failed_cases=failed, notes=notes, hidden_passed=result.hidden_passed, hidden_total=result.hidden_total,
        instructor_diagnoses=everything,
    )


def _cell_notes(task: TaskResult) -> list[str]:
    notes = []
    for cell in task.cells or []:
        if cell.get("label") != "answer" and cell.get("raised"):
            notes.append(f"Running the definitions of {clip(cell.get('label'), 40)} raised "
                         f"{clip(cell.get('raised'), 300)}.")
    if task.printed > 100_000:
        notes.append(f"The answer printed {task.printed:,} characters; the grader discards printed output.")
    return notes


def assess(exercise: Exercise, plan: ExercisePlan, cases: list[Case], task: TaskResult | None,
           limits: Limits, *, stopped_grader: bool = False) -> r.ExerciseGrade:
    """The grade of one exercise from its plan and what the worker stored (never raises)."""
    name = exercise.name
    notes = list(plan.notes)
    if plan.status is not None:
        return _grade(plan, exercise, plan.status, plan.reason, notes=notes)
    if stopped_grader:
        return _grade(plan, exercise, r.STOPPED_GRADER,
                      "Running this answer stopped the process grading it, so it was not run again and earns no "
                      "points. Your instructor has been told.", notes=notes)
    if task is None or task.fate is None:
        return _grade(plan, exercise, r.CRASHED, "The worker stopped before this exercise could run.", notes=notes)
    if task.setup_error is not None:
        return _grade(plan, exercise, r.ERROR, f"The grader could not prepare a process for this exercise "
                      f"({task.setup_error}); please report it.", notes=notes)
    notes += _cell_notes(task)
    ended = _fate(task, limits)
    answer = next((c for c in task.cells or [] if c.get("label") == "answer"), None)
    raised = clip(answer.get("raised")) if answer and answer.get("raised") else None
    if task.cells is None:  # the process ended while the cells ran
        status, what = ended or (r.CRASHED, "no report came back")
        return _grade(plan, exercise, status, f"Stopped while the answer cell ran: {what}.", notes=notes)
    if not task.defined:
        if raised is None:
            return _grade(plan, exercise, r.MISSING_ANSWER, f"Running the answer cell did not define `{name}`.",
                          notes=notes)
        special = _status_from_error(raised, *wire.error_fields(answer), limits)
        if special:
            return _grade(plan, exercise, special[0], _lessonlib_reason(task.lessonlib) if special[0] ==
                          r.USES_LESSONLIB else f"The answer cell stopped: {special[1]}.", notes=notes)
        return _grade(plan, exercise, r.CELL_ERROR,
                      f"The answer cell raised {raised} when run, so `{name}` was never defined.", notes=notes)
    if raised is not None:
        notes.append(f"The answer cell raised {raised} after defining `{name}`; `{name}` was graded as defined.")
    hidden_ids = {c.id for c in cases if c.hidden}
    outcomes = _outcomes(task, cases, hidden_ids, limits)
    result = judge(exercise, cases, outcomes)
    grade = _from_check(plan, result, notes)
    used_lessonlib = bool(task.lessonlib) or bool(task.hidden and task.hidden.lessonlib)
    if result.status == PASSED:
        if used_lessonlib:
            grade.notes.append("The answer tried lessonlib's own functions but did the work itself.")
        return grade
    finished = sum(c.id in _received(task, c.id in hidden_ids) for c in cases)
    override = _first_limit(task, cases, hidden_ids, limits)
    hidden_ended = _fate(task.hidden, limits, hidden=True) if task.hidden else None
    if override is not None and (ended or hidden_ended) is not None:
        override = (override[0], f"{override[1]}; then {(ended or hidden_ended)[1]}")
    override = override or ended or hidden_ended
    if used_lessonlib and (override is None or override[0] == r.USES_LESSONLIB):
        grade.status, grade.reason = r.USES_LESSONLIB, _lessonlib_reason(task.lessonlib)
        grade.diagnosis = _first_sentence(grade.reason)
    elif override is not None:
        partial = (f" {finished} of {len(cases)} cases finished before that; only those count."
                   if 0 < finished < len(cases) else "")
        grade.status = override[0]
        grade.reason = f"Stopped: {override[1]}.{partial}"
        grade.diagnosis = _first_sentence(grade.reason)
    return grade


def _received(task: TaskResult, hidden: bool) -> dict[str, Outcome]:
    """The outcomes one child sent: the public child's, or the hidden child's (none if it never ran)."""
    if not hidden:
        return task.outcomes
    return task.hidden.outcomes if task.hidden is not None else {}


def _outcomes(task: TaskResult, cases: list[Case], hidden_ids: set[str], limits: Limits) -> list[Outcome]:
    """Each case's outcome, from the child that ran it (a child cannot answer for the other's
    cases), with peak memory as the worker measured it from outside (never as learner code said)."""
    outcomes = []
    for case in cases:
        hidden = case.id in hidden_ids
        child = task.hidden if hidden else task
        got = _received(task, hidden).get(case.id)
        if got is None:
            ended = _fate(child, limits, hidden=hidden) if child is not None else None
            got = Outcome(RAISED, error=f"GraderStopped: no result ({ended[1]})" if ended else
                          "GraderStopped: no result came back")
        outcomes.append(replace(got, peak_bytes=None))
    for child, hidden in ((task, False), (task.hidden, True)):
        measured = [i for i, c in enumerate(cases) if (c.id in hidden_ids) == hidden and c.trace_memory]
        if child is not None and measured:
            largest = max(measured, key=lambda i: _input_bytes(cases[i]))
            outcomes[largest] = replace(outcomes[largest], peak_bytes=_peak_bytes(child.fate or {}))
    return outcomes


def _input_bytes(case: Case) -> int:
    return sum(a.nbytes for a in case.args if hasattr(a, "nbytes"))


MAX_PEAK_KB = 2**40  # a kernel count never comes near this; anything beyond is not believed


def _peak_bytes(fate: dict[str, Any]) -> int | None:
    """The child's peak memory as the zygote read it after the child ended (bytes; None when not
    measured): the peak of the control group the child ran in alone, where it had one (all it
    allocated, out of its reach); else its peak resident memory (and anything it forked) from the
    kernel, above what it held at birth."""
    def known(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_PEAK_KB

    group = fate.get("group_peak_kb")
    if known(group):
        return group * 1024
    peak, base = fate.get("peak_rss_kb"), fate.get("base_rss_kb")
    if not (known(peak) and known(base)):
        return None
    return max(peak - base, 0) * 1024


def _first_limit(task: TaskResult, cases: list[Case], hidden_ids: set[str],
                 limits: Limits) -> tuple[str, str] | None:
    """The first limit an answer hit, in case order, from its errors (words only for public cases)."""
    for case in cases:
        hidden = case.id in hidden_ids
        outcome = _received(task, hidden).get(case.id)
        if outcome is not None and outcome.status == RAISED:
            found = _status_from_error(outcome.error or "", outcome.error_types, outcome.errno, limits, hidden=hidden)
            if found:
                return found
    return None


def manual_grade(answer: ManualAnswer) -> r.ExerciseGrade:
    """A written answer: copied for a person to grade (no points until then)."""
    q = answer.question
    points = None if answer.status == r.NEEDS_MANUAL else 0.0
    return r.ExerciseGrade(q.notebook, q.name, points, q.points, answer.status, diagnosis=answer.reason,
                           reason=answer.reason, kind="manual", answer_text=answer.text,
                           notes=[f"Question: {q.question}"], answer_sha256=r.answer_digest(answer.text))
