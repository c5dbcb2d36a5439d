"""lessonlib.fast gives the reference modules' numbers; nothing here is timed.

lessonlib.fast does dense attention, softmax and masked_softmax in blocks of query rows on
several threads, and runs tiled attention's query blocks on threads. To reach the blocked paths
with small inputs, the tests shrink the switch-over size and the block size; they then compare
with the reference (lessonlib.attention, lessonlib.cost) to 1e-6 (float32) and 1e-12 (float64),
absolute and relative, across thread counts, batch and head axes, masks, causal alignments and
block sizes that do not divide n.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

import lessonlib as L
from lessonlib import fast

TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}
RNG = np.random.default_rng(8)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}threads")
def threads(request):
    """Run the test with 1, 2 and 3 worker threads (3 is more than some machines have: still correct)."""
    previous = fast.set_num_threads(request.param)
    yield request.param
    fast.set_num_threads(previous)


@pytest.fixture(params=[None, 1, 600, 1 << 20], ids=["oneblock", "1row", "fewrows", "wholeblocks"])
def blocked(request, monkeypatch):
    """Run the fast path as one block, or in blocks of one row, a few rows, or the default size."""
    if request.param is None:
        monkeypatch.setattr(fast, "MIN_BLOCKED_SCORES", math.inf)
    else:
        monkeypatch.setattr(fast, "MIN_BLOCKED_SCORES", 1)
        monkeypatch.setattr(fast, "MIN_BLOCKED_TOTAL", 1)
        monkeypatch.setattr(fast, "BLOCK_BYTES", request.param)


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
    "value-adds-batch": ((37, 8), (45, 8), (2, 45, 3)),
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
def test_fast_attention_equals_the_reference(dtype, shape, mask_name, threads, blocked):
    q_shape, k_shape, v_shape = SHAPES[shape]
    q, k, v = normal(q_shape, dtype), normal(k_shape, dtype), normal(v_shape, dtype)
    n_q = 1 if len(q_shape) == 1 else q_shape[-2]
    batch = np.broadcast_shapes(q_shape[:-2], k_shape[:-2])
    mask = masks(n_q, k_shape[-2], batch)[mask_name]
    policies = ("zeros", "nan", "raise") if mask is None or mask.any(axis=-1).all() else ("zeros", "nan")
    for fully_masked in policies:
        expected = L.scaled_dot_product_attention(q, k, v, mask=mask, fully_masked=fully_masked)
        result = fast.scaled_dot_product_attention(q, k, v, mask=mask, fully_masked=fully_masked)
        for name in ("scores", "weights", "output"):
            close(getattr(result, name), getattr(expected, name), dtype)
        output_only = fast.scaled_dot_product_attention(
            q, k, v, mask=mask, fully_masked=fully_masked, need_weights=False
        )
        close(output_only, expected.output, dtype)


def test_a_mask_that_adds_batch_axes_gives_the_reference_shapes(threads, blocked):
    q, k, v = normal((37, 8), np.float64), normal((45, 8), np.float64), normal((45, 5), np.float64)
    mask = RNG.random((3, 37, 45)) < 0.5  # (3, L, S): three masks for one query matrix
    expected = L.scaled_dot_product_attention(q, k, v, mask=mask)
    result = fast.scaled_dot_product_attention(q, k, v, mask=mask)
    for name in ("scores", "weights", "output"):
        close(getattr(result, name), getattr(expected, name), np.float64)
    close(fast.scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False), expected.output, np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_softmax_and_masked_softmax_equal_the_reference(dtype, threads, blocked):
    scores = normal((2, 3, 37, 45), dtype) * 4
    close(fast.softmax(scores), L.softmax(scores), dtype)
    close(fast.softmax(scores[0, 0]), L.softmax(scores[0, 0]), dtype)
    close(fast.softmax(scores[0, 0, 0]), L.softmax(scores[0, 0, 0]), dtype)  # one row
    close(fast.softmax(scores, axis=2), L.softmax(scores, axis=2), dtype)  # other axes: the reference
    allowed = masks(37, 45)["random-with-empty-row"]
    for policy in ("zeros", "nan"):
        close(fast.masked_softmax(scores, allowed, fully_masked=policy),
              L.masked_softmax(scores, allowed, fully_masked=policy), dtype)
    widening = RNG.random((4, 1, 37, 45)) < 0.5  # the mask adds a batch axis the scores lack
    close(fast.masked_softmax(scores[0], widening), L.masked_softmax(scores[0], widening), dtype)
    row = scores[0, 0, 0]
    close(fast.masked_softmax(row, row > 0), L.masked_softmax(row, row > 0), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_size", [1, 7, 16, 64])
@pytest.mark.parametrize("causal, align", [(False, None), (True, "top-left"), (True, "bottom-right")])
@pytest.mark.parametrize("split", [True, False], ids=["per-matrix", "whole-batch"])
def test_fast_tiled_equals_the_reference(dtype, block_size, causal, align, split, threads, monkeypatch):
    monkeypatch.setattr(fast, "MIN_BLOCKED_SCORES", 1 if split else math.inf)
    monkeypatch.setattr(fast, "MIN_BLOCKED_TOTAL", 1)
    q, k, v = normal((2, 3, 37, 8), dtype), normal((2, 1, 45, 8), dtype), normal((2, 1, 45, 5), dtype)
    expected = L.tiled_attention(q, k, v, block_size=block_size, causal=causal, align=align)
    result = fast.tiled_attention(q, k, v, block_size=block_size, causal=causal, align=align)
    close(result.output, expected.output, dtype)
    close(result.logsumexp, expected.logsumexp, dtype)
    # and the dense result: float32 rounds the scaled query, not the scores, so allow 4e-6 there
    mask = L.causal_mask(37, 45, align=align) if causal else None
    dense = L.scaled_dot_product_attention(q, k, v, mask=mask).output
    np.testing.assert_allclose(result.output, dense, rtol=0, atol=4e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_thresholds_at_a_moderate_size(dtype, threads):
    """A (2, 300, 300) stack crosses the real switch-over sizes: no patched constants."""
    q, k, v = (normal((2, 300, 16), dtype) for _ in range(3))
    assert fast.worth_blocking(300, 300, 2)
    mask = L.causal_mask(300)
    for m in (None, mask):
        result = fast.scaled_dot_product_attention(q, k, v, mask=m)
        expected = L.scaled_dot_product_attention(q, k, v, mask=m)
        for name in ("scores", "weights", "output"):
            close(getattr(result, name), getattr(expected, name), dtype)
        close(fast.scaled_dot_product_attention(q, k, v, mask=m, need_weights=False), expected.output, dtype)
    close(fast.tiled_attention(q, k, v, block_size=128, causal=True).output, expected.output, dtype)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_fast_errors_match_the_reference(blocked):
    q, k, v = normal((2, 3, 37, 8), np.float64), normal((2, 3, 45, 8), np.float64), normal((2, 3, 45, 4), np.float64)
    allowed = masks(37, 45)["random-with-empty-row"]
    calls = [
        ((q, k, v), dict(mask=allowed, fully_masked="raise")),  # a row with no allowed key
        ((q, k[..., :4], v), {}),  # widths differ
        ((q, k, v[..., :40, :]), {}),  # keys without values
        ((q, k, v), dict(mask=allowed.astype(float))),  # a float mask
        ((q, k, v), dict(fully_masked="ignore")),
        # float16 scores overflow to inf: the reference refuses them before the masked softmax
        ((np.full((40, 8), 300.0, dtype=np.float16),) * 3, dict(mask=np.ones((40, 40), dtype=bool))),
    ]
    for args, kwargs in calls:
        with pytest.raises((ValueError, TypeError)) as expected:
            L.scaled_dot_product_attention(*args, **kwargs)
        for need_weights in (True, False):
            with pytest.raises(expected.type) as error:
                fast.scaled_dot_product_attention(*args, **kwargs, need_weights=need_weights)
            assert str(error.value) == str(expected.value)


# --- the thread setting and the runner ------------------------------------------------------------


def test_thread_setting_is_validated_and_returned():
    previous = fast.get_num_threads()
    try:
        assert fast.set_num_threads(3) == previous
        assert fast.get_num_threads() == 3
        assert fast.thread_info().fast_threads == 3
        assert fast.set_num_threads(None) == 3
        assert fast.get_num_threads() == fast.available_cores()
        with pytest.raises(ValueError, match="num_threads must be at least 1, got 0"):
            fast.set_num_threads(0)
        for bad in (2.5, "2", True):
            with pytest.raises(TypeError, match="num_threads must be an integer"):
                fast.set_num_threads(bad)
        assert fast.get_num_threads() == fast.available_cores()  # a refused value changes nothing
    finally:
        fast.set_num_threads(previous)


def test_importing_lessonlib_leaves_threads_and_blas_alone():
    """The reference package starts no thread pool and needs no threadpoolctl."""
    code = "import sys, lessonlib; print('threadpoolctl' in sys.modules, 'lessonlib.fast' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.split() == ["False", "False"]


def test_thread_info_reports_blas_outside_a_call():
    info = fast.thread_info()
    assert info.blas_threads and list(info.blas_threads.values()) == _blas_threads()
    assert str(info).startswith(f"lessonlib.fast: {info.fast_threads} thread(s)")


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
    previous = fast.set_num_threads(2)
    try:
        fast.run_blocks(work, list(range(6)))
    finally:
        fast.set_num_threads(previous)
    assert len(seen) == 2
    assert all(all(n == 1 for n in inside) for inside in blas_inside)
    assert _blas_threads() == before


def test_runner_reraises_an_items_error_and_restores_blas(threads):
    before = _blas_threads()

    def work(item: int) -> None:
        if item == 3:
            raise KeyError("item 3")

    with pytest.raises(KeyError, match="item 3"):
        fast.run_blocks(work, list(range(8)))
    assert _blas_threads() == before


def test_runner_called_from_inside_a_worker_does_not_wait_on_itself():
    inner_done = []

    def inner(item: int) -> None:
        inner_done.append(item)

    def outer(item: int) -> None:
        fast.run_blocks(inner, [item * 10 + i for i in range(3)])

    previous = fast.set_num_threads(2)
    try:
        fast.run_blocks(outer, list(range(4)))
    finally:
        fast.set_num_threads(previous)
    assert sorted(inner_done) == sorted(i * 10 + j for i in range(4) for j in range(3))


def test_the_blas_limit_holds_inside_a_call_only(threads, monkeypatch):
    """During a fast call BLAS runs on one thread; before and after, on whatever it ran before."""
    monkeypatch.setattr(fast, "MIN_BLOCKED_SCORES", 1)
    monkeypatch.setattr(fast, "MIN_BLOCKED_TOTAL", 1)
    inside = []
    softmax_rows = fast._softmax_rows

    def watching(x, out):
        inside.append(_blas_threads())
        softmax_rows(x, out)

    monkeypatch.setattr(fast, "_softmax_rows", watching)
    before = _blas_threads()
    q = normal((3, 40, 8), np.float64)
    fast.scaled_dot_product_attention(q, q, q)
    assert inside and all(all(n == 1 for n in seen) for seen in inside)
    assert _blas_threads() == before
    with pytest.raises(ValueError):
        fast.scaled_dot_product_attention(q, q, q[..., :5, :])
    assert _blas_threads() == before
