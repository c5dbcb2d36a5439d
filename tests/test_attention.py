"""Unit tests of lessonlib.attention against formulas, the lesson's fixtures, and bad input."""

import math

import numpy as np
import pytest

import lessonlib as L
from lessonlib import fixtures

RNG = np.random.default_rng(1234)


def reference_attention(q, k, v, allowed=None):
    """Row by row with the standard formulas: the slow, obvious version."""
    scores = q @ k.T / math.sqrt(q.shape[-1])
    out = np.zeros((q.shape[0], v.shape[-1]))
    weights = np.zeros_like(scores)
    for i in range(q.shape[0]):
        keep = np.ones(k.shape[0], bool) if allowed is None else allowed[i]
        if not keep.any():
            continue
        e = np.exp(scores[i, keep] - scores[i, keep].max())
        weights[i, keep] = e / e.sum()
        out[i] = weights[i] @ v
    return out, weights, scores


def test_first_fixture_matches_the_lesson():
    f = fixtures.SCALING
    r = L.scaled_dot_product_attention(f.query, f.keys, f.values)
    assert r.weights.shape == (2,) and np.ndim(r.output) == 0
    assert fixtures.format_scaling(r.weights, r.output) == f.expected_output
    assert fixtures.format_scaling(*fixtures.scaling_reference()) == f.expected_output
    np.testing.assert_allclose(r.scores, [1 / math.sqrt(2), 0.0])


def test_second_fixture_matches_the_lesson():
    f = fixtures.MASKING
    w = L.masked_softmax(np.array(f.scores), np.array(f.allowed))
    assert fixtures.format_masking(w) == f.expected_output
    assert fixtures.format_masking(fixtures.masking_reference()) == f.expected_output
    assert w[2] == 0.0


def test_a_difference_of_rounding_prints_the_same_whatever_its_size():
    """0.0 with one NumPy, 5.55e-17 with another (NumPy 1.26 on Python 3.10): one printed line for both."""
    rounding = fixtures.format_difference(5.551115123125783e-17)
    assert fixtures.format_difference(0.0) == rounding == "below 1e-12, rounding only"
    assert fixtures.format_difference(2.5e-7) == "2.5e-07"


def test_softmax_is_stable_and_normalised():
    w = L.softmax(np.array([1000.0, 1001.0, 1002.0]))
    np.testing.assert_allclose(w, L.softmax(np.array([0.0, 1.0, 2.0])))
    assert np.isclose(w.sum(), 1.0)
    assert L.softmax(np.array([[1, 2], [3, 4]])).dtype == np.float64  # integers promoted


def test_softmax_keeps_float32():
    assert L.softmax(np.ones(3, np.float32)).dtype == np.float32


def test_scores_are_scaled_dot_products():
    q, k = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
    np.testing.assert_allclose(L.attention_scores(q, k), q @ k.T / 2.0)
    np.testing.assert_allclose(L.attention_scores(q, k, scale=1.0), q @ k.T)


@pytest.mark.parametrize("with_mask", [False, True])
def test_sdpa_matches_row_by_row_reference(with_mask):
    q, k, v = RNG.normal(size=(4, 8)), RNG.normal(size=(6, 8)), RNG.normal(size=(6, 3))
    allowed = RNG.random((4, 6)) > 0.4 if with_mask else None
    r = L.scaled_dot_product_attention(q, k, v, mask=allowed)
    out, weights, scores = reference_attention(q, k, v, allowed)
    np.testing.assert_allclose(r.output, out, atol=1e-12)
    np.testing.assert_allclose(r.weights, weights, atol=1e-12)
    np.testing.assert_allclose(r.scores, scores, atol=1e-12)


