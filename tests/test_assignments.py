"""The named assignments of the exercise registry, and the lesson assignment above all.

The lesson assignment must check what the source lesson teaches: each of its three goals and three
common errors is caught by one of its exercises, shown here with a wrong answer of the kind learners
write (not the exercises' own models of the mistake), and the written second question is part of
it. Its points are the exercises' own; the guide and `lessonlib exercises list` state them, and its
working time is the timing tool's, about two and a half hours.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from lessonlib.cli import main
from lessonlib.exercises import ASSIGNMENTS, EXERCISES, FAILED, MANUAL_QUESTIONS, check, get_assignment
from lessonlib.exercises.assignments import Assignment, Item

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import course_tables as ct  # noqa: E402
import reading_times as rt  # noqa: E402

LESSON = get_assignment("lesson")


def test_every_item_is_an_exercise_or_a_written_question_of_the_registry():
    for assignment in ASSIGNMENTS.values():
        for item in assignment.entries:
            assert item.name in EXERCISES or item.name in MANUAL_QUESTIONS
        assert assignment.points == sum(
            (EXERCISES.get(n) or MANUAL_QUESTIONS[n]).points for n in assignment.items)


def test_the_grader_gets_each_notebooks_items():
    assert LESSON.by_notebook() == {
        "01_scaling.ipynb": ("scaled_dot_product_attention", "q1_context"),
        "02_masking.ipynb": ("masked_softmax", "causal_mask", "leaks_future", "mask_polarity"),
        "03_position.ipynb": ("is_order_sensitive",),
        "05_interpretation.ipynb": ("q2_attention_not_causal",),
    }
    assert LESSON.questions == ("q2_attention_not_causal",)


def test_an_assignment_of_an_unknown_exercise_is_refused():
    with pytest.raises(KeyError, match="no_such_exercise"):
        Assignment("broken", "a slip", (Item("no_such_exercise", "nothing"),))
    with pytest.raises(ValueError, match="twice"):
        Assignment("twice", "a slip", (Item("causal_mask", "one"), Item("causal_mask", "two")))
    with pytest.raises(KeyError, match="the assignments are lesson"):
        get_assignment("lessons")


# --- the lesson assignment checks the lesson's goals and common errors ----------------------------


def _attention_unscaled(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2)                    # no division by sqrt(d_k)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights


def _softmax_then_zero(scores, allowed):
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.where(allowed, weights / weights.sum(axis=-1, keepdims=True), 0.0)


def _minus_inf_fill(scores, allowed):
    filled = np.where(allowed, scores, -np.inf)                  # an empty row becomes 0 / 0
    with np.errstate(invalid="ignore"):
        weights = np.exp(filled - filled.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)


def _future_allowed(length):
    return np.triu(np.ones((length, length), dtype=bool), k=1)  # True where the key is in the future


def _never_leaks(layer, length, n_queries, d_model):
    return False


def _polarity_by_name(attention_fn):
    return "attend"                                              # read from the argument's name, not probed


def _reversal_only(layer, x):
    reversed_x = x[:, ::-1]                                      # "dog bites man" / "man bites dog"
    return not np.allclose(layer(reversed_x), layer(x)[:, ::-1])


WRONG = {
    "goal 1: scores without 1/sqrt(d_k)": ("scaled_dot_product_attention", _attention_unscaled, "missing_scale"),
    "question 1: the larger value wins": ("q1_context", 6.0, "q1_larger_value_wins"),
    "common error 2: zeroed after the softmax": ("masked_softmax", _softmax_then_zero, "zeroed_after_softmax"),
    "common error 2's prevention: a row with no allowed key": ("masked_softmax", _minus_inf_fill, "nan_for_empty_row"),
    "common error 1: an inverted causal mask": ("causal_mask", _future_allowed, "causal_inverted"),
    "common error 1's prevention test, never run": ("leaks_future", _never_leaks, None),
    "the probe skipped: polarity guessed from a name": ("mask_polarity", _polarity_by_name, None),
    "common error 3's prevention: only a reversal tried": ("is_order_sensitive", _reversal_only, "reversal_only"),
}


@pytest.mark.parametrize("what", list(WRONG))
def test_the_lesson_assignment_catches(what):
    name, answer, diagnosis = WRONG[what]
    assert name in LESSON.items, f"{what}: {name} is not in the lesson assignment"
    result = check(name, answer, quiet=True)
    assert result.status == FAILED and result.points < result.max_points, f"{what}: {result.status}"
    if diagnosis is not None:
        assert diagnosis in result.diagnosis_names, f"{what}: diagnosed {result.diagnosis_names}"


def test_the_lesson_assignment_holds_the_written_second_question():
    question = MANUAL_QUESTIONS["q2_attention_not_causal"]
    assert question.name in LESSON.items and question.rubric
    assert "not by itself explain the final decision causally" in question.question


# --- where it is stated -------------------------------------------------------------------------


def test_its_working_time_is_about_two_and_a_half_hours():
    minutes = rt.assignment_estimate(LESSON.items, ROOT)
    assert rt.hours(minutes) == 2.5, f"the lesson assignment takes {minutes:.0f} min by the timing tool"


def test_the_tool_refuses_an_exercise_no_notebook_holds():
    with pytest.raises(ValueError, match="no_such_exercise"):
        rt.assignment_estimate(["causal_mask", "no_such_exercise"], ROOT)


def test_an_exercise_notebooks_parts_add_up_to_its_time():
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        parts = rt.exercise_parts(path, {q.cell_id: q.name for q in MANUAL_QUESTIONS.values()})
        defined = {name for part in parts for name in part.items}
        expected = {e.name for e in EXERCISES.values() if e.notebook == path.name} | {
            q.name for q in MANUAL_QUESTIONS.values() if q.notebook == path.name}
        assert defined == expected, f"{path.name}: its parts define {sorted(defined)}"
        assert rt.assignment_estimate(sorted(expected), ROOT) == pytest.approx(rt.exercise_estimate(path))


def test_the_guide_states_the_lesson_assignment():
    guide = (ROOT / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    table = ct.lesson_assignment_table(ROOT)
    assert table in guide, f"the guide's table of the lesson assignment differs; write:\n{table}"
    minutes = rt.assignment_estimate(LESSON.items, ROOT)
    said = f"the lesson assignment ({LESSON.points:g} points, {rt.hour_range(minutes)} of work)"
    assert " ".join(guide.split()).count(said) >= 2, f"the session plans should say {said!r}"


def test_exercises_list_prints_the_assignments(capsys):
    assert main(["exercises", "list"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("lesson "))
    assert re.search(rf"\b{LESSON.points:g}\b", line)
    for name in LESSON.items:
        assert f"{name} {LESSON.points_of(name):g}" in line
