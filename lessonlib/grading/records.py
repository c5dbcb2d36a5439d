"""A learner's grades as data: one record per exercise and written question, saved as JSON.

Statuses (the ``status`` column of grades.csv):

========================  ================================================================
passed, failed            judged by the exercise's check (failed: some cases wrong)
not_attempted             the stub is still there (or no written answer yet)
needs_manual_grading      a written answer, copied into the feedback for a person to grade
graded_by_hand            a written answer whose points were given in manual.csv
not_submitted             the learner handed in no such notebook
wrong_notebook            no such notebook, but one this assignment does not grade was handed in
malformed                 the notebook file could not be read as a notebook
too_long                  the notebook holds more code than the grader analyses (not run)
missing_answer            the answer cell was deleted, or no longer defines the function
cell_error                the answer cell does not parse, or raised before defining it
timeout                   the answer ran past its CPU-time or wall-clock allowance
memory                    the answer ran out of memory (its address-space limit, or its processes together)
process_limit             the answer tried to start more processes than allowed
exited                    the answer called sys.exit() or os._exit()
crashed                   the process running the answer died (a signal) or sent garbage
result_too_large          the answer returned far more data than the grader accepts
uses_lessonlib            the answer calls lessonlib's implementation instead of its own
stopped_grader            the worker running the answer died while it ran; not run again
error                     the check itself could not run (a bug: tell the maintainers)
========================  ================================================================
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from lessonlib.exercises.results import Status

# The statuses by the short names the grading modules use; Status is their one definition.
PASSED, FAILED, NOT_ATTEMPTED, NEEDS_MANUAL = Status.PASSED, Status.FAILED, Status.NOT_ATTEMPTED, Status.NEEDS_MANUAL
NOT_SUBMITTED, MALFORMED, MISSING_ANSWER = Status.NOT_SUBMITTED, Status.MALFORMED, Status.MISSING_ANSWER
CELL_ERROR, TIMEOUT, MEMORY, PROCESS_LIMIT = Status.CELL_ERROR, Status.TIMEOUT, Status.MEMORY, Status.PROCESS_LIMIT
EXITED, CRASHED, TOO_LARGE, USES_LESSONLIB = Status.EXITED, Status.CRASHED, Status.TOO_LARGE, Status.USES_LESSONLIB
STOPPED_GRADER, ERROR, GRADED_BY_HAND = Status.STOPPED_GRADER, Status.ERROR, Status.GRADED_BY_HAND
TOO_LONG, WRONG_NOTEBOOK = Status.TOO_LONG, Status.WRONG_NOTEBOOK

STATUS_WORDS = {
    PASSED: "passed", FAILED: "failed", NOT_ATTEMPTED: "not attempted",
    NEEDS_MANUAL: "needs manual grading", GRADED_BY_HAND: "graded by hand", NOT_SUBMITTED: "not submitted",
    MALFORMED: "notebook could not be read", MISSING_ANSWER: "answer cell missing",
    TOO_LONG: "notebook too long to grade", WRONG_NOTEBOOK: "another notebook handed in instead",
    CELL_ERROR: "answer cell error", TIMEOUT: "stopped: time limit", MEMORY: "stopped: memory limit",
    PROCESS_LIMIT: "stopped: process limit", EXITED: "exited the interpreter", CRASHED: "crashed",
    TOO_LARGE: "result too large", USES_LESSONLIB: "calls lessonlib instead of its own code",
    STOPPED_GRADER: "stopped the grader", ERROR: "the check could not run",
}

# Statuses an instructor should look at (the learner's code did something unusual).
FLAGGED = frozenset({WRONG_NOTEBOOK, MALFORMED, TOO_LONG, MISSING_ANSWER, CELL_ERROR, TIMEOUT, MEMORY,
                     PROCESS_LIMIT, EXITED, CRASHED, TOO_LARGE, USES_LESSONLIB, STOPPED_GRADER, ERROR})


# A grade made when the grader itself failed on a submission (``run.batch``): its answer was not read,
# so no decision about the answer is withdrawn or suspended for it, and it waits for the instructor.
NOT_READ = "not read"
GRADER_FAILED = "the grader failed on this submission: run the same command again to grade it"


def answer_digest(text: str | None) -> str:
    """The sha256 of an answer's text (an answer cell's source, a written answer; "" when there is none):
    what a hand grade or an override was given for."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def answer_id(grade: ExerciseGrade) -> str:
    """A short name of the answer a grade was given for (12 hex digits of its digest), as manual.csv
    carries it beside each written answer."""
    return (grade.answer_sha256 or answer_digest(grade.answer_text))[:12]


