"""What a check returns: points, status, failed cases and diagnoses, as data and as a report.

The report is plain text everywhere and HTML in Jupyter; tests and the grader read the data.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any


class Status(str, Enum):
    """Every status an exercise can end with, in a check or in the grader (one list for both).

    Members are strings ("passed" == Status.PASSED), so stored gradebooks read back unchanged, and
    ``str()`` and f-strings give the plain value on every Python, as ``enum.StrEnum`` (3.11+) does.
    A check gives the first four; the grader adds the ones about submissions and running code.
    """

    __str__ = str.__str__
    __format__ = str.__format__

    PASSED = "passed"
    FAILED = "failed"  # some cases wrong
    NOT_ATTEMPTED = "not_attempted"  # the stub is still there (or no written answer yet)
    ERROR = "error"  # the check itself could not run (unknown exercise name, mismatched inputs)
    NEEDS_MANUAL = "needs_manual_grading"  # a written answer, for a person to grade
    GRADED_BY_HAND = "graded_by_hand"  # a written answer once its points are given in manual.csv
    NOT_SUBMITTED = "not_submitted"  # no such notebook handed in
    WRONG_NOTEBOOK = "wrong_notebook"  # not handed in; a notebook the assignment does not grade was, instead
    MALFORMED = "malformed"  # the notebook file could not be read as a notebook
    TOO_LONG = "too_long"  # the notebook holds more code than the grader analyses
    MISSING_ANSWER = "missing_answer"  # the answer cell was deleted, or no longer defines the function
    CELL_ERROR = "cell_error"  # the answer cell does not parse, or raised before defining it
    TIMEOUT = "timeout"  # past the CPU-time or wall-clock allowance
    MEMORY = "memory"  # out of memory (the address-space limit)
    PROCESS_LIMIT = "process_limit"  # tried to start more processes than allowed
    EXITED = "exited"  # called sys.exit() or os._exit()
    CRASHED = "crashed"  # the process running the answer died or sent garbage
    TOO_LARGE = "result_too_large"  # returned far more data than the grader accepts
    USES_LESSONLIB = "uses_lessonlib"  # calls lessonlib's implementation instead of its own
    STOPPED_GRADER = "stopped_grader"  # its worker died while it ran; not run again


# The statuses a check gives, by the names the exercise modules use.
PASSED, FAILED, NOT_ATTEMPTED, ERROR = Status.PASSED, Status.FAILED, Status.NOT_ATTEMPTED, Status.ERROR

MAX_CASES_SHOWN = 3


@dataclass(frozen=True)
class FailedCase:
    """One case the answer did not pass: what was expected, what came back, and why it differs.

    reason is a stable code: raised, not_implemented, wrong_type, not_an_array, wrong_shape,
    wrong_dtype, non_finite, wrong_values, changed_input (it wrote into an array it was given), or
    a requirement's own code (e.g. memory). hidden: the case (or the requirement's evidence) is a
    hidden one: counted for the learner, never shown.
    """

    case: str
    description: str
    reason: str
    expected: str
    got: str
    detail: str = ""
    hidden: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """A misconception the answer's behaviour shows, with a hint and the section to reread."""

    name: str
    title: str
    message: str
    hint: str
    notebook: str
    section: str
    cases: tuple[str, ...] = ()

    @property
    def reread(self) -> str:
        return f"{self.notebook}, section '{self.section}'"


