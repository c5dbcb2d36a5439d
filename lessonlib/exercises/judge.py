"""Judge returned values: from (cases, outcomes) to points, failed cases and diagnoses.

Nothing here runs learner code. ``check`` runs the answer in this process and then calls
:func:`judge`; a batch grader runs it in a worker, sends back the outcomes, and calls the same
:func:`judge`. One definition per exercise, one way of judging it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lessonlib.exercises.limits import Deadline
from lessonlib.exercises.registry import get_exercise
from lessonlib.exercises.results import (
    ERROR,
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    CheckResult,
    Diagnosis,
    FailedCase,
)
from lessonlib.exercises.runner import (
    NOT_IMPLEMENTED,
    NOT_RUN,
    RAISED,
    RETURNED,
    TIMED_OUT,
    Outcome,
    changed_arguments,
    run_case,
)
from lessonlib.exercises.sections import SECTIONS
from lessonlib.exercises.spec import Case, Exercise, Record


def error_result(name: str, message: str, max_points: float = 0.0) -> CheckResult:
    """A result for a check that could not run (it never raises instead)."""
    return CheckResult(exercise=name, status=ERROR, points=0.0, max_points=max_points, message=message)


def _judge_case(exercise: Exercise, case: Case, outcome: Outcome, expected: object) -> FailedCase | None:
    failure = _failure(exercise, case, outcome, expected)
    return None if failure is None else replace(failure, hidden=case.hidden)


def _failure(exercise: Exercise, case: Case, outcome: Outcome, expected: object) -> FailedCase | None:
    want = exercise.output.describe(expected)
    if outcome.status == NOT_IMPLEMENTED:
        return FailedCase(case.id, case.description, "not_implemented", want,
                          "raised NotImplementedError", "This case is not handled yet.")
    if outcome.status == RAISED:
        return FailedCase(case.id, case.description, "raised", want, f"raised {outcome.error}",
                          "The answer raised an exception on these inputs.")
    if outcome.status == TIMED_OUT:
        return FailedCase(case.id, case.description, "timeout", want, f"nothing: it {outcome.error}",
                          "The answer did not return: an endless loop?")
    if outcome.status == NOT_RUN:
        return FailedCase(case.id, case.description, "not_run", want, "not run",
                          "An earlier case did not return, so this one was not started.")
    if outcome.status != RETURNED:
        return FailedCase(case.id, case.description, "wrong_type", want, "no value came back",
                          f"Unknown outcome status {outcome.status!r}.")
    if outcome.value is None:
        return FailedCase(case.id, case.description, "wrong_type", want, "no value came back", "")
    mismatch = exercise.output.compare(outcome.value, expected)
    changed = [i for i in changed_arguments(outcome) if i not in exercise.may_change]
    if changed:
        return _changed_inputs(exercise, case, changed, mismatch, want)
    if mismatch is None:
        return None
    return FailedCase(case.id, case.description, mismatch.reason, mismatch.expected, mismatch.got,
                      mismatch.detail)


def _changed_inputs(exercise: Exercise, case: Case, changed: list[int], mismatch, want: str) -> FailedCase:
    """A case failed because the answer wrote into arrays it was given: the caller's data changed."""
    names = exercise.parameters
    named = ", ".join(f"`{names[i]}`" if i < len(names) else f"argument {i + 1}" for i in changed)
    value = ("Its returned value is right." if mismatch is None
             else f"Its returned value is wrong too: {mismatch.detail}")
    return FailedCase(
        case.id, case.description, "changed_input", want if mismatch is None else mismatch.expected,
        f"it changed {named} in place" if mismatch is None else mismatch.got,
        f"The answer wrote into {named}, an array it was given: whoever called it now holds other numbers "
        f"than they passed in. Work on a copy (x = x.copy()) or build a new array (np.where, x / s instead "
        f"of x /= s). {value}")


