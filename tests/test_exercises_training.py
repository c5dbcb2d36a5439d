"""Exercise 6.1 and question 6.2: the rubric, where the model answer lives, and the measurement behind it."""

from __future__ import annotations

from pathlib import Path

import nbformat

from lessonlib.exercises.registry import MANUAL_QUESTIONS

ROOT = Path(__file__).resolve().parents[1]
QUESTION = MANUAL_QUESTIONS["q6_streaming"]


def _cells(folder: str) -> dict[str, nbformat.NotebookNode]:
    nb = nbformat.read(ROOT / folder / QUESTION.notebook, as_version=4)
    return {c.get("id"): c for c in nb.cells}


def _measured() -> dict[str, tuple[float, float]]:
    """model -> (share changed with random later tokens, with one repeated token), as the solutions printed."""
    cell = _cells("solutions")["q6-measured"]
    text = "".join(out.get("text", "") for out in cell.outputs)
    rows = [line.split() for line in text.splitlines()[1:] if line.strip()]
    return {name: (float(random), float(repeated)) for name, random, repeated in rows}


def test_the_question_has_anchors_for_every_score_and_learners_see_the_items():
    assert QUESTION.points == 4 and all(len(item.anchors) == 3 for item in QUESTION.rubric)
    prompt = _cells("exercises")["q6-prompt"].source
    assert all(item.criterion in prompt for item in QUESTION.rubric)


def test_the_graders_rubric_is_the_registrys_and_stays_out_of_the_exercise_notebook():
    rubric = _cells("solutions")["q6-rubric"].source
    for item in QUESTION.rubric:
        assert item.criterion in rubric and all(anchor in rubric for anchor in item.anchors)
    released = "\n".join(c.source for c in _cells("exercises").values())
    assert "Model answer" not in released and "For graders" not in released and "0.95 (T5" not in released


def test_the_model_answer_quotes_what_the_solutions_measured():
    measured = _measured()
    masked = [name for name in measured if "causal" in name]
    assert sorted(masked) == ["previous_alibi_causal", "previous_none_causal", "previous_none_causal_2layers"]
    assert all(measured[name] == (0.0, 0.0) for name in masked)  # a guarantee: no prediction ever moves
    answer = _cells("solutions")["q6-streaming"].source
    for name, quoted in (("previous_rope", "0.01 (RoPE)"), ("previous_relative", "0.95 (T5 buckets)")):
        assert measured[name][0] == 0.0 and f"{measured[name][1]:.2f}" in quoted and quoted in answer
    for name in ("previous_sinusoidal", "previous_learned"):  # no change on random futures, some on one repeated
        assert measured[name][0] == 0.0 < measured[name][1]
    for name in ("previous_none", "previous_alibi"):  # these change many even with random later tokens
        assert measured[name][0] > 0.3