@dataclass
class ExerciseGrade:
    """One exercise (or written question) of one learner.

    points is None for a written answer awaiting a person. diagnosis: one line for the gradebook
    (misconceptions found, or the reason for a status). reason: the sentence for the feedback.
    Hidden cases: the learner's feedback says hidden_passed of hidden_total and nothing else;
    failed_cases keeps their ids and descriptions (marked ``hidden``) for the instructor, never
    what the answer returned. diagnoses rest on public cases (the learner's); instructor_diagnoses
    on every case (grades.csv and the class report).

    answer_sha256: the digest of the answer graded (``answer_digest``), so that a person's decision
    about it is tied to it. override_reason: set when the points are an instructor's override. review:
    a sentence for the instructor when a decision about this exercise needs a look (a hand grade
    withdrawn or an override suspended because the answer changed); never shown to the learner.
    """

    notebook: str
    exercise: str
    points: float | None
    max_points: float
    status: str
    diagnosis: str = ""
    reason: str = ""
    kind: str = "auto"  # or "manual"
    passed_cases: int = 0
    total_cases: int = 0
    diagnoses: list[dict[str, Any]] = field(default_factory=list)
    failed_cases: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    answer_text: str | None = None  # a written answer, copied for the person grading it
    hidden_passed: int = 0
    hidden_total: int = 0
    instructor_diagnoses: list[dict[str, Any]] = field(default_factory=list)
    answer_sha256: str = ""
    override_reason: str = ""
    review: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExerciseGrade:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class LearnerResult:
    """Everything graded for one learner: saved as soon as it is known."""

    learner: str
    key: str
    fingerprint: str
    isolation: str
    graded_at: str
    exercises: list[ExerciseGrade] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    lms_id: str = ""  # the LMS's id for this learner (Canvas user id, Moodle participant id)
    late: bool = False  # the LMS marked the submission late
    late_deducted: float = 0.0  # points the assignment's late policy took off the total
    late_note: str = ""  # the late policy's sentence for late work ("" when on time, or when no time and no flag)
    review: list[str] = field(default_factory=list)  # decisions about the learner (not one exercise) to look at

    @property
    def points(self) -> float:
        """Every point earned (automatic checks, and written answers once graded by hand), less
        what the late policy deducted."""
        return round(sum(e.points or 0.0 for e in self.exercises) - self.late_deducted, 2)

    @property
    def max_points(self) -> float:
        """Every point there is, written answers included."""
        return round(sum(e.max_points for e in self.exercises), 2)

    @property
    def auto_points(self) -> float:
        return round(sum(e.points or 0.0 for e in self.exercises if e.kind == "auto"), 2)

    @property
    def auto_max_points(self) -> float:
        return round(sum(e.max_points for e in self.exercises if e.kind == "auto"), 2)

    @property
    def manual_pending(self) -> float:
        return round(sum(e.max_points for e in self.exercises if e.status == NEEDS_MANUAL), 2)

    @property
    def undecided(self) -> list[ExerciseGrade]:
        """Exercises whose score waits for the instructor's decision (an override suspended: the answer
        changed after it was given)."""
        return [e for e in self.exercises if e.review and e.status != NEEDS_MANUAL and e.answer_sha256 != NOT_READ]

    @property
    def grader_failed(self) -> bool:
        """The grader failed on this learner's submission: nothing of it was graded (see ``NOT_READ``)."""
        return any(e.answer_sha256 == NOT_READ for e in self.exercises)

    @property
    def flagged(self) -> list[ExerciseGrade]:
        return [e for e in self.exercises if e.status in FLAGGED or e.review]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(points=self.points, max_points=self.max_points, manual_pending=self.manual_pending)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LearnerResult:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "exercises"}
        return cls(**fields, exercises=[ExerciseGrade.from_dict(e) for e in data.get("exercises", [])])


# --- in words -------------------------------------------------------------------------------------

SUMMARY_MARK = "Automatic grading:"  # how the LMS comment's summary begins (and is found again)


def num(x: float | None) -> str:
    """Points as people read them: ``3``, ``1.5``; "" for none."""
    return "" if x is None else f"{x:g}"


def overrides_sentence(result: LearnerResult) -> str:
    """Which scores the instructor set, and why ("" when none): a total is never called automatic
    without saying so."""
    set_by_hand = [g for g in result.exercises if g.override_reason]
    if not set_by_hand:
        return ""
    return "Set by your instructor: " + "; ".join(f"{g.exercise} {num(g.points)} of {num(g.max_points)} "
                                                  f"({g.override_reason})" for g in set_by_hand) + "."


def summary_text(result: LearnerResult | None, *, most: int = 3) -> str:
    """A few plain sentences for an LMS comment box: points, what to revisit, what is still to grade."""
    if result is None:
        return f"{SUMMARY_MARK} no submission was found."
    auto = [g for g in result.exercises if g.kind == "auto"]
    passed = sum(g.status == PASSED for g in auto)
    text = (f"{SUMMARY_MARK} {num(result.auto_points)} / {num(result.auto_max_points)} points "
            f"({passed} of {len(auto)} exercises passed).")
    if overrides_sentence(result):
        text += " " + overrides_sentence(result)
    revisit = [g.exercise for g in auto if g.status != PASSED]
    if revisit:
        more = f" and {len(revisit) - most} more" if len(revisit) > most else ""
        text += f" To revisit: {', '.join(revisit[:most])}{more}."
    if result.manual_pending:
        text += f" Written answers ({num(result.manual_pending)} points) are graded by hand."
    elif any(g.status == GRADED_BY_HAND for g in result.exercises):
        text += f" Total with the written answers: {num(result.points)} / {num(result.max_points)} points."
    return text + " Your feedback file has the details."
