"""Unit tests of lessonlib.position against the formulas."""

import math

import numpy as np
import pytest

import lessonlib as L

RNG = np.random.default_rng(7)


def test_sinusoidal_matches_formula():
    pe = L.sinusoidal_positions(6, 8)
    for pos in range(6):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle))
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle))


def test_sinusoidal_odd_width_and_dot_products_depend_on_distance():
    assert L.sinusoidal_positions(3, 5).shape == (3, 5)
    pe = L.sinusoidal_positions(50, 16)
    gram = pe @ pe.T  # (50, 50)
    np.testing.assert_allclose(gram[3, 10], gram[20, 27])
    np.testing.assert_allclose(gram[10, 3], gram[3, 10])


def test_learned_positions_lookup_and_limit():
    table = L.LearnedPositions(4, 3, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(table([0, 3]), table.table[[0, 3]])
    with pytest.raises(IndexError, match="position 4 is outside this learned table, which has 4 rows"):
        table([1, 4])
    with pytest.raises(IndexError, match="position -1"):
        table([-1])
    with pytest.raises(TypeError, match="integers"):
        table([0.5])


def rope_formula(x, positions, pairs, base=10000.0):
    """Rotate each named pair (a, b) of coordinates by pos * base^(-2i/d), one scalar at a time."""
    out = x.copy()
    d = x.shape[-1]
    for n, pos in enumerate(positions):
        for i, (a, b) in enumerate(pairs):
            theta = pos * base ** (-2 * i / d)
            out[n, a] = x[n, a] * math.cos(theta) - x[n, b] * math.sin(theta)
            out[n, b] = x[n, a] * math.sin(theta) + x[n, b] * math.cos(theta)
    return out


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_rope_matches_formula_for_both_pairings(pairing):
    x = RNG.normal(size=(5, 8))
    pairs = [(2 * i, 2 * i + 1) for i in range(4)] if pairing == "interleaved" else [(i, i + 4) for i in range(4)]
    np.testing.assert_allclose(L.rope(x, np.arange(5), pairing=pairing), rope_formula(x, range(5), pairs))


def test_rope_keeps_norms_and_scores_depend_on_offset_only():
    q, k = RNG.normal(size=(1, 16)), RNG.normal(size=(1, 16))

    def score(query_pos, key_pos):
        return float(np.sum(L.rope(q, [query_pos]) * L.rope(k, [key_pos])))

    for shift in (1, 100, 1000):
        assert score(7 + shift, 3 + shift) == pytest.approx(score(7, 3), abs=1e-12)
    assert score(8, 3) != pytest.approx(score(7, 3))
    np.testing.assert_allclose(np.linalg.norm(L.rope(q, [123])), np.linalg.norm(q))


def test_rope_pairings_differ_and_batches_broadcast():
    x = RNG.normal(size=(2, 3, 4, 8))
    a, b = L.rope(x, np.arange(4)), L.rope(x, np.arange(4), pairing="half")
    assert a.shape == x.shape and not np.allclose(a, b)


def test_rope_bad_input():
    with pytest.raises(ValueError, match="width must be even, got 5"):
        L.rope(np.ones((3, 5)), np.arange(3))
    with pytest.raises(ValueError, match="pairing must be one of"):
        L.rope(np.ones((3, 4)), np.arange(3), pairing="neox")
    with pytest.raises(ValueError, match=r"positions of shape \(4,\) do not broadcast"):
        L.rope(np.ones((3, 4)), np.arange(4))


def test_alibi_slopes():
    np.testing.assert_allclose(L.alibi_slopes(8), [2.0 ** -(i + 1) for i in range(8)])
    np.testing.assert_allclose(L.alibi_slopes(4), [2.0 ** -(2 * i + 2) for i in range(4)])
    six = L.alibi_slopes(6)  # 4 slopes of n=4, then the odd-position slopes of n=8
    np.testing.assert_allclose(six, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


def test_alibi_bias_and_its_causal_softmax_equivalence():
    bias = L.alibi_bias(4, 4, 2)  # (H, L, S)
    assert bias.shape == (2, 4, 4)
    assert bias[0, 3, 1] == -0.0625 * 2  # slope 1/16 for head 0 of 2, distance 2
    causal = L.causal_mask(4)
    slope = L.alibi_slopes(2)[0]
    scores = RNG.normal(size=(4, 4))
    a = L.masked_softmax(scores + bias[0], causal)
    b = L.masked_softmax(scores + slope * np.arange(4)[None, :], causal)  # +m*j
    np.testing.assert_allclose(a, b, atol=1e-12)
    assert L.alibi_bias(2, 4, 1, align="bottom-right")[0, 1, 3] == 0.0  # query 1 sits at key 3
    top_left = L.alibi_bias(2, 4, 1, align="top-left")[0]  # (L, S)
    np.testing.assert_array_equal(top_left, -2.0**-8 * np.abs(L.key_offsets(2, 4, align="top-left")))
    with pytest.raises(ValueError, match="ALiBi bias for 2 queries and 4 keys needs an explicit align"):
        L.alibi_bias(2, 4, 1)


def test_relative_buckets_t5_layout():
    offsets = np.arange(-200, 201)
    buckets = L.relative_position_bucket(offsets, n_buckets=32, max_distance=128)
    assert buckets[offsets == 0] == 0
    assert buckets[offsets == -5] == 5  # exact for small distances to earlier keys
    assert buckets[offsets == 5] == 16 + 5  # later keys use the upper half
    assert buckets.min() == 0 and buckets.max() == 31
    # 31 of the 32 buckets occur: 0 is the query's own position, 1..15 earlier keys, 17..31 later
    # ones; 16 would be a later key at distance 0 (notebook 03 and the docstring say so)
    assert sorted(set(buckets[offsets < 0])) == list(range(1, 16))
    assert sorted(set(buckets[offsets > 0])) == list(range(17, 32))
    assert 16 not in buckets
    assert buckets[offsets == -200] == buckets[offsets == -128] == 15  # far offsets share the last bucket
    one_way = L.relative_position_bucket(offsets, bidirectional=False, n_buckets=8, max_distance=20)
    assert np.all(one_way[offsets >= 0] == 0) and one_way.max() == 7
    assert np.all(np.diff(buckets[offsets <= 0][::-1]) >= 0)  # monotone in distance
    with pytest.raises(TypeError, match="must be integers"):
        L.relative_position_bucket(np.array([0.5, 1.0]))


def test_relative_position_bias_depends_on_offset_only():
    weights = RNG.normal(size=(32, 3))
    bias = L.relative_position_bias(6, 6, weights)  # (H, L, S)
    assert bias.shape == (3, 6, 6)
    np.testing.assert_array_equal(bias[:, 1, 3], bias[:, 2, 4])
    np.testing.assert_array_equal(bias[:, 0, 0], weights[0])
    with pytest.raises(ValueError, match="n_buckets, n_heads"):
        L.relative_position_bias(3, 3, np.ones(32))


def test_permutation_helpers():
    x = RNG.normal(size=(2, 5, 3))
    perm = np.array([3, 0, 4, 1, 2])
    y = L.permute(x, perm)
    np.testing.assert_array_equal(y[:, 0], x[:, 3])
    np.testing.assert_array_equal(L.permute(y, L.inverse_permutation(perm)), x)
    with pytest.raises(ValueError, match="expected a permutation of 0..4"):
        L.permute(x, [0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="permutation"):
        L.permute(x, [0, 1, 2])
