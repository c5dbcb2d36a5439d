"""lessonlib.fast gives the reference modules' numbers; nothing here is timed.

lessonlib.fast does dense attention, softmax and masked_softmax on whole arrays while they fit
in the last-level cache and in blocks of query rows on several threads beyond it, takes exp of
the scores directly when their bound allows, and runs tiled attention's query blocks on threads.
To reach every path with small inputs, the tests set the cache size the switch-over reads, the
block size, and whether exp may skip the row maximum; they then compare with the reference
(lessonlib.attention, lessonlib.cost) to 1e-6 (float32) and 1e-12 (float64), absolute and
relative, across thread counts, batch and head axes, masks, causal alignments and block sizes that
do not divide n. One test crosses the real switch-over, with nothing patched.
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
from lessonlib import _machine, fast

TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}
RNG = np.random.default_rng(8)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}threads")
def threads(request):
    """Run the test with 1, 2 and 3 worker threads (3 is more than some machines have: still correct)."""
    previous = fast.set_num_threads(request.param)
    yield request.param
    fast.set_num_threads(previous)


@pytest.fixture(params=[None, 1, 600, 1 << 20], ids=["whole", "1row", "fewrows", "wholeblocks"])
def blocked(request, monkeypatch):
    """Run the fast path on whole arrays, or in blocks of one row, a few rows, or the default size."""
    if request.param is None:
        monkeypatch.setattr(fast, "cache_bytes", lambda: math.inf)
    else:
        monkeypatch.setattr(fast, "cache_bytes", lambda: 0)
        monkeypatch.setattr(fast, "BLOCK_BYTES", request.param)


@pytest.fixture(params=[True, False], ids=["exp-direct", "row-max"])
def exp_direct(request, monkeypatch):
    """Let exp be tried on the scores alone, or make every block subtract the row maximum."""
    if not request.param:
        monkeypatch.setattr(fast, "scores_stay_finite", lambda *args: False)
    return request.param


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
def test_fast_attention_equals_the_reference(dtype, shape, mask_name, threads, blocked, exp_direct):
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


def test_fast_tiled_attention_is_the_reference():
    """Threads over tiles measured no faster, so lessonlib.fast offers the reference's own function."""
    assert fast.tiled_attention is L.tiled_attention


def test_the_real_switch_over_from_whole_arrays_to_row_blocks(threads):
    """Just past this machine's last-level cache the scores are cut into row blocks: nothing patched."""
    n = math.isqrt(fast.cache_bytes() // 4) + 1  # the smallest n whose (n, n) float32 scores outgrow it
    if n > 6000:
        pytest.skip(f"a {fast.cache_bytes() >> 20} MiB cache: the reference would need GiBs to compare")
    assert not fast.blocks_pay((n - 1) ** 2 * 4, keep_weights=False)
    assert fast.blocks_pay(n * n * 4, keep_weights=False)
    assert len(fast.row_blocks((n, n), 4)) >= 2 * fast.get_num_threads()
    assert not fast.blocks_pay(4 * n * n * 4, keep_weights=True)  # returned weights: whole arrays
    q, k, v = (normal((n, 16), np.float32) for _ in range(3))
    for mask in (None, L.causal_mask(n)):
        expected = L.scaled_dot_product_attention(q, k, v, mask=mask).output
        close(fast.scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False), expected, np.float32)


def test_scores_too_large_or_too_small_for_exp_alone_take_the_row_maximum(blocked, monkeypatch):
    """exp of the scores alone overflows, or underflows a whole row: those blocks are done again."""
    q, k, v = normal((2, 37, 8), np.float64), normal((2, 45, 8), np.float64), normal((2, 45, 5), np.float64)
    mask = masks(37, 45)["random-with-empty-row"]
    shifted = []
    exponentiate = fast._exponentiate

    def watching(s, w, blocked, *, shift, found):
        shifted.append(shift)
        exponentiate(s, w, blocked, shift=shift, found=found)

    monkeypatch.setattr(fast, "_exponentiate", watching)
    above = (np.abs(q) + 1, np.abs(k) + 1)  # every score above 100 * 8 = 800: exp(800) overflows
    below = (np.abs(q) + 1, -np.abs(k) - 1)  # every score below -800: a whole row underflows
    for (query, key), scale in [(above, 100.0), (below, 100.0), (above, -100.0)]:
        for m in (None, mask):
            shifted.clear()
            expected = L.scaled_dot_product_attention(query, key, v, mask=m, scale=scale)
            result = fast.scaled_dot_product_attention(query, key, v, mask=m, scale=scale)
            for name in ("scores", "weights", "output"):
                close(getattr(result, name), getattr(expected, name), np.float64)
            close(fast.scaled_dot_product_attention(query, key, v, mask=m, scale=scale, need_weights=False),
                  expected.output, np.float64)
            assert shifted.count(False) and shifted.count(True)  # tried alone, then done again