def test_sdpa_batches_and_value_width_is_free():
    q, k, v = RNG.normal(size=(2, 3, 5, 4)), RNG.normal(size=(2, 3, 7, 4)), RNG.normal(size=(2, 3, 7, 9))
    r = L.scaled_dot_product_attention(q, k, v)
    assert r.output.shape == (2, 3, 5, 9) and r.weights.shape == (2, 3, 5, 7)
    out, _, _ = reference_attention(q[1, 2], k[1, 2], v[1, 2])
    np.testing.assert_allclose(r.output[1, 2], out, atol=1e-12)


def test_custom_scale():
    q, k, v = RNG.normal(size=(2, 4)), RNG.normal(size=(3, 4)), RNG.normal(size=(3, 2))
    r = L.scaled_dot_product_attention(q, k, v, scale=1.0)
    np.testing.assert_allclose(r.weights, L.softmax(q @ k.T))


def test_output_is_convex_combination_of_values():
    q, k, v = RNG.normal(size=(6, 4)), RNG.normal(size=(5, 4)), RNG.normal(size=(5,))
    out = L.scaled_dot_product_attention(q, k, v).output  # scalar values -> (6,)
    assert out.shape == (6,)
    assert np.all(out >= v.min()) and np.all(out <= v.max())


class TestMaskedSoftmax:
    def test_fully_masked_policies(self):
        scores = np.array([[1.0, 2.0], [3.0, 4.0]])
        allowed = np.array([[True, False], [False, False]])
        zeros = L.masked_softmax(scores, allowed)
        np.testing.assert_array_equal(zeros, [[1.0, 0.0], [0.0, 0.0]])
        nan = L.masked_softmax(scores, allowed, fully_masked="nan")
        assert np.all(np.isnan(nan[1])) and nan[0, 0] == 1.0
        with pytest.raises(ValueError, match="1 row"):
            L.masked_softmax(scores, allowed, fully_masked="raise")
        with pytest.raises(ValueError, match="fully_masked must be one of"):
            L.masked_softmax(scores, allowed, fully_masked="uniform")

    def test_masked_key_gets_zero_even_with_huge_score(self):
        w = L.masked_softmax(np.array([0.0, 1e300]), np.array([True, False]))
        assert w.tolist() == [1.0, 0.0]

    def test_mask_broadcasts_over_queries(self):
        scores = RNG.normal(size=(2, 3, 4))
        key_allowed = np.array([[True, True, False, False], [True, True, True, True]])
        w = L.masked_softmax(scores, key_allowed[:, None, :])
        assert np.all(w[0, :, 2:] == 0.0)
        np.testing.assert_allclose(w.sum(-1), 1.0)

    def test_keeps_dtype(self):
        w = L.masked_softmax(np.ones((2, 3), np.float16), np.ones((2, 3), bool))
        assert w.dtype == np.float16


class TestBadInput:
    def test_width_mismatch_names_both_widths(self):
        with pytest.raises(ValueError, match="d_q=3.*d_k=4"):
            L.scaled_dot_product_attention(np.ones((2, 3)), np.ones((5, 4)), np.ones((5, 2)))

    def test_value_length_must_match_keys(self):
        with pytest.raises(ValueError, match="S=5"):
            L.scaled_dot_product_attention(np.ones((2, 4)), np.ones((5, 4)), np.ones((6, 2)))

    @pytest.mark.parametrize("mask", [np.ones((2, 5)), np.ones((2, 5), int), np.zeros((2, 5), np.float32)])
    def test_non_boolean_mask_refused_with_polarity(self, mask):
        with pytest.raises(TypeError, match="True means 'this key may be attended to'"):
            L.scaled_dot_product_attention(np.ones((2, 4)), np.ones((5, 4)), np.ones((5, 2)), mask=mask)

    def test_mask_that_does_not_broadcast_names_both_shapes(self):
        with pytest.raises(ValueError, match=r"\(2, 5\) and \(3,\)"):
            L.masked_softmax(np.ones((2, 5)), np.ones(3, bool))

    @pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
    def test_non_finite_inputs_refused(self, bad):
        q = np.ones((2, 4))
        q[0, 1] = bad
        with pytest.raises(ValueError, match="query has 1 NaN or infinite entry"):
            L.scaled_dot_product_attention(q, np.ones((5, 4)), np.ones((5, 2)))
        with pytest.raises(ValueError, match="value"):
            L.scaled_dot_product_attention(np.ones((2, 4)), np.ones((5, 4)), np.full((5, 2), bad))

    def test_non_numeric_input_refused(self):
        with pytest.raises(TypeError, match="query must hold numbers"):
            L.scaled_dot_product_attention(np.ones((2, 4), bool), np.ones((5, 4)), np.ones((5, 2)))

    def test_key_needs_a_sequence_axis(self):
        with pytest.raises(ValueError, match=r"key must have shape \(\.\.\., S, d_k\)"):
            L.scaled_dot_product_attention(np.ones(4), np.ones(4), np.ones(4))


