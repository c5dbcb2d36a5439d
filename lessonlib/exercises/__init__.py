"""Exercises and their checks: one definition per exercise, used by ``check`` and by a grader.

Learners call :func:`check` in a notebook. A batch grader splits the same work in two:

    cases = public_cases(name) + hidden_cases(name, seed)     # inputs only, plain data
    outcomes = [run_case(answer, c.args, call=c.call, trace_memory=c.trace_memory)
                for c in cases]                               # in an isolated worker
    result = judge(name, cases, outcomes)                     # in the grading process
"""

from lessonlib.exercises.assignments import ASSIGNMENTS, Assignment, get_assignment
from lessonlib.exercises.checker import check
from lessonlib.exercises.judge import judge, run_cases
from lessonlib.exercises.registry import (
    EXERCISES,
    MANUAL_QUESTIONS,
    ManualQuestion,
    RubricItem,
    all_diagnoses,
    get_exercise,
    hidden_cases,
    public_cases,
)
from lessonlib.exercises.results import (
    ERROR,
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    CheckResult,
    Diagnosis,
    FailedCase,
    Status,
)
from lessonlib.exercises.runner import Outcome, Value, describe_value, run_case
from lessonlib.exercises.sections import SECTIONS, Section
from lessonlib.exercises.spec import Case, DiagnosisSpec, Exercise

__all__ = [
    "ASSIGNMENTS", "Assignment", "get_assignment",
    "EXERCISES", "ERROR", "FAILED", "MANUAL_QUESTIONS", "NOT_ATTEMPTED", "PASSED", "SECTIONS",
    "Case", "CheckResult", "Diagnosis", "DiagnosisSpec", "Exercise", "FailedCase", "ManualQuestion",
    "RubricItem",
    "Outcome", "Section", "Status", "Value", "all_diagnoses", "check", "describe_value", "get_exercise",
    "hidden_cases", "judge", "public_cases", "run_case", "run_cases",
]