@dataclass
class CheckResult:
    """The result of checking one exercise (returned by ``check`` and by ``judge``).

    passed_cases and total_cases count every case (and requirement), hidden ones included;
    hidden_passed and hidden_total count the hidden ones alone. failed_cases holds the hidden
    failures too (marked ``hidden``) for the instructor's gradebook; the reports list public ones
    only. diagnoses rest on public cases alone, so that naming a misconception never tells a
    learner which hidden case failed; instructor_diagnoses rest on every case (the class report).
    """

    exercise: str
    status: Status
    points: float
    max_points: float
    passed_cases: int = 0
    total_cases: int = 0
    failed_cases: list[FailedCase] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    message: str = ""
    hidden_passed: int = 0
    hidden_total: int = 0
    instructor_diagnoses: list[Diagnosis] = field(default_factory=list)

    @property
    def diagnosis_names(self) -> list[str]:
        return [d.name for d in self.diagnoses]

    @property
    def public_failed(self) -> list[FailedCase]:
        """The failed cases a learner may see: public ones (and requirements judged on them)."""
        return [f for f in self.failed_cases if not f.hidden]

    def for_learner(self) -> CheckResult:
        """This result as a learner may hold it: hidden cases counted, nothing else of them kept."""
        return replace(self, failed_cases=self.public_failed, instructor_diagnoses=[])

    @property
    def full_marks(self) -> bool:
        return self.status == Status.PASSED and self.points == self.max_points

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready) for a gradebook or feedback file."""
        data = asdict(self)
        for d, diag in zip(data["diagnoses"], self.diagnoses):
            d["reread"] = diag.reread
        return data

    def report_text(self) -> str:
        return render_text(self)

    def report_html(self) -> str:
        return render_html(self)

    def __str__(self) -> str:
        return render_text(self)

    def _ipython_display_(self) -> None:
        # check() has already shown this result in the running cell: do not show it twice
        # when the cell ends with the check call.
        if id(self) not in _SHOWN_THIS_CELL:
            _display_rich(self)


_SHOWN_THIS_CELL: set[int] = set()
_HOOKED: list[bool] = []


def jupyter_shell() -> Any:
    """The running IPython kernel's shell when inside Jupyter, else None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or not getattr(shell, "kernel", None):
        return None
    return shell


def _display_rich(result: CheckResult) -> None:
    from IPython.display import display

    display({"text/plain": render_text(result), "text/html": render_html(result)}, raw=True)


def show(result: CheckResult) -> None:
    """Show the report: rich HTML (with a plain-text copy) in Jupyter, printed text elsewhere."""
    shell = jupyter_shell()
    if shell is None:
        print(render_text(result))
        return
    _display_rich(result)
    _SHOWN_THIS_CELL.add(id(result))
    if not _HOOKED:
        shell.events.register("post_run_cell", lambda *_: _SHOWN_THIS_CELL.clear())
        _HOOKED.append(True)


def _cases(n: int) -> str:
    return "1 case" if n == 1 else f"all {n} cases"


def _points(x: float) -> str:
    return f"{x:g}"


def headline(result: CheckResult) -> str:
    """The first line of a report."""
    name = result.exercise
    score = f"{_points(result.points)} / {_points(result.max_points)} points"
    if result.status == Status.PASSED:
        return f"{name}: passed, {score} ({_cases(result.total_cases)})"
    if result.status == Status.NOT_ATTEMPTED:
        return f"{name}: not attempted yet ({score})"
    if result.status == Status.ERROR:
        return f"{name}: the check could not run"
    return f"{name}: failed, {score} ({counts(result)})"


def counts(result: CheckResult) -> str:
    """How many cases passed: public and hidden apart when there are hidden ones (never which)."""
    if not result.hidden_total:
        return f"{result.passed_cases} of {result.total_cases} cases passed"
    public_passed = result.passed_cases - result.hidden_passed
    public_total = result.total_cases - result.hidden_total
    return (f"{public_passed} of {public_total} public cases passed; "
            f"{hidden_line(result.hidden_passed, result.hidden_total)}")


def hidden_line(passed: int, total: int) -> str:
    """All a learner is told of hidden cases: how many of them passed."""
    return f"{passed} of {total} hidden cases passed"


HIDDEN_ONLY = ("Every public case passed; only hidden cases failed. Hidden cases are counted, never shown: try "
               "your answer on inputs of your own (other sizes, edge cases) against the notebook's definition.")


