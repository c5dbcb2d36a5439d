"""The fast paths give the plain path's numbers; nothing here is timed.

Large inputs to dense attention, softmax and masked_softmax are done in blocks of query rows on
several threads, and tiled attention runs its query blocks on threads. To reach those paths with
small inputs, the tests shrink the switch-over size and the block size; they then compare with
the plain whole-array code to 1e-6 (float32) and 1e-12 (float64), absolute and relative, across
thread counts, batch and head axes, masks, causal alignments and block sizes that do not divide n.
"""

from __future__ import annotations

import math
import threading
from unittest import mock

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

import lessonlib as L
from lessonlib import _blocks

TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}
RNG = np.random.default_rng(8)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}threads")
def threads(request):
    """Run the test with 1, 2 and 3 worker threads (3 is more than some machines have: still correct)."""
    previous = L.set_num_threads(request.param)
    yield request.param
    L.set_num_threads(previous)


@pytest.fixture(params=[1, 600, 1 << 20], ids=["1row", "fewrows", "wholeblocks"])
def blocked(request, monkeypatch):
    """Send every input down the blocked path, with blocks of one row, a few rows, or the default size."""
    monkeypatch.setattr(_blocks, "MIN_BLOCKED_SCORES", 1)
    monkeypatch.setattr(_blocks, "MIN_BLOCKED_TOTAL", 1)
    monkeypatch.setattr(_blocks, "BLOCK_BYTES", request.param)


