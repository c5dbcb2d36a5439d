"""Hidden cases stay hidden: a learner is told how many passed, and nothing else of them.

An answer that is right on the public cases alone (a table of their answers, nothing implemented)
is graded with a secret seed, through ``lessonlib grade``, the Gradescope autograder and ``check``.
No id, description, input or expected value of a hidden case may appear in anything the learner
sees (feedback Markdown and HTML, results.json, the check's text and HTML), while "k of n hidden
cases passed" does. The instructor's grades.json keeps which hidden cases failed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers.markdown_view import shown
from helpers.submissions import masking, write_learner

from lessonlib import cli
from lessonlib.exercises import EXERCISES, check
from lessonlib.grading.gradescope.autograder import assignment

SEED = 31_337
MASKING = "02_masking.ipynb"

# Right on the public lengths (1, 4, 6), an inverted mask on any other: every hidden case fails,
# unless the seed draws a public length (the tests below count rather than assume).
LOOKUP_CAUSAL = '''
import numpy as np


def causal_mask(length):
    mask = np.tril(np.ones((length, length), dtype=bool))
    return mask if length in (1, 4, 6) else ~mask
'''


def _causal(length: int) -> np.ndarray:
    mask = np.tril(np.ones((length, length), dtype=bool))
    return mask if length in (1, 4, 6) else ~mask


def _hidden_expected() -> tuple[int, int]:
    """(hidden cases the lookup answer passes, hidden cases) under SEED."""
    cases = EXERCISES["causal_mask"].hidden_cases(SEED)
    return sum(c.args[0] in (1, 4, 6) for c in cases), len(cases)


def _secrets() -> list[str]:
    """What must not reach a learner: each hidden case's id and description (unless a public case
    is described alike), and the numbers it was called with."""
    exercise = EXERCISES["causal_mask"]
    public = {c.description for c in exercise.public_cases()}
    found = []
    for case in exercise.hidden_cases(SEED):
        found.append(case.id)
        if case.description not in public:
            found += [case.description, f"shape ({case.args[0]}, {case.args[0]})"]
    return found


def _assert_hidden(text: str) -> None:
    passed, total = _hidden_expected()
    assert f"{passed} of {total} hidden cases passed" in text, text
    for secret in _secrets():
        assert secret not in text, secret
    assert not re.search(r"hidden-\d", text), text


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hidden")
    write_learner(root / "subs" / "lookup", masking({"causal_mask": LOOKUP_CAUSAL}))
    assert cli.main(["grade", str(root / "subs"), "--out", str(root / "out"), "--seed", str(SEED), "--notebooks",
                     MASKING, "--timeout", "5", "--memory", "512", "--quiet"]) == 0
    return root / "out"


def test_the_instructor_keeps_which_hidden_cases_failed(graded: Path) -> None:
    passed, total = _hidden_expected()
    assert passed < total, "the seed draws only public lengths: choose another"
    (learner,) = json.loads((graded / "grades.json").read_text())["learners"]
    grade = next(e for e in learner["exercises"] if e["exercise"] == "causal_mask")
    assert (grade["hidden_passed"], grade["hidden_total"]) == (passed, total)
    assert grade["points"] < grade["max_points"]
    hidden = [f for f in grade["failed_cases"] if f["hidden"]]
    assert len(hidden) == total - passed and all(f["case"].startswith("hidden-") for f in hidden)
    assert all(f["got"] == "" for f in hidden)  # what learner code returned on them is not kept


def test_feedback_says_how_many_hidden_cases_passed_and_nothing_else(graded: Path) -> None:
    markdown = (graded / "feedback" / "lookup.md").read_text()
    _assert_hidden(markdown)
    _assert_hidden(shown(markdown))
    _assert_hidden((graded / "feedback" / "lookup.html").read_text())
    assert "3 of 3 public cases passed." in shown(markdown)


def test_the_class_report_stays_with_the_instructor(graded: Path) -> None:
    learner_files = [p.relative_to(graded / "feedback").as_posix() for p in (graded / "feedback").rglob("*")]
    assert sorted(learner_files) == ["lookup.html", "lookup.md"]
    assert "hidden-" in (graded / "grades.json").read_text()  # the instructor's files keep the detail


@pytest.mark.parametrize("visibility", ["after_due_date", "visible"])
def test_gradescope_keeps_the_hidden_part_apart(tmp_path: Path, visibility: str) -> None:
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "assignment.json").write_text(json.dumps(assignment([MASKING], SEED, visibility)))
    write_learner(root / "submission", masking({"causal_mask": LOOKUP_CAUSAL}))
    assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "5", "--memory", "512"]) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    public, hidden = tests["02_masking: causal_mask"], tests["02_masking: causal_mask (hidden cases)"]
    passed, total = _hidden_expected()
    assert public["visibility"] == "visible" and hidden["visibility"] == visibility
    assert public["score"] == public["max_score"] > 0 and public["status"] == "passed"  # every public case
    assert hidden["score"] < hidden["max_score"] and public["max_score"] + hidden["max_score"] == 1
    assert "hidden" not in public["output"]  # the public part says nothing of the hidden one
    _assert_hidden(hidden["output"])
    for secret in _secrets():
        assert secret not in json.dumps(results), secret
    assert ("score" in results) == (visibility == "visible")  # else Gradescope adds up what it shows
    assert results["extra_data"]["hidden_visibility"] == visibility


def test_check_with_a_seed_says_how_many_and_nothing_else() -> None:
    result = check("causal_mask", _causal, seed=SEED, quiet=True)
    for text in (result.report_text(), result.report_html()):
        _assert_hidden(text)
    assert not any(secret in repr(result) for secret in _secrets())  # the result a learner holds
    passed, total = _hidden_expected()
    assert (result.hidden_passed, result.hidden_total) == (passed, total)
    assert not result.failed_cases and not result.diagnoses  # public cases all pass: nothing to name
    assert "only hidden cases failed" in result.report_text()


def test_a_diagnosis_shown_to_a_learner_rests_on_public_cases() -> None:
    """An upper-triangle mask on hidden lengths only: the learner is told only the count, since
    naming it would say which hidden inputs failed. No model names it for the instructor either:
    on the public cases the answer does not do what an upper triangle predicts, and a model names
    an answer only when it matches on every case that tells them apart. Wrong everywhere, the
    same mistake is named to both."""

    def upper_on_hidden(length: int) -> np.ndarray:
        mask = np.tril(np.ones((length, length), dtype=bool))
        return mask if length in (1, 4, 6) else mask.T

    def upper_everywhere(length: int) -> np.ndarray:
        return np.triu(np.ones((length, length), dtype=bool))

    from lessonlib.exercises import hidden_cases, judge, public_cases, run_cases

    learner = check("causal_mask", upper_on_hidden, seed=SEED, quiet=True)
    assert learner.diagnoses == [] and learner.instructor_diagnoses == []
    cases = public_cases("causal_mask") + hidden_cases("causal_mask", SEED)
    full = judge("causal_mask", cases, run_cases(upper_on_hidden, cases))
    assert full.diagnoses == [] and full.points < full.max_points
    everywhere = judge("causal_mask", cases, run_cases(upper_everywhere, cases))
    assert "causal_upper_triangle" in [d.name for d in everywhere.diagnoses]
    assert "causal_upper_triangle" in [d.name for d in everywhere.instructor_diagnoses]