def render_text(result: CheckResult) -> str:
    """The plain-text report."""
    lines = [headline(result)]
    if result.message:
        lines.append(result.message)
    if result.status != Status.FAILED:
        return "\n".join(lines)
    shown = result.public_failed
    if not shown:
        return "\n".join([*lines, "", HIDDEN_ONLY])
    if result.diagnoses:
        lines += ["", "What the answer shows:"]
        for d in result.diagnoses:
            lines += [
                f"  * {d.title} [{d.name}]",
                f"    {d.message}",
                f"    Hint: {d.hint}",
                f"    Reread: {d.reread}",
            ]
    else:
        lines += ["", "No known misconception matches these failures: compare expected and got below."]
    lines += ["", "Failed cases:"]
    for f in shown[:MAX_CASES_SHOWN]:
        lines.append(f"  {f.case}: {f.description}")
        lines.append(f"    expected: {_indent(f.expected, 14)}")
        lines.append(f"    got:      {_indent(f.got, 14)}")
        if f.detail:
            lines.append(f"    {f.detail}")
    more = len(shown) - MAX_CASES_SHOWN
    if more > 0:
        lines.append(f"  ... and {more} more failed case(s)")
    return "\n".join(lines)


def _indent(text: str, width: int) -> str:
    return text.replace("\n", "\n" + " " * width)


_STATUS_STYLE = {
    Status.PASSED: ("#1a7f37", "passed"),
    Status.FAILED: ("#b35900", "failed"),
    Status.NOT_ATTEMPTED: ("#57606a", "not attempted yet"),
    Status.ERROR: ("#8250df", "could not run"),
}


def render_html(result: CheckResult) -> str:
    """The HTML report shown in Jupyter (status in words, not colour alone)."""
    esc = html.escape
    colour, word = _STATUS_STYLE.get(result.status, ("#57606a", result.status))
    score = f"{_points(result.points)} / {_points(result.max_points)} points"
    if result.status == Status.FAILED:
        score += f" ({counts(result)})"
    elif result.status == Status.PASSED:
        score += f" ({_cases(result.total_cases)})"
    parts = [
        f'<div class="lessonlib-check" style="border-left: 4px solid {colour}; padding: 0.3em 0.8em;">',
        f"<p><code>{esc(result.exercise)}</code>: <strong>{esc(word)}</strong>, {esc(score)}</p>",
    ]
    if result.message:
        parts.append(f"<p>{esc(result.message)}</p>")
    shown = result.public_failed
    if result.status == Status.FAILED and not shown:
        parts.append(f"<p>{esc(HIDDEN_ONLY)}</p>")
    elif result.status == Status.FAILED:
        if result.diagnoses:
            parts.append("<p><strong>What the answer shows</strong></p><ul>")
            for d in result.diagnoses:
                parts.append(
                    f"<li><strong>{esc(d.title)}</strong> <code>{esc(d.name)}</code><br>{esc(d.message)}"
                    f"<br><em>Hint:</em> {esc(d.hint)}<br><em>Reread:</em> {esc(d.reread)}</li>"
                )
            parts.append("</ul>")
        else:
            parts.append("<p>No known misconception matches these failures: compare expected and got below.</p>")
        parts.append("<p><strong>Failed cases</strong></p><ul>")
        for f in shown[:MAX_CASES_SHOWN]:
            detail = f"<br>{esc(f.detail)}" if f.detail else ""
            parts.append(
                f"<li><code>{esc(f.case)}</code> {esc(f.description)}"
                f"<pre>expected: {esc(_indent(f.expected, 10))}\ngot:      {esc(_indent(f.got, 10))}</pre>"
                f"{detail}</li>"
            )
        more = len(shown) - MAX_CASES_SHOWN
        if more > 0:
            parts.append(f"<li>... and {more} more failed case(s)</li>")
        parts.append("</ul>")
    parts.append("</div>")
    return "\n".join(parts)