def plain(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` computed by the plain whole-array code (blocking switched off)."""
    with mock.patch.object(_blocks, "MIN_BLOCKED_SCORES", math.inf):
        return fn(*args, **kwargs)


def close(actual, expected, dtype):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # BLAS may sum a one-row block in another order than a whole matrix: scores of size ~6 can
    # then differ in their last bit or two, so the tolerance is relative as well as absolute.
    np.testing.assert_allclose(actual, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def normal(shape, dtype):
    return RNG.normal(size=shape).astype(dtype)


# query, key, value shapes: one matrix, heads, keys shared across heads, scalar values, one query
SHAPES = {
    "2d": ((37, 8), (45, 8), (45, 5)),
    "heads": ((2, 3, 37, 8), (2, 3, 45, 8), (2, 3, 45, 6)),
    "shared-kv": ((2, 3, 37, 8), (2, 1, 45, 8), (1, 1, 45, 6)),
    "scalar-values": ((2, 37, 8), (2, 45, 8), (2, 45)),
    "single-query": ((8,), (3, 45, 8), (3, 45, 4)),
}


def masks(n_q: int, n_k: int, batch: tuple[int, ...] = ()) -> dict[str, np.ndarray | None]:
    """No mask, causal in both alignments, padding, and a random mask with an empty row.

    The padding mask is (B, 1, ..., 1, S) for a batch (B, ...): the last sequence is 9 keys shorter.
    """
    padding = np.ones((batch[:1] or (1,)) + (1,) * len(batch) + (n_k,), dtype=bool)  # (B, 1, .., S) or (1, S)
    padding[-1, ..., n_k - 9 :] = False
    random = RNG.random((n_q, n_k)) < 0.3
    random[min(4, n_q - 1)] = False  # a row with no allowed key
    return {
        "none": None,
        "causal-top-left": L.causal_mask(n_q, n_k, align="top-left"),
        "causal-bottom-right": L.causal_mask(n_q, n_k, align="bottom-right"),
        "padding": padding,
        "random-with-empty-row": random,
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("mask_name", list(masks(5, 5)))
def test_dense_blocks_equal_the_plain_path(dtype, shape, mask_name, threads, blocked):
    q_shape, k_shape, v_shape = SHAPES[shape]
    q, k, v = normal(q_shape, dtype), normal(k_shape, dtype), normal(v_shape, dtype)
    n_q = 1 if len(q_shape) == 1 else q_shape[-2]
    batch = np.broadcast_shapes(q_shape[:-2], k_shape[:-2])
    mask = masks(n_q, k_shape[-2], batch)[mask_name]
    policies = ("zeros", "nan", "raise") if mask is None or mask.any(axis=-1).all() else ("zeros", "nan")
    for fully_masked in policies:
        fast = L.scaled_dot_product_attention(q, k, v, mask=mask, fully_masked=fully_masked)
        slow = plain(L.scaled_dot_product_attention, q, k, v, mask=mask, fully_masked=fully_masked)
        for name in ("scores", "weights", "output"):
            close(getattr(fast, name), getattr(slow, name), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_and_masked_softmax_blocks_equal_the_plain_path(dtype, threads, blocked):
    scores = normal((2, 3, 37, 45), dtype) * 4
    close(L.softmax(scores), plain(L.softmax, scores), dtype)
    close(L.softmax(scores[0, 0]), plain(L.softmax, scores[0, 0]), dtype)
    close(L.softmax(scores, axis=2), plain(L.softmax, scores, axis=2), dtype)  # other axes stay plain
    allowed = masks(37, 45)["random-with-empty-row"]
    for policy in ("zeros", "nan"):
        close(L.masked_softmax(scores, allowed, fully_masked=policy),
              plain(L.masked_softmax, scores, allowed, fully_masked=policy), dtype)
    widening = RNG.random((4, 1, 37, 45)) < 0.5  # the mask adds a batch axis the scores lack
    close(L.masked_softmax(scores[0], widening), plain(L.masked_softmax, scores[0], widening), dtype)


def plain_tiled(q, k, v, block_size: int, first_query: int | None) -> np.ndarray:
    """The online softmax written plainly: whole batch at once, fresh arrays at every step.

    q (..., L, d), k (..., S, d), v (..., S, d_v); ``first_query`` is the causal position of query 0
    (None = no mask). Query blocks are independent; key blocks update a running max m, a running
    denominator and an unnormalised output acc, both rescaled by exp(m_old - m_new).
    """
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    out = np.zeros(batch + (q.shape[-2], v.shape[-1]), dtype=np.result_type(q, k, v))
    for q0 in range(0, q.shape[-2], block_size):
        qb = q[..., q0 : q0 + block_size, :]  # (..., bq, d)
        rows = np.arange(q0, q0 + qb.shape[-2])
        m = np.full(batch + (qb.shape[-2],), -np.inf, dtype=out.dtype)  # (..., bq)
        denom, acc = np.zeros_like(m), np.zeros(batch + qb.shape[-2:-1] + (v.shape[-1],), dtype=out.dtype)
        for k0 in range(0, k.shape[-2], block_size):
            s = qb @ np.swapaxes(k[..., k0 : k0 + block_size, :], -1, -2)  # (..., bq, bk)
            if first_query is not None:
                keys = np.arange(k0, k0 + s.shape[-1])
                s = np.where(rows[:, None] + first_query >= keys[None, :], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            p = np.exp(s - shift[..., None])
            rescale = np.exp(m - shift)
            denom = denom * rescale + p.sum(axis=-1)
            acc = acc * rescale[..., None] + p @ v[..., k0 : k0 + block_size, :]
            m = m_new
        out[..., q0 : q0 + block_size, :] = np.divide(
            acc, denom[..., None], out=np.zeros_like(acc), where=denom[..., None] > 0
        )
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_size", [1, 7, 16, 64])
@pytest.mark.parametrize("causal, align", [(False, None), (True, "top-left"), (True, "bottom-right")])
@pytest.mark.parametrize("split", [True, False], ids=["per-matrix", "whole-batch"])
def test_tiled_equals_the_plain_online_softmax(dtype, block_size, causal, align, split, threads, monkeypatch):
    monkeypatch.setattr(_blocks, "MIN_BLOCKED_SCORES", 1 if split else math.inf)
    monkeypatch.setattr(_blocks, "MIN_BLOCKED_TOTAL", 1)
    q, k, v = normal((2, 3, 37, 8), dtype), normal((2, 1, 45, 8), dtype), normal((2, 1, 45, 5), dtype)
    first_query = (0 if align == "top-left" else 45 - 37) if causal else None
    expected = plain_tiled(q, k, v, block_size, first_query)
    tiled = L.tiled_attention(q, k, v, block_size=block_size, causal=causal, align=align)
    close(tiled, expected, dtype)
    # and the dense result: float32 rounds the scaled query, not the scores, so allow 4e-6 there
    mask = L.causal_mask(37, 45, align=align) if causal else None
    dense = plain(L.scaled_dot_product_attention, q, k, v, mask=mask).output
    np.testing.assert_allclose(tiled, dense, rtol=0, atol=4e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_thresholds_at_a_moderate_size(dtype, threads):
    """A (2, 300, 300) stack crosses the real switch-over sizes: no patched constants."""
    q, k, v = (normal((2, 300, 16), dtype) for _ in range(3))
    assert _blocks.worth_blocking(300, 300, 2)
    mask = L.causal_mask(300)
    for m in (None, mask):
        fast = L.scaled_dot_product_attention(q, k, v, mask=m)
        slow = plain(L.scaled_dot_product_attention, q, k, v, mask=m)
        for name in ("scores", "weights", "output"):
            close(getattr(fast, name), getattr(slow, name), dtype)
    close(L.tiled_attention(q, k, v, block_size=128, causal=True), slow.output, dtype)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_blocked_errors_match_the_plain_path(blocked):
    q, k, v = normal((2, 3, 37, 8), np.float64), normal((2, 3, 45, 8), np.float64), normal((2, 3, 45, 4), np.float64)
    allowed = masks(37, 45)["random-with-empty-row"]
    with pytest.raises(ValueError, match="6 row") as fast:
        L.scaled_dot_product_attention(q, k, v, mask=allowed, fully_masked="raise")
    with pytest.raises(ValueError) as slow:
        plain(L.scaled_dot_product_attention, q, k, v, mask=allowed, fully_masked="raise")
    assert str(fast.value) == str(slow.value)
    # float16 scores overflow to inf: the plain path refuses them before the masked softmax
    big = np.full((40, 8), 300.0, dtype=np.float16)
    with pytest.raises(ValueError, match="NaN or infinite") as fast:
        L.scaled_dot_product_attention(big, big, big, mask=np.ones((40, 40), dtype=bool))
    with pytest.raises(ValueError) as slow:
        plain(L.scaled_dot_product_attention, big, big, big, mask=np.ones((40, 40), dtype=bool))
    assert str(fast.value) == str(slow.value)


# --- the thread setting and the runner ------------------------------------------------------------


def test_thread_setting_is_validated_and_returned():
    previous = L.get_num_threads()
    try:
        assert L.set_num_threads(3) == previous
        assert L.get_num_threads() == 3
        assert L.set_num_threads(None) == 3
        assert L.get_num_threads() == _blocks.available_cores()
        with pytest.raises(ValueError, match="num_threads must be at least 1, got 0"):
            L.set_num_threads(0)
        for bad in (2.5, "2", True):
            with pytest.raises(TypeError, match="num_threads must be an integer"):
                L.set_num_threads(bad)
        assert L.get_num_threads() == _blocks.available_cores()  # a refused value changes nothing
    finally:
        L.set_num_threads(previous)


def _blas_threads() -> list[int]:
    return [lib.num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers]


def test_runner_uses_several_threads_with_blas_held_to_one():
    meeting = threading.Barrier(2, timeout=30)  # passes only when two items run at the same time
    seen, blas_inside = set(), []

    def work(item: int) -> None:
        seen.add(threading.get_ident())
        blas_inside.append(_blas_threads())
        if item < 2:
            meeting.wait()

    before = _blas_threads()
    previous = L.set_num_threads(2)
    try:
        _blocks.run_blocks(work, list(range(6)))
    finally:
        L.set_num_threads(previous)
    assert len(seen) == 2
    assert all(all(n == 1 for n in inside) for inside in blas_inside)
    assert _blas_threads() == before


def test_runner_reraises_an_items_error_and_restores_blas(threads):
    before = _blas_threads()

    def work(item: int) -> None:
        if item == 3:
            raise KeyError("item 3")

    with pytest.raises(KeyError, match="item 3"):
        _blocks.run_blocks(work, list(range(8)))
    assert _blas_threads() == before


def test_runner_called_from_inside_a_worker_does_not_wait_on_itself():
    inner_done = []

    def inner(item: int) -> None:
        inner_done.append(item)

    def outer(item: int) -> None:
        _blocks.run_blocks(inner, [item * 10 + i for i in range(3)])

    previous = L.set_num_threads(2)
    try:
        _blocks.run_blocks(outer, list(range(4)))
    finally:
        L.set_num_threads(previous)
    assert sorted(inner_done) == sorted(i * 10 + j for i in range(4) for j in range(3))
