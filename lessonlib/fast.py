"""The same attention, softmax and tiling as the reference modules, made fast. Opt in by name.

    import lessonlib.fast as fast
    fast.scaled_dot_product_attention(q, k, v)                      # same result as lessonlib's
    fast.scaled_dot_product_attention(q, k, v, need_weights=False)  # the output alone
    fast.set_num_threads(1)                 # masked_softmax's row blocks on one thread

Every function has the signature of its reference in :mod:`lessonlib.attention` or
:mod:`lessonlib.cost` and gives the same numbers (to 1e-6 in float32, 1e-12 in float64). Nothing
else in the package calls this module: a learner who times the reference times the formula.

Dense attention spends its time in passes over the (L, S) scores; this module makes fewer of them
and makes them where the data is (``benchmarks/attention.py`` measures each choice):

- exp of the scores alone: the row maximum is subtracted only when exp would leave its range.
- row sums from the second matmul, weights @ [value | 1], not from a pass of their own.
- whole arrays until, without weights to return, one score matrix outgrows the last-level cache
  (:func:`blocks_pay`); then blocks of query rows, one after another, each through scores, exp
  and matmul while still in cache.
  BLAS spreads each product over the cores. (Blocks shared between Python threads, BLAS held to
  one thread each, measured 0.95-1.15 of the floor at n = 4096 on 2 cores; one after another,
  0.76-0.80.) ``masked_softmax`` does share its row blocks between threads.
- temporaries in buffers kept per thread: fresh memory costs a page fault per 4 KiB every call.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter
from typing import Literal, overload

import numpy as np

from lessonlib import attention, cost
from lessonlib._checks import (
    FullyMasked,
    array_bytes,
    as_allowed_mask,
    as_dtype,
    as_float_array,
    attention_inputs,
    broadcast_shape,
    check_flag,
    check_mask_reading,
    check_policy,
    check_positive_int,
    check_real,
    check_scale,
    overflow_message,
    refuse_dense_scores,
    refuse_empty_rows,
    refuse_nonfinite,
    refuse_oversized,
)
from lessonlib._machine import (  # the thread setting and runner are part of this module's API
    ThreadInfo,
    available_cores,
    cache_bytes,
    get_num_threads,
    run_blocks,
    set_num_threads,
    thread_info,
)
from lessonlib.attention import AttentionResult

__all__ = [
    "BLOCK_BYTES", "ThreadInfo", "available_cores", "blocks_pay", "cache_bytes", "get_num_threads", "masked_softmax",
    "row_blocks", "run_blocks", "scaled_dot_product_attention", "scores_stay_finite", "set_num_threads", "softmax",
    "thread_info", "tiled_attention",
]

# Scores per row block, in bytes: small enough to stay in cache between a block's passes, large
# enough that BLAS, which repacks the keys and values for every call, is not called too often.
BLOCK_BYTES = 1 << 22


# --- the size model: whole arrays in cache, row blocks beyond it ------------------------------------


Block = tuple  # (*batch index, row slice) into a (..., L, S) stack; (Ellipsis,) is the whole stack


def blocks_pay(matrix_bytes: int, *, keep_weights: bool) -> bool:
    """Whether attention takes row blocks: without weights to return, once one score matrix outgrows the cache.

    ``matrix_bytes`` is the size of one (L, S) score matrix. Beyond the last-level cache each pass
    over a whole matrix goes to main memory, while a block's rows stay in cache through all of
    theirs. Returned weights go to main memory whatever the path, and there whole arrays measured
    faster at every size (0.86 against 0.92 of the plain version at n = 8192).
    """
    matrix_bytes = check_positive_int(matrix_bytes, "matrix_bytes", minimum=0)
    return not check_flag(keep_weights, "keep_weights") and matrix_bytes > cache_bytes()


def row_blocks(shape: tuple[int, ...], itemsize: int) -> list[Block]:
    """Blocks of query rows covering a (..., L, S) stack of ``itemsize``-byte entries.

    About BLOCK_BYTES of scores each, and at least two per thread so that a slow core can be
    made up for (when the blocks are shared between threads).
    """
    if not isinstance(shape, tuple) or len(shape) < 2:
        raise TypeError(f"shape must be a tuple (..., L, S) of at least two sizes, got {shape!r}")
    for n in shape:
        check_positive_int(n, "each size in shape")
    itemsize = check_positive_int(itemsize, "itemsize")
    batch, n_rows, n_cols = shape[:-2], shape[-2], shape[-1]
    rows = max(1, BLOCK_BYTES // max(1, n_cols * itemsize))
    blocks_per_matrix = -(-2 * get_num_threads() // max(1, math.prod(batch)))  # ceiling division
    rows = max(1, min(rows, -(-n_rows // blocks_per_matrix)))
    return [(*index, slice(r0, r0 + rows)) for index in np.ndindex(batch) for r0 in range(0, n_rows, rows)]


def _batch(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of two batch shapes; the usual case, equal shapes, without NumPy's general rule."""
    return a if a == b else np.broadcast_shapes(a, b)


