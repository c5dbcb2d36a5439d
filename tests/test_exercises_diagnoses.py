"""Every misconception a check knows is named when a deliberately wrong answer shows it."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.exercise_answers import WRONG

from lessonlib.exercises import FAILED, SECTIONS, all_diagnoses, check


def _label(item: tuple) -> str:
    return f"{item[0]}-{item[1]}"


@pytest.mark.parametrize(("exercise", "diagnosis", "answer"), WRONG, ids=[_label(w) for w in WRONG])
def test_wrong_answer_is_diagnosed(exercise, diagnosis, answer):
    result = check(exercise, answer, quiet=True)
    assert result.status == FAILED
    assert result.points < result.max_points
    assert diagnosis in result.diagnosis_names, result.report_text()
    found = next(d for d in result.diagnoses if d.name == diagnosis)
    assert found.hint and found.message and found.cases
    assert found.reread == SECTIONS[all_diagnoses()[diagnosis].section].pointer()


@pytest.mark.parametrize(("exercise", "diagnosis", "answer"), WRONG, ids=[_label(w) for w in WRONG])
def test_diagnosis_also_found_with_hidden_cases(exercise, diagnosis, answer):
    result = check(exercise, answer, seed=20240501, quiet=True)
    assert diagnosis in result.diagnosis_names


def test_every_diagnosis_has_a_wrong_answer():
    tested = {diagnosis for _, diagnosis, _ in WRONG}
    assert tested == set(all_diagnoses())


def test_diagnosis_names_are_short_and_stable_identifiers():
    for name in all_diagnoses():
        assert name.isidentifier() and name == name.lower() and len(name) <= 30


def test_the_issue_list_of_misconceptions_is_covered():
    required = {
        "missing_scale", "scaled_by_d_k", "scaled_by_value_width", "softmax_over_queries",
        "no_max_subtraction", "weights_transposed",
        "zeroed_after_softmax", "renormalised_after_softmax", "scores_times_mask", "inverted_polarity",
        "finite_fill_uniform_row", "nan_for_empty_row",
        "causal_upper_triangle", "causal_diagonal_excluded", "padding_on_query_axis",
        "sin_cos_swapped", "halves_concatenated", "wrong_frequency_exponent", "positions_from_one",
        "rope_half_pairing", "rope_wrong_direction",
        "bytes_off_by_dtype", "bytes_missing_heads", "bytes_missing_batch",
        "online_softmax_not_rescaled", "last_block_dropped", "builds_full_score_matrix",
        "cache_top_left", "cache_off_by_one",
    }
    assert required <= set(all_diagnoses())


def test_a_top_left_mask_of_ones_is_named_for_both_its_slips():
    """np.tril(np.ones((L, S))) is top-left and float: neither diagnosis hides the other."""

    def top_left_ones(lengths, n_queries):
        s = max(lengths)
        real = np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None]  # (B, S): left padding
        return np.tril(np.ones((n_queries, s)))[None] * real[:, None, :]

    result = check("cached_causal_mask", top_left_ones, seed=7, quiet=True)
    assert set(result.diagnosis_names) == {"cache_top_left", "mask_not_boolean"}, result.report_text()
    assert result.points == 0


def test_a_top_left_mask_without_padding_is_named_for_both_its_slips():
    """The same top-left (L, S) mask for every sequence: the alignment and the padding are both named."""

    def top_left_for_all(lengths, n_queries):
        s = max(lengths)
        return np.broadcast_to(np.tril(np.ones((n_queries, s), dtype=bool)), (len(lengths), n_queries, s))

    result = check("cached_causal_mask", top_left_for_all, seed=7, quiet=True)
    assert set(result.diagnosis_names) == {"cache_top_left", "cache_padding_ignored"}, result.report_text()


def test_a_shared_name_means_one_misconception():
    from lessonlib.exercises import EXERCISES

    seen = {}
    for exercise in EXERCISES.values():
        for spec in exercise.diagnoses:
            if spec.name in seen:
                assert seen[spec.name] is spec, spec.name
            seen[spec.name] = spec
