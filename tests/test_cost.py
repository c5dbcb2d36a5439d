"""Unit tests of lessonlib.cost: bytes, tiled attention, measuring and slopes."""

import numpy as np
import pytest

import lessonlib as L

RNG = np.random.default_rng(3)


def test_score_matrix_bytes():
    assert L.score_matrix_bytes(1, 1, 4) == 64
    assert L.score_matrix_bytes(2, 8, 1024, dtype="float16") == 2 * 8 * 1024 * 1024 * 2
    assert L.score_matrix_bytes(1, 1, 3, 5, dtype=np.float64) == 120
    assert L.score_matrix_bytes(1, 2, 10, dtype="bfloat16") == 400
    with pytest.raises(TypeError, match="unknown dtype"):
        L.score_matrix_bytes(1, 1, 4, dtype="float17")
    with pytest.raises(ValueError, match="heads must be at least 1"):
        L.score_matrix_bytes(1, 0, 4)


@pytest.mark.parametrize("block_size", [1, 3, 16, 64, 1000])
def test_tiled_equals_dense(block_size):
    q, k, v = RNG.normal(size=(2, 37, 8)), RNG.normal(size=(2, 45, 8)), RNG.normal(size=(2, 45, 5))
    dense = L.scaled_dot_product_attention(q, k, v).output
    np.testing.assert_allclose(L.tiled_attention(q, k, v, block_size=block_size).output, dense, atol=1e-12)


@pytest.mark.parametrize("n_q, n_k", [(20, 20), (12, 30), (30, 12)])
@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_tiled_causal_equals_dense_masked(n_q, n_k, align):
    q, k, v = RNG.normal(size=(n_q, 4)), RNG.normal(size=(n_k, 4)), RNG.normal(size=(n_k, 3))
    mask = L.causal_mask(n_q, n_k, align=align)
    dense = L.scaled_dot_product_attention(q, k, v, mask=mask).output  # zeros for rows with no key
    tiled = L.tiled_attention(q, k, v, block_size=7, causal=True, align=align).output
    np.testing.assert_allclose(tiled, dense, atol=1e-12)


def test_tiled_logsumexp_is_the_dense_normaliser():
    q, k, v = RNG.normal(size=(2, 9, 4)), RNG.normal(size=(2, 11, 4)), RNG.normal(size=(2, 11, 3))
    mask = L.causal_mask(9, 11, align="top-left")
    scores = L.scaled_dot_product_attention(q, k, v, mask=mask).scores  # (2, 9, 11)
    expected = np.log(np.sum(np.where(mask, np.exp(scores), 0.0), axis=-1))  # (2, 9)
    tiled = L.tiled_attention(q, k, v, block_size=4, causal=True, align="top-left")
    np.testing.assert_allclose(tiled.logsumexp, expected, atol=1e-12)
    # bottom-right with more queries than keys: queries 0 and 1 sit before key 0 and see nothing
    short = L.tiled_attention(q[:, :5], k[:, :3], v[:, :3], block_size=2, causal=True, align="bottom-right")
    assert np.all(np.isneginf(short.logsumexp[:, :2])) and np.all(np.isfinite(short.logsumexp[:, 2:]))
    np.testing.assert_array_equal(short.output[:, :2], 0.0)


def test_tiled_float32_stays_float32_and_close():
    q, k, v = (RNG.normal(size=(64, 16)).astype(np.float32) for _ in range(3))
    out = L.tiled_attention(q, k, v, block_size=10).output
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, L.scaled_dot_product_attention(q, k, v).output, atol=1e-6)


def test_tiled_bad_input():
    q = np.ones((4, 3))
    with pytest.raises(ValueError, match="block_size must be at least 1"):
        L.tiled_attention(q, q, q, block_size=0)
    with pytest.raises(ValueError, match="d_q=2 does not match key width d_k=3"):
        L.tiled_attention(np.ones((4, 2)), q, q)
    with pytest.raises(ValueError, match="needs an explicit align"):
        L.tiled_attention(q, np.ones((6, 3)), np.ones((6, 3)), causal=True)
    with pytest.raises(ValueError, match="NaN or infinite"):
        L.tiled_attention(np.full((4, 3), np.nan), q, q)


def test_tiled_memory_does_not_hold_the_score_matrix():
    n, d = 1024, 16
    q, k, v = (RNG.normal(size=(n, d)) for _ in range(3))
    dense = L.measure(lambda: L.scaled_dot_product_attention(q, k, v), repeat=1, warmup=0)
    tiled = L.measure(lambda: L.tiled_attention(q, k, v, block_size=64), repeat=1, warmup=0)
    assert dense.peak_bytes >= n * n * 8  # at least one float64 (n, n) array
    assert tiled.peak_bytes < n * n * 8 / 4


def test_measure_reports_median_and_peak():
    m = L.measure(lambda: np.ones(1_000_000), repeat=3)
    assert len(m.times) == 3 and m.median_seconds == sorted(m.times)[1]
    assert 8_000_000 <= m.peak_bytes < 9_000_000
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        L.measure(lambda: None, repeat=0)


def test_loglog_slope():
    n = np.array([64, 128, 256, 512])
    assert L.loglog_slope(n, 3.0 * n**2) == pytest.approx(2.0)
    assert L.loglog_slope(n, n) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="equal length"):
        L.loglog_slope([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="positive"):
        L.loglog_slope([1, 2], [0, 1])
