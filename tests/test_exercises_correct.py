"""Correct answers written in different styles get full points and no diagnosis."""

from __future__ import annotations

import pytest
from helpers.exercise_answers import CORRECT

from lessonlib.exercises import EXERCISES, PASSED, check

CASES = [(name, answer) for name, answers in CORRECT.items() for answer in answers]


def _label(item: tuple) -> str:
    name, answer = item
    return f"{name}-{getattr(answer, '__name__', repr(answer))}"


@pytest.mark.parametrize(("exercise", "answer"), CASES, ids=[_label(c) for c in CASES])
@pytest.mark.parametrize("seed", [None, 0, 7])
def test_correct_answer_gets_full_points(exercise, answer, seed):
    result = check(exercise, answer, seed=seed, quiet=True)
    assert result.status == PASSED, result.report_text()
    assert result.points == result.max_points == EXERCISES[exercise].points
    assert result.diagnoses == [] and result.failed_cases == []
    assert result.passed_cases == result.total_cases


def test_every_exercise_has_several_correct_styles():
    assert set(CORRECT) == set(EXERCISES)
    for name, answers in CORRECT.items():
        assert len(answers) >= 3, name