def _expand(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """(..., a, b) -> batch + (a, b), a view (``x`` itself when it has that batch already)."""
    return x if x.shape[:-2] == batch else np.broadcast_to(x, batch + x.shape[-2:])


def _matrix(block: Block) -> Block:
    """The part of a block that picks one matrix of the stack (the row slice dropped)."""
    return block if block == (Ellipsis,) else block[:-1]


_workspace = threading.local()  # each thread's buffers, by slot name


def _scratch(slot: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array from the calling thread's buffer named ``slot``, kept for its next call.

    Fresh memory costs a page fault per 4 KiB on first touch, and the allocator hands freed memory
    back to the system, so a call that allocated its temporaries would pay that on every call:
    measured, up to a third of a call at n = 256. Buffers up to BLOCK_BYTES are kept per slot and
    thread; larger ones are freed on return, where the faults are a small part of the work.
    """
    buffers, size = _workspace.__dict__, math.prod(shape)
    buffer = buffers.get(slot)
    if buffer is None or buffer.dtype != dtype or buffer.size < size:
        buffer = np.empty(size, dtype=dtype)
        if buffer.nbytes <= BLOCK_BYTES:
            buffers[slot] = buffer
    return buffer[:size].reshape(shape)


# --- dense attention ----------------------------------------------------------------------------------


def _sum_of_squares(x: np.ndarray, name: str) -> float:
    """|x|^2 summed over every entry (one BLAS dot), refusing NaN and inf with the reference's error.

    A NaN or inf entry makes the sum non-finite; only then are the entries counted, which raises.
    Finite entries whose squares overflow give inf.
    """
    flat = x.ravel()  # a view of a contiguous array
    total = float(np.dot(flat, flat))
    if not math.isfinite(total):
        refuse_nonfinite(x, name)
    return total


@functools.cache
def _exp_limits(dtype: np.dtype) -> tuple[float, float]:
    """The largest finite number of ``dtype``, and the least row sum of exp(scores) taken alone.

    A row whose sum reaches e^27 times the smallest normal number has a largest term that large:
    every weight is then exact to rounding, and one that underflows is below e^-27 of the row.
    """
    info = np.finfo(dtype)
    return float(info.max), float(info.tiny) * math.exp(27.0)


def scores_stay_finite(scale: float, query_squares: float, key_squares: float, dtype: np.dtype) -> bool:
    """Whether no score can overflow: |q_i . k_j| * |scale| <= |scale| * |Q| * |K| < the dtype's max."""
    scale = check_real(scale, "scale")
    for name, squares in (("query_squares", query_squares), ("key_squares", key_squares)):
        if not check_real(squares, name, allow_inf=True) >= 0:  # inf: the squares overflowed
            raise ValueError(f"{name} is a sum of squares, so it cannot be negative; got {squares}")
    return _scores_stay_finite(scale, query_squares, key_squares, as_dtype(dtype, kinds="f"))


def _scores_stay_finite(scale: float, query_squares: float, key_squares: float, dtype: np.dtype) -> bool:
    return abs(scale) * math.sqrt(query_squares * key_squares) < _exp_limits(dtype)[0]


def _attend_rows(
    q: np.ndarray, k_t: np.ndarray, v1: np.ndarray, blocked: np.ndarray | None,
    s: np.ndarray, w: np.ndarray, products: np.ndarray, output: np.ndarray,
    *, scores_finite: bool, fully_masked: str, keep_weights: bool, found: Counter[str],
) -> None:
    """Attention for some query rows (a block, or the whole call): s = q @ k^T, w its weights, output.

    q (rows, d_k) scaled; k_t (d_k, S); v1 (S, d_v + 1) the values beside a column of ones;
    blocked (rows, S), True = not allowed, or None; s, w (rows, S), ``w`` may be ``s``; products
    (rows, d_v + 1) and output (rows, d_v) are written. Subtracting each row's maximum before
    exp changes no weight; it only keeps exp in range. So while no score can overflow, exp is
    first taken of the scores alone, two passes fewer, and only if a row's sum then overflows or
    is too small to trust (:func:`_exp_limits`) are these rows done again the reference's way.
    What the reference would refuse is added to ``found`` for the caller to raise.
    """
    np.matmul(q, k_t, out=s)
    if scores_finite:
        with np.errstate(over="ignore", invalid="ignore"):  # found by the check: the rows are done again
            _exponentiate(s, w, blocked, shift=False, found=None)
            if _normalise(w, v1, blocked, products, output, fully_masked, keep_weights, check=True):
                return
        np.matmul(q, k_t, out=s)  # w may have overwritten s
    _exponentiate(s, w, blocked, shift=True, found=None if scores_finite else found)
    _normalise(w, v1, blocked, products, output, fully_masked, keep_weights, check=False)


def _exponentiate(s: np.ndarray, w: np.ndarray, blocked: np.ndarray | None, *, shift: bool,
                  found: Counter[str] | None) -> None:
    """w = exp(s - each row's largest allowed score, or 0 without ``shift``) for allowed keys, else 0.

    s, w (rows, S); ``w`` may be ``s``. A row with no allowed key stays all zeros. With a counter in
    ``found``, the scores that are not finite are counted there first, as the reference refuses
    them (an overflow) before it masks.
    """
    if not shift:
        np.exp(s, out=w)
        if blocked is not None:
            np.copyto(w, 0.0, where=blocked)
        return
    if found is not None:
        found["scores"] += int(s.size - np.count_nonzero(np.isfinite(s)))
    if blocked is not None:
        np.copyto(w, s)
        np.copyto(w, -np.inf, where=blocked)
        s = w
    row_max = np.max(s, axis=-1, keepdims=True)  # (rows, 1)
    row_max[np.isneginf(row_max)] = 0.0
    np.subtract(s, row_max, out=w)
    np.exp(w, out=w)


def _normalise(w: np.ndarray, v1: np.ndarray, blocked: np.ndarray | None, products: np.ndarray,
               output: np.ndarray, fully_masked: str, keep_weights: bool, *, check: bool) -> bool:
    """output = (w @ v) / row sums, w divided too if kept; with ``check``, False if the sums fail.

    One matmul w @ [v | 1] gives the weighted values and, in its last column, the row sums, so
    the sums take no pass over w, and without weights to keep only (rows, d_v) is divided. The
    sums fail when one is not finite, or is below the least sum of exp taken alone
    (:func:`_exp_limits`) on a row with an allowed key.
    """
    np.matmul(w, v1, out=products)  # (rows, d_v + 1)
    total = products[..., -1:]  # (rows, 1)
    if check:
        least = _exp_limits(w.dtype)[1]
        if not math.isfinite(float(products.sum())):  # an overflow, or NaN
            return False
        if float(total.min()) < least:  # a row with no allowed key, or every score too low
            if blocked is None or not blocked[(total < least)[..., 0]].all():
                return False
    if blocked is None:  # every row has an allowed key, so its sum is positive
        inverse = 1.0 / total  # (rows, 1): one division per row, then multiplications
    else:  # a row with no allowed key sums to 0: zeros, or NaN under fully_masked="nan"
        inverse = np.full(total.shape, np.nan if fully_masked == "nan" else 0.0, dtype=total.dtype)
        np.divide(1.0, total, out=inverse, where=total > 0)
    np.multiply(products[..., :-1], inverse, out=output)
    if keep_weights:
        np.multiply(w, inverse, out=w)
    return True


@overload
def scaled_dot_product_attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, *, mask: np.ndarray | None = ...,
    scale: float | None = ..., fully_masked: FullyMasked = ..., need_weights: Literal[True] = ...,
) -> AttentionResult: ...
@overload
def scaled_dot_product_attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, *, mask: np.ndarray | None = ...,
    scale: float | None = ..., fully_masked: FullyMasked = ..., need_weights: Literal[False],
) -> np.ndarray: ...


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    fully_masked: FullyMasked = "zeros",
    need_weights: bool = True,
) -> AttentionResult | np.ndarray:
    """:func:`lessonlib.attention.scaled_dot_product_attention`, with fewer passes over the scores.

    With ``need_weights=False`` the output alone is returned, shaped like the result's ``output``,
    and no (L, S) array is made: the scores go into one reused buffer per thread.
    """
    check_policy(fully_masked)
    scale = check_scale(scale)
    need_weights = check_flag(need_weights, "need_weights")
    inputs = attention_inputs(query, key, value, finite=False)  # NaN and inf: below, before any work
    q, k, v = inputs.query, inputs.key, inputs.value  # (..., L, d_k), (..., S, d_k), (..., S, d_v)
    n_q, n_k, dtype = q.shape[-2], k.shape[-2], np.result_type(q, k)
    scale = 1.0 / math.sqrt(k.shape[-1]) if scale is None else scale
    scores_shape = _batch(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
    shape, blocked = scores_shape, None
    if mask is not None:
        allowed = as_allowed_mask(mask, "mask")
        shape = broadcast_shape(scores_shape, allowed.shape, "scores (..., L, S) and mask")
        check_mask_reading(allowed.shape, inputs.batch + (n_q, n_k))
        if fully_masked == "raise":
            refuse_empty_rows(allowed)
        blocked = ~allowed  # as given, so a broadcast mask is inverted once and small
    batch = _batch(shape[:-2], v.shape[:-2])
    if need_weights:  # scores and weights, each (..., L, S)
        refuse_dense_scores("lessonlib.fast.scaled_dot_product_attention", np.shape(query), np.shape(key),
                            batch + (n_q, n_k), dtype, 3)
    else:  # the output and the products beside it, (..., L, d_v) and (..., L, d_v + 1)
        refuse_oversized(array_bytes(batch + (n_q, 2 * v.shape[-1] + 1), np.result_type(dtype, v)),
                         f"lessonlib.fast.scaled_dot_product_attention of query {np.shape(query)} (its output)",
                         "Use a smaller batch or fewer queries per call.")
    # NaN and inf: the sums of squares find them in query and key (they bound the scores too), one sum in value
    squares = _sum_of_squares(q, "query"), _sum_of_squares(k, "key")
    refuse_nonfinite(v, "value")
    if need_weights and batch + (n_q, n_k) != scores_shape:
        # The mask or the value adds batch axes, so the reference's scores have fewer axes than
        # its weights or output. Rare; give exactly the reference's result, shapes and all.
        return attention.scaled_dot_product_attention(query, key, value, mask=mask, scale=scale,
                                                      fully_masked=fully_masked)
    scores_finite = _scores_stay_finite(scale, *squares, dtype)
    shape, out_dtype = batch + (n_q, n_k), np.result_type(dtype, v)
    blocked_rows = blocks_pay(n_q * n_k * dtype.itemsize, keep_weights=need_weights)
    blocks = row_blocks(shape, dtype.itemsize) if blocked_rows else [(Ellipsis,)]
    # kept per thread between calls: fresh memory would cost page faults on every call
    v1 = _scratch("values", v.shape[:-1] + (v.shape[-1] + 1,), out_dtype)  # (..., S, d_v + 1)
    v1[..., :-1], v1[..., -1] = v, 1.0
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, S), a view
    if len(blocks) > 1:  # a block's matmul into an out= buffer needs the keys contiguous to stay fast
        k_t = np.ascontiguousarray(k_t)
    q, k_t, v1 = _expand(np.multiply(q, scale, dtype=dtype), batch), _expand(k_t, batch), _expand(v1, batch)
    blocked = None if blocked is None else np.broadcast_to(blocked, shape)  # (..., L, S), a view
    products = _scratch("products", batch + (n_q, v1.shape[-1]), out_dtype)  # (..., L, d_v + 1)
    output = np.empty(batch + (n_q, v.shape[-1]), dtype=out_dtype)  # (..., L, d_v)
    scores = weights = None
    if need_weights:
        scores, weights = np.empty(shape, dtype=dtype), np.empty(shape, dtype=dtype)  # (..., L, S) each
    found: Counter[str] = Counter()  # what the reference refuses: "scores" that overflowed

    def attend(block: Block) -> None:
        matrix = _matrix(block)
        if need_weights:
            s, w = scores[block], weights[block]  # (rows, S) each, views into the results
        else:  # one buffer, reused for every block and kept for the next call
            s = w = _scratch("scores", q[block].shape[:-1] + (n_k,), dtype)  # (rows, S)
        _attend_rows(q[block], k_t[matrix], v1[matrix], None if blocked is None else blocked[block],
                     s, w, products[block], output[block], scores_finite=scores_finite,
                     fully_masked=fully_masked, keep_weights=need_weights, found=found)

    for block in blocks:  # on this thread, one after another: BLAS uses the cores inside each product
        attend(block)
    if found["scores"]:
        raise ValueError(overflow_message(found["scores"], dtype))
    if not need_weights:
        return inputs.restore(output)[0]
    return AttentionResult(*inputs.restore(output, weights, scores))