class TestMultiHead:
    def test_split_and_merge_are_inverse(self):
        x = RNG.normal(size=(2, 5, 12))
        heads = L.split_heads(x, 3)
        assert heads.shape == (2, 3, 5, 4)
        np.testing.assert_array_equal(heads[:, 1], x[..., 4:8])
        np.testing.assert_array_equal(L.merge_heads(heads), x)

    def test_split_refuses_uneven_heads(self):
        with pytest.raises(ValueError, match="width 10 does not split into 3"):
            L.split_heads(np.ones((2, 10)), 3)

    def test_each_head_is_attention_in_its_own_subspace(self):
        params = L.init_multi_head(8, 2, rng=np.random.default_rng(0))
        x = RNG.normal(size=(5, 8))
        r = L.multi_head_attention(x, None, params)
        assert r.output.shape == (5, 8) and r.weights.shape == (2, 5, 5) and r.head_outputs.shape == (2, 5, 4)
        q, k, v = x @ params.w_q, x @ params.w_k, x @ params.w_v  # (5, 8) each
        for h in range(2):
            cols = slice(4 * h, 4 * h + 4)
            expected = L.scaled_dot_product_attention(q[:, cols], k[:, cols], v[:, cols])
            np.testing.assert_allclose(r.head_outputs[h], expected.output, atol=1e-12)
            np.testing.assert_allclose(r.weights[h], expected.weights, atol=1e-12)
            np.testing.assert_allclose(r.scores[h], expected.scores, atol=1e-12)
        concat = np.concatenate(list(r.head_outputs), axis=-1)  # (5, 8)
        np.testing.assert_allclose(r.output, concat @ params.w_o, atol=1e-12)

    def test_cross_attention_with_other_source_width(self):
        params = L.init_multi_head(8, 4, d_kv_in=6, rng=np.random.default_rng(1))
        r = L.multi_head_attention(RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 7, 6)), params)
        assert r.output.shape == (2, 3, 8) and r.weights.shape == (2, 4, 3, 7)

    def test_mask_with_heads_axis(self):
        params = L.init_multi_head(8, 2)
        pad = L.padding_mask([2, 4], 4)
        mask = L.combine_masks(L.causal_mask(4), pad, heads=True)  # (2, 1, 4, 4)
        r = L.multi_head_attention(RNG.normal(size=(2, 4, 8)), None, params, mask=mask)
        assert np.all(r.weights[0, :, :, 2:] == 0.0)
        assert np.all(np.triu(r.weights[1, 0], 1) == 0.0)

    def test_source_width_checked(self):
        params = L.init_multi_head(8, 2)
        with pytest.raises(ValueError, match="x_kv has width 5 but its projection expects 8"):
            L.multi_head_attention(np.ones((3, 8)), np.ones((4, 5)), params)

    def test_init_refuses_indivisible_width(self):
        with pytest.raises(ValueError, match="d_model=10 does not split into 4 heads"):
            L.init_multi_head(10, 4)
        assert L.init_multi_head(10, 4, d_head=3).w_q.shape == (10, 12)