@pytest.mark.parametrize("need_weights", [True, False])
def test_buffers_kept_between_calls_never_reach_a_result(blocked, need_weights):
    """The temporaries kept per thread are reused by the next call; what a call returned is not."""
    inputs = [tuple(normal((2, 3, 37, 8), np.float64) for _ in range(3)) for _ in range(2)]
    first = fast.scaled_dot_product_attention(*inputs[0], need_weights=need_weights)
    returned = (first.output, first.weights, first.scores) if need_weights else (first,)
    copies = [np.array(a) for a in returned]
    fast.scaled_dot_product_attention(*inputs[1], need_weights=need_weights)  # same shapes: same buffers
    for array, copy in zip(returned, copies):
        np.testing.assert_array_equal(array, copy)


def test_the_cache_size_is_read_from_linux_and_falls_back(tmp_path, monkeypatch):
    for text, size in (("32768K\n", 32 << 20), ("1M", 1 << 20), ("512", 512)):
        assert _machine._size_in_bytes(text) == size
    for level, size in ((1, "48K"), (2, "2048K"), (3, "16M")):
        (tmp_path / f"index{level}").mkdir()
        (tmp_path / f"index{level}" / "size").write_text(size + "\n")
    monkeypatch.setattr(_machine, "CACHE_DIRECTORY", tmp_path)
    fast.cache_bytes.cache_clear()
    try:
        assert fast.cache_bytes() == 16 << 20
        monkeypatch.setattr(_machine, "CACHE_DIRECTORY", tmp_path / "missing")
        fast.cache_bytes.cache_clear()
        assert fast.cache_bytes() == _machine.FALLBACK_CACHE_BYTES
    finally:
        monkeypatch.undo()
        fast.cache_bytes.cache_clear()


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
        ((np.where(q > 2, np.nan, q), k, v), {}),  # non-finite inputs, named in the reference's order
        ((q, np.where(k > 2, -np.inf, k), np.where(v > 2, np.nan, v)), dict(mask=allowed, fully_masked="nan")),
        ((q, k, np.where(v > 2, np.inf, v)), {}),
        (([[1.0, 2.0]], [[1.0, 2.0]], [[True]]), {}),  # a boolean value
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
    """Masked softmax on row blocks holds BLAS to one thread, and only during the call; attention's
    row blocks run one after another on the calling thread and leave BLAS its own threads."""
    monkeypatch.setattr(fast, "cache_bytes", lambda: 0)
    inside, attending = [], []
    masked_softmax, exponentiate = L.attention._masked_softmax, fast._exponentiate

    def watching_softmax(scores, allowed, fully_masked):
        inside.append(_blas_threads())
        return masked_softmax(scores, allowed, fully_masked)

    def watching_exp(s, w, blocked, *, shift, found):
        attending.append(_blas_threads())
        exponentiate(s, w, blocked, shift=shift, found=found)

    monkeypatch.setattr(L.attention, "_masked_softmax", watching_softmax)
    monkeypatch.setattr(fast, "_exponentiate", watching_exp)
    before = _blas_threads()
    scores = normal((3, 40, 50), np.float64)
    fast.masked_softmax(scores, scores > 0)
    assert len(inside) > 1 and all(all(n == 1 for n in seen) for seen in inside)
    assert _blas_threads() == before
    q = normal((3, 40, 8), np.float64)
    fast.scaled_dot_product_attention(q, q, q, need_weights=False)
    assert len(attending) > 1 and all(seen == before for seen in attending)
    with pytest.raises(ValueError):
        fast.masked_softmax(scores, scores[..., :7] > 0)
    assert _blas_threads() == before