# --- softmax and masked softmax: the core's formulas, on row blocks where that pays ----------------


# The reference's own function: on row blocks beyond the cache, on two threads, it measured the
# same time as the reference (31 against 32 ms for a 4096 x 4096 float32 array on 2 cores).
softmax = attention.softmax


def masked_softmax(scores: np.ndarray, allowed: np.ndarray, *, fully_masked: FullyMasked = "zeros") -> np.ndarray:
    """:func:`lessonlib.attention.masked_softmax`, on row blocks on threads beyond the cache.

    Measured 1.5 times faster than the reference for 4096 x 4096 float32 scores on 2 cores.
    """
    check_policy(fully_masked)
    scores = as_float_array(scores, "scores")
    allowed = as_allowed_mask(allowed, "allowed")
    shape = broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    refuse_oversized(array_bytes(shape, scores.dtype, 2),
                     f"lessonlib.fast.masked_softmax of scores {scores.shape} with allowed {allowed.shape} (its "
                     f"weights, shape {shape}, and a block)", "Apply it to fewer rows at a time.")
    if len(shape) < 2 or math.prod(shape) * scores.itemsize <= cache_bytes():  # in cache: the reference
        return attention.masked_softmax(scores, allowed, fully_masked=fully_masked)
    if fully_masked == "raise":
        refuse_empty_rows(allowed)
    scores, allowed = np.broadcast_to(scores, shape), np.broadcast_to(allowed, shape)  # views
    weights = np.empty(shape, dtype=scores.dtype)  # (..., S)

    def normalise(block: Block) -> None:
        np.copyto(weights[block], attention._masked_softmax(scores[block], allowed[block], fully_masked))

    run_blocks(normalise, row_blocks(shape, scores.itemsize))
    return weights


# --- tiled attention ----------------------------------------------------------------------------------

# The reference's own function. Its time goes to the Python overhead of many small tiles, not to
# long passes; threads over its query blocks, with every tile in a reused buffer, measured 0.88 to
# 1.23 times the reference's time on 2 cores (n = 1024 to 4096, one and eight heads).
tiled_attention = cost.tiled_attention