def _records(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> list[Record]:
    records = []
    for case, outcome in zip(cases, outcomes):
        expected = exercise.expected(case)
        try:
            failure = _judge_case(exercise, case, outcome, expected)
        except Exception as exc:  # a malformed value must not break the check
            failure = FailedCase(case.id, case.description, "wrong_type", "a well-formed value",
                                 "a value the checker could not read", f"{type(exc).__name__}: {exc}",
                                 hidden=case.hidden)
        try:
            got = exercise.output.usable(outcome.value) if outcome.status == RETURNED else None
        except Exception:
            got = None
        records.append(Record(case, outcome, expected, got, failure))
    return records


def _diagnoses(exercise: Exercise, records: Sequence[Record]) -> list[Diagnosis]:
    """Every diagnosis whose evidence is not a strict subset of another's.

    When two wrong ideas predict the same output on a case (a 1 x 1 causal mask cannot tell a
    missing diagonal from an inverted mask), the one that also explains other cases is kept.
    """
    hits: dict[str, set[str]] = {}
    for spec in exercise.diagnoses:
        try:
            found = spec.detect(records)
        except Exception:
            found = []
        if found:
            hits[spec.name] = set(found)
    kept = [
        spec for spec in exercise.diagnoses
        if spec.name in hits and not any(hits[spec.name] < other for other in hits.values())
    ]
    order = {r.case.id: i for i, r in enumerate(records)}
    return [
        Diagnosis(spec.name, spec.title, spec.message, spec.hint, SECTIONS[spec.section].notebook,
                  SECTIONS[spec.section].heading, tuple(sorted(hits[spec.name], key=order.get)))
        for spec in kept
    ]


def judge(exercise: str | Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> CheckResult:
    """Points, status, failed cases and diagnoses for ``outcomes`` of ``cases`` (never raises)."""
    name = exercise if isinstance(exercise, str) else exercise.name
    try:
        if isinstance(exercise, str):
            exercise = get_exercise(exercise)
    except KeyError as exc:
        return error_result(name, str(exc.args[0]))
    if len(cases) != len(outcomes) or not cases:
        return error_result(name, f"{len(cases)} cases but {len(outcomes)} outcomes", exercise.points)
    try:
        return _judge(exercise, cases, outcomes)
    except Exception as exc:  # a bug in a check must not reach the learner as a traceback
        return error_result(name, f"the checker failed ({type(exc).__name__}: {exc})", exercise.points)


def _judge(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> CheckResult:
    if all(o.status == NOT_IMPLEMENTED for o in outcomes):
        return CheckResult(
            exercise=exercise.name, status=NOT_ATTEMPTED, points=0.0, max_points=exercise.points,
            passed_cases=0, total_cases=len(cases),
            message="Write your answer in the answer cell, run that cell, then run this check again.",
        )
    records = _records(exercise, cases, outcomes)
    failed = [r.failure for r in records if r.failure is not None]
    score = (len(records) - len(failed)) / len(records)  # fraction of the points
    total = len(records)
    hidden_cases = [c for c in cases if c.hidden]
    hidden_total = len(hidden_cases)
    for requirement in exercise.requirements:
        if requirement.applies(cases):
            total += 1
            # judged on every case; when hidden cases are among its evidence, it is counted as a
            # hidden one, since its verdict could tell which hidden case misbehaved
            on_hidden = requirement.applies(hidden_cases)
            hidden_total += on_hidden
            outcome = requirement.judge(records)
            if outcome is not None:
                failed.append(replace(outcome, hidden=on_hidden))
                score *= 1.0 - requirement.weight
    passed = total - len(failed)
    points = round(exercise.points * score, 2)
    status = PASSED if not failed else FAILED
    # What a learner is told rests on public cases alone: a diagnosis found on a hidden case would
    # tell which hidden input the answer gets wrong. The instructor's report uses every case.
    public = [r for r in records if not r.case.hidden]
    diagnoses = _diagnoses(exercise, public) if failed and public else []
    everything = _diagnoses(exercise, records) if failed else []
    return CheckResult(
        exercise=exercise.name, status=status, points=points, max_points=exercise.points,
        passed_cases=passed, total_cases=total, failed_cases=failed, diagnoses=diagnoses,
        hidden_passed=hidden_total - sum(f.hidden for f in failed), hidden_total=hidden_total,
        instructor_diagnoses=everything,
    )


def run_cases(answer: object, cases: Sequence[Case], *, time_limit: float | None = None) -> list[Outcome]:
    """Run ``answer`` on every case in this process (what ``check`` does; a grader uses a worker).

    ``time_limit``: seconds each case may take (None: no limit). The first case past it reads
    "timed_out" and the cases after it "not_run": one endless loop is waited for once, not per case.
    """
    outcomes: list[Outcome] = []
    for case in cases:
        if outcomes and outcomes[-1].status in (TIMED_OUT, NOT_RUN):
            outcomes.append(Outcome(NOT_RUN))
            continue
        if time_limit is None:
            outcomes.append(run_case(answer, case.args, call=case.call, trace_memory=case.trace_memory))
            continue
        with Deadline(time_limit) as deadline:
            outcome = run_case(answer, case.args, call=case.call, trace_memory=case.trace_memory)
        if deadline.passed:
            outcome = Outcome(TIMED_OUT, error=f"did not return within {time_limit:g} s")
        outcomes.append(outcome)
    return outcomes

