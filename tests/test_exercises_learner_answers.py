"""Wrong answers written from the prompts alone get the diagnosis that names their mistake, or none.

A diagnosis is a claim about what the learner did: an answer whose mistake no diagnosis describes
must read "no known misconception", never the name of another mistake.
"""

from __future__ import annotations

import pytest
from helpers.learner_answers import KIND_WRONG, LEARNER_WRONG

from lessonlib.exercises import EXERCISES, FAILED, check


def _label(item: tuple) -> str:
    return f"{item[0]}-{getattr(item[2], '__name__', repr(item[2]))}"


@pytest.mark.parametrize(("exercise", "names", "answer"), LEARNER_WRONG, ids=[_label(w) for w in LEARNER_WRONG])
@pytest.mark.parametrize("seed", [None, 20240501])
def test_learner_answer_is_named_for_its_mistake(exercise, names, answer, seed):
    result = check(exercise, answer, seed=seed, quiet=True)
    assert result.status == FAILED
    assert result.points < result.max_points
    assert set(result.diagnosis_names) == names, result.report_text()


def test_every_exercise_has_learner_answers():
    counts = {name: 0 for name in EXERCISES}
    for exercise, _, _ in LEARNER_WRONG:
        counts[exercise] += 1
    assert all(n >= 3 for n in counts.values()), counts


def test_every_exercise_has_answers_of_the_known_kinds_named_and_unnamed():
    """For every auto-graded exercise, at least two answers with one slip of a known kind that their
    diagnosis must name, and one whose slip no diagnosis describes (it must read "no known misconception")."""
    named = {name: 0 for name in EXERCISES}
    unnamed = {name: 0 for name in EXERCISES}
    for exercise, names, _, _ in KIND_WRONG:
        (named if names else unnamed)[exercise] += 1
    assert all(n >= 2 for n in named.values()), named
    assert all(n >= 1 for n in unnamed.values()), unnamed

