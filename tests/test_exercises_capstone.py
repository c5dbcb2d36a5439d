"""Exercise 7.1 and question 7.2: the cached step against full attention, and the length question's rubric."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from lessonlib.exercises import FAILED, check
from lessonlib.exercises.ex_capstone import CACHED_ATTENTION_STEP, step_reference
from lessonlib.exercises.registry import MANUAL_QUESTIONS

ROOT = Path(__file__).resolve().parents[1]
QUESTION = MANUAL_QUESTIONS["q7_length_table"]


def _cells(folder: str) -> dict[str, nbformat.NotebookNode]:
    nb = nbformat.read(ROOT / folder / QUESTION.notebook, as_version=4)
    return {c.get("id"): c for c in nb.cells}


def _full_causal(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(B, H, T, d_h) causal attention over a whole text, written without a cache."""
    t = q.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (B, H, T, T)
    s = np.where(np.tril(np.ones((t, t), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True) @ v


@pytest.mark.parametrize("chunks", [(1,) * 12, (5, 1, 1, 3, 2), (12,)])
def test_the_reference_step_by_step_is_full_causal_attention(chunks):
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 3, 12, 4)) for _ in range(3))
    keys, values = np.full((2, 3, 20, 4), 1e3), np.full((2, 3, 20, 4), -1e3)  # unwritten rows: no key
    outputs, length = [], 0
    for n in chunks:
        rows = slice(length, length + n)
        out, weights, keys, values = step_reference(q[..., rows, :], k[..., rows, :], v[..., rows, :],
                                                    keys, values, length)
        assert weights.shape == (2, 3, n, length + n)  # the step's work: n x (length + n) scores
        outputs.append(out)
        length += n
    np.testing.assert_allclose(np.concatenate(outputs, axis=2), _full_causal(q, k, v), atol=1e-12)
    np.testing.assert_array_equal(keys[..., :12, :], k)
    assert np.all(keys[..., 12:, :] == 1e3)  # the rows after the text stay as they were


def test_the_reference_reads_only_the_text_so_far_and_overwrites_the_new_rows():
    for case in CACHED_ATTENTION_STEP.public_cases() + CACHED_ATTENTION_STEP.hidden_cases(5):
        q, k, v, keys, values, length = case.args
        n = q.shape[-2]
        assert keys.shape[-2] >= length + n + 1, case.description
        out = step_reference(*case.args)[0]
        read_one_more = values.copy()
        read_one_more[..., length + n:, :] += 100.0
        assert np.allclose(step_reference(q, k, v, keys, read_one_more, length)[0], out)  # unread rows
        spoiled = values.copy()
        spoiled[..., length + n - 1, :] += 100.0  # the last new row is overwritten by the step
        assert np.allclose(step_reference(q, k, v, keys, spoiled, length)[0], out)


def test_an_answer_that_reads_an_unwritten_row_fails():
    def peeks(query, key, value, cache_keys, cache_values, length):
        out, weights, ck, cv = step_reference(query, key, value, cache_keys, cache_values, length)
        return out + 1e-3 * cache_values[..., length + query.shape[-2]:, :].mean(axis=-2, keepdims=True), \
            weights, ck, cv

    result = check("cached_attention_step", peeks, seed=1, quiet=True)
    assert result.status == FAILED and result.points == 0


def test_the_question_has_anchors_for_every_score_and_learners_see_the_items():
    assert QUESTION.points == 4 and all(len(item.anchors) == 3 for item in QUESTION.rubric)
    prompt = _cells("exercises")["q7-prompt"].source
    assert all(item.criterion in prompt for item in QUESTION.rubric)


def test_the_graders_rubric_is_the_registrys_and_stays_out_of_the_exercise_notebook():
    rubric = _cells("solutions")["q7-rubric"].source
    for item in QUESTION.rubric:
        assert item.criterion in rubric and all(anchor in rubric for anchor in item.anchors)
    released = "\n".join(c.source for c in _cells("exercises").values())
    assert "Model answer" not in released and "For graders" not in released and "3.53 nats" not in released


def test_the_model_answer_quotes_what_the_solutions_measured():
    text = "".join(out.get("text", "") for out in _cells("solutions")["q7-measure"].outputs)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:] if line.strip()}
    answer = _cells("solutions")["q7-length-table"].source
    alibi, sinusoidal = rows["alibi"], rows["sinusoidal"]
    assert f"({alibi[0]} at 1x,\n{alibi[-1]} at 8x)" in answer or f"({alibi[0]} at 1x, {alibi[-1]} at 8x)" in answer
    assert re.search(rf"from {sinusoidal[0]} to {sinusoidal[-1]}", " ".join(answer.split()))
    assert rows["learned"][1:] == ["no", "table"] * 3
    far, near = re.search(r"alibi, the last 64 characters: (\d\.\d\d) from 448 or more before them, (\d\.\d\d) from "
                          r"64 to 127", text).groups()
    assert f"score {far} from their whole window and {near} from a\nwindow of 128" in answer
    assert f"about {far} against {near}" in " ".join(QUESTION.rubric[0].anchors)
