"""The same attention, softmax and tiling as the reference modules, made fast. Opt in by name.

    import lessonlib.fast as fast
    fast.scaled_dot_product_attention(q, k, v)                      # same result as lessonlib's
    fast.scaled_dot_product_attention(q, k, v, need_weights=False)  # the output alone
    fast.set_num_threads(1)                                         # one core, for a fair timing

Every function here has the signature of its reference in :mod:`lessonlib.attention` or
:mod:`lessonlib.cost` and gives the same numbers (to 1e-6 in float32, 1e-12 in float64: a
different split into blocks can change the last bit of a sum). Nothing else in the package calls
this module; a learner who times ``lessonlib.scaled_dot_product_attention`` times the formula.

What makes it fast:

- Threads. NumPy's element-wise passes (max, exp, sums) run on one core, and in dense attention
  they cost more than the matmuls. NumPy releases the GIL inside its ufuncs and inside matmul, so
  independent blocks of query rows run at the same time in plain Python threads.
- BLAS on one thread per worker. Every block calls BLAS for its matmuls; were BLAS to start its
  own threads too, they would compete for the same cores. While a call here runs, BLAS is limited
  to one thread (with threadpoolctl); the limit is lifted when the call returns, error or not.
  BLAS's thread count is a setting of the whole process, so a matmul that another thread of the
  program runs at that moment is held to one thread as well.
- Cache-sized blocks and in-place passes. Each block's scores are still in cache when its softmax
  passes and its second matmul read them, and every pass writes into an existing buffer, so no
  array beyond the results is made (and with ``need_weights=False``, none of size L x S at all).

Inputs below a few tens of thousands of scores are done as one block on the calling thread: the
per-block bookkeeping (tens of microseconds) would cost more than threads save.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, overload

import numpy as np

from lessonlib import attention
from lessonlib._checks import (
    FullyMasked,
    as_allowed_mask,
    as_float_array,
    attention_inputs,
    broadcast_shape,
    check_policy,
    check_positive_int,
    nonfinite_message,
    refuse_empty_rows,
)
from lessonlib.attention import AttentionResult
from lessonlib.cost import TiledResult, check_tiled_inputs
from lessonlib.masks import Align, query_start

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

Item = TypeVar("Item")

# Rows per block of dense attention: about this many bytes of scores. Such a block stays in cache
# (the last level, if not a core's own 1-2 MiB) between its matmul and its softmax passes; smaller
# blocks cost more in BLAS, which repacks the whole key and value matrices for every call.
BLOCK_BYTES = 1 << 22
# Below these sizes one block on the calling thread is faster: the per-block bookkeeping (tens of
# microseconds of Python and thread hand-over per block) costs more than threads save. Measured on
# 2 cores: blocks win from n = 512 for one (n, n) matrix and from n = 256 for eight.
MIN_BLOCKED_SCORES = 1 << 15  # scores in one (L, S) matrix
MIN_BLOCKED_TOTAL = 1 << 17  # scores in the whole (..., L, S) stack


# --- threads ---------------------------------------------------------------------------------------


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system reports it), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class _Shared:
    """Module state, changed only under ``lock``: the thread setting, the helper pool, the BLAS limit."""

    lock = threading.Lock()
    threads = available_cores()
    pool: ThreadPoolExecutor | None = None
    pool_workers = 0
    blas_users = 0  # calls now running, which share one BLAS limit
    blas_limit = None  # threadpoolctl's limiter while blas_users > 0


def get_num_threads() -> int:
    """How many threads this module's functions may use (default: the number of available cores)."""
    return _Shared.threads


def set_num_threads(num_threads: int | None) -> int:
    """Let this module's functions use up to ``num_threads`` threads; None = all available cores.

    Returns the previous setting, so a caller can put it back. BLAS runs on one thread inside
    each call, so with 1 thread a call uses one core. Results do not depend on the setting beyond
    rounding (a different split into blocks can change the last bit of a sum).
    """
    if num_threads is None:
        num_threads = available_cores()
    num_threads = check_positive_int(num_threads, "num_threads")
    with _Shared.lock:
        previous, _Shared.threads = _Shared.threads, num_threads
    return previous


@dataclass(frozen=True)
class ThreadInfo:
    """Who may run how many threads right now: this module, BLAS (outside our calls), the machine."""

    fast_threads: int  # get_num_threads(): threads a call of this module may use
    blas_threads: dict[str, int]  # BLAS library -> its current thread count
    cores: int  # available_cores()

    def __str__(self) -> str:
        blas = ", ".join(f"{name} {n}" for name, n in self.blas_threads.items()) or "none found"
        return (f"lessonlib.fast: {self.fast_threads} thread(s) (BLAS held to 1 inside its calls); "
                f"BLAS otherwise: {blas}; cores available: {self.cores}")


def thread_info() -> ThreadInfo:
    """How many threads run where: print it beside a timing so the reader knows what was measured."""
    blas = {
        f"{lib.internal_api} ({os.path.basename(lib.filepath)})": lib.num_threads
        for lib in _controller().select(user_api="blas").lib_controllers
    }
    return ThreadInfo(get_num_threads(), blas, available_cores())


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool of helper threads, rebuilt when the wanted number of helpers changes."""
    with _Shared.lock:
        if _Shared.pool is None or _Shared.pool_workers != workers:
            if _Shared.pool is not None:
                _Shared.pool.shutdown(wait=False)
            _Shared.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lessonlib")
            _Shared.pool_workers = workers
        return _Shared.pool


def _start_afresh_after_fork() -> None:
    """A forked child has none of the parent's threads (and perhaps a lock held by one of them)."""
    _Shared.lock = threading.Lock()
    _Shared.pool, _Shared.pool_workers, _Shared.blas_users, _Shared.blas_limit = None, 0, 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_start_afresh_after_fork)


@functools.cache
def _controller() -> ThreadpoolController:
    """threadpoolctl's view of the loaded BLAS libraries (found once: the search takes ~1 ms)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _hold_blas_to_one_thread() -> None:
    """Limit BLAS to one thread; concurrent calls share the limit and the last one to finish lifts it."""
    with _Shared.lock:
        if _Shared.blas_users == 0:
            _Shared.blas_limit = _controller().limit(limits=1, user_api="blas")
        _Shared.blas_users += 1


def _release_blas() -> None:
    with _Shared.lock:
        _Shared.blas_users -= 1
        if _Shared.blas_users == 0:
            _Shared.blas_limit.restore_original_limits()
            _Shared.blas_limit = None


def run_blocks(work: Callable[[Item], None], items: Sequence[Item]) -> None:
    """Call ``work(item)`` for every item, spread over up to :func:`get_num_threads` threads.

    Items must be independent (each writes its own slice of an output). The calling thread works
    too; each thread takes the next unstarted item when it finishes one, so a core slowed by
    another program simply does fewer items. BLAS runs on one thread until this returns. The
    first error raised by an item is raised here once every thread has stopped.
    """
    workers = min(get_num_threads(), len(items))
    counter, counter_lock, failed = itertools.count(), threading.Lock(), threading.Event()

    def take_items() -> None:
        while not failed.is_set():
            with counter_lock:
                i = next(counter)
            if i >= len(items):
                return
            try:
                work(items[i])
            except BaseException:
                failed.set()
                raise

    _hold_blas_to_one_thread()
    try:
        if workers <= 1:
            take_items()
            return
        helpers = [_pool(workers - 1).submit(take_items) for _ in range(workers - 1)]
        try:
            take_items()
        finally:
            # A helper that never started has nothing left to do (every item is taken); cancelling
            # it rather than waiting also keeps a call made from inside a helper from waiting on itself.
            errors = [helper.exception() for helper in helpers if not helper.cancel()]
        for error in errors:
            if error is not None:
                raise error
    finally:
        _release_blas()


# --- cutting the work into blocks ------------------------------------------------------------------


def worth_blocking(n_rows: int, n_cols: int, n_matrices: int = 1) -> bool:
    """Whether a stack of ``n_matrices`` (n_rows, n_cols) score matrices is big enough for blocks."""
    scores = n_rows * n_cols
    return scores >= MIN_BLOCKED_SCORES and n_matrices * scores >= MIN_BLOCKED_TOTAL


def rows_per_block(n_rows: int, row_bytes: int, n_matrices: int = 1) -> int:
    """Rows of one block of a stack of ``n_matrices`` (n_rows, .) matrices with rows of ``row_bytes``.

    About BLOCK_BYTES per block, but no more rows than give every thread two blocks to take.
    """
    rows = BLOCK_BYTES // max(row_bytes, 1)
    blocks_per_matrix = -(-2 * get_num_threads() // max(n_matrices, 1))  # ceiling division
    rows = min(rows, -(-n_rows // blocks_per_matrix))
    return max(1, min(n_rows, rows))


Block = tuple  # (*batch index, row slice): indexes one block of rows of a (..., L, S) stack


def row_blocks(shape: tuple[int, ...], itemsize: int) -> list[Block]:
    """Blocks of query rows covering a (..., L, S) stack of ``itemsize``-byte scores.

    One block (the whole stack) when it is too small to be worth cutting.
    """
    batch, n_rows, n_cols = shape[:-2], shape[-2], shape[-1]
    n_matrices = math.prod(batch)
    if not worth_blocking(n_rows, n_cols, n_matrices):
        return [(Ellipsis,)]
    rows = rows_per_block(n_rows, n_cols * itemsize, n_matrices)
    return [(*index, slice(r0, r0 + rows)) for index in np.ndindex(batch) for r0 in range(0, n_rows, rows)]


def _batch_index(block: Block) -> Block:
    """The part of a block that picks one matrix of the stack (drops the row slice)."""
    return block if block == (Ellipsis,) else block[:-1]


# --- the kernels: the reference formulas, each pass writing in place --------------------------------


def _softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    """Write the softmax of each row of ``x`` (..., S) into ``out`` (..., S); ``out`` may be ``x``."""
    row_max = np.max(x, axis=-1, keepdims=True)  # (..., 1)
    np.subtract(x, row_max, out=out)  # (..., S)
    np.exp(out, out=out)
    out /= np.sum(out, axis=-1, keepdims=True)


def _masked_softmax_rows(scores: np.ndarray, allowed: np.ndarray, out: np.ndarray, fully_masked: FullyMasked) -> None:
    """Write the masked softmax of each row of ``scores`` (..., S) into ``out``; ``out`` may be ``scores``.

    ``allowed`` has the shape of ``scores`` (a broadcast view is fine). Rows with no allowed key
    are zeros, or NaN under ``fully_masked="nan"`` ("raise" is checked before any block runs).
    """
    if out is scores:
        np.copyto(out, -np.inf, where=~allowed)
    else:
        np.copyto(out, -np.inf)
        np.copyto(out, scores, where=allowed)  # (..., S): allowed scores, -inf elsewhere
    row_max = np.max(out, axis=-1, keepdims=True)  # (..., 1), -inf where nothing is allowed
    empty = np.isneginf(row_max)  # (..., 1)
    row_max[empty] = 0.0  # such a row stays -inf, so exp gives zeros and not NaN
    out -= row_max
    np.exp(out, out=out)  # exp(-inf) = 0 for excluded keys
    total = np.sum(out, axis=-1, keepdims=True)  # (..., 1), >= 1 on rows with an allowed key
    np.divide(out, total, out=out, where=~empty)
    if fully_masked == "nan":
        out[np.broadcast_to(empty, out.shape)] = np.nan


def _attend_unnormalised(
    s: np.ndarray, allowed: np.ndarray | None, value: np.ndarray, out: np.ndarray, fully_masked: str
) -> None:
    """out = softmax(s over allowed keys) @ value, dividing the output rather than the weights.

    sum_j exp(s_j - m) v_j / sum_j exp(s_j - m) is the same number as weights @ value, with one
    pass fewer over the (rows, S) scores, which are overwritten. s (..., S), value (S, d_v),
    out (..., d_v); a row with no allowed key gives zeros, or NaN under ``fully_masked="nan"``.
    """
    if allowed is not None:
        np.copyto(s, -np.inf, where=~allowed)
    row_max = np.max(s, axis=-1, keepdims=True)  # (..., 1), -inf where nothing is allowed
    empty = np.isneginf(row_max)  # (..., 1)
    row_max[empty] = 0.0
    s -= row_max
    np.exp(s, out=s)  # (..., S), unnormalised weights
    total = np.sum(s, axis=-1, keepdims=True)  # (..., 1)
    np.matmul(s, value, out=out)  # (..., d_v)
    np.divide(out, total, out=out, where=~empty)
    if fully_masked == "nan":
        out[np.broadcast_to(empty, out.shape)] = np.nan


class _Nonfinite:
    """Counts non-finite scores seen by the blocks of one masked call (the reference refuses them)."""

    def __init__(self) -> None:
        self.count, self.lock = 0, threading.Lock()

    def check(self, scores: np.ndarray) -> None:
        if not np.isfinite(np.sum(scores)):  # one cheap pass; only then count
            bad = int(scores.size - np.count_nonzero(np.isfinite(scores)))
            with self.lock:
                self.count += bad

    def refuse(self) -> None:
        if self.count:
            raise ValueError(nonfinite_message("scores", self.count))


# --- the public functions ---------------------------------------------------------------------------


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`lessonlib.attention.softmax`, in row blocks on threads (along the last axis)."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.ndim < 2 or axis not in (-1, x.ndim - 1):
        return attention.softmax(x, axis=axis)
    out = np.empty(x.shape, dtype=x.dtype)  # (..., S)
    run_blocks(lambda block: _softmax_rows(x[block], out[block]), row_blocks(x.shape, x.itemsize))
    return out


def masked_softmax(scores: np.ndarray, allowed: np.ndarray, *, fully_masked: FullyMasked = "zeros") -> np.ndarray:
    """:func:`lessonlib.attention.masked_softmax`, in row blocks on threads."""
    check_policy(fully_masked)
    scores = as_float_array(scores, "scores")
    allowed = as_allowed_mask(allowed, "allowed")
    shape = broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    if fully_masked == "raise":
        refuse_empty_rows(allowed)
    scores, allowed = np.broadcast_to(scores, shape), np.broadcast_to(allowed, shape)  # views
    weights = np.empty(shape, dtype=scores.dtype)  # (..., S)
    blocks = row_blocks(shape, weights.itemsize) if len(shape) >= 2 else [(Ellipsis,)]
    run_blocks(lambda b: _masked_softmax_rows(scores[b], allowed[b], weights[b], fully_masked), blocks)
    return weights


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
    """:func:`lessonlib.attention.scaled_dot_product_attention`, one block of query rows at a time.

    Each block goes through scores, softmax and weights @ value while it is still in cache; blocks
    run on threads. With ``need_weights=False`` the output alone is returned, shaped like the
    result's ``output``, and no (L, S) array is kept: each thread reuses one block-sized buffer.
    """
    check_policy(fully_masked)
    inputs = attention_inputs(query, key, value)
    q, k, v = inputs.query, inputs.key, inputs.value  # (..., L, d_k), (..., S, d_k), (..., S, d_v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
    allowed = None
    if mask is not None:
        allowed = as_allowed_mask(mask, "allowed")
        shape = broadcast_shape(scores_shape, allowed.shape, "scores and allowed mask")
        if fully_masked == "raise":
            refuse_empty_rows(allowed)
    else:
        shape = scores_shape
    batch = np.broadcast_shapes(shape[:-2], v.shape[:-2])
    if need_weights and batch + (n_q, n_k) != scores_shape:
        # The mask or the value adds batch axes, so the reference's scores have fewer axes than
        # its weights or output. Rare; give exactly the reference's result, shapes and all.
        return attention.scaled_dot_product_attention(query, key, value, mask=mask, scale=scale,
                                                      fully_masked=fully_masked)
    scale = 1.0 / math.sqrt(k.shape[-1]) if scale is None else scale
    shape = batch + (n_q, n_k)
    q = np.broadcast_to(q, batch + q.shape[-2:])  # (..., L, d_k), a view
    k = np.broadcast_to(k, batch + k.shape[-2:])  # (..., S, d_k)
    v = np.broadcast_to(v, batch + v.shape[-2:])  # (..., S, d_v)
    if allowed is not None:
        allowed = np.broadcast_to(allowed, shape)  # (..., L, S), a view
    # matmul with out= into a transposed view skips BLAS's fast path (2x slower): transpose once
    k_t = np.ascontiguousarray(np.swapaxes(k, -1, -2))  # (..., d_k, S)
    dtype = np.result_type(q, k)
    output = np.empty(batch + (n_q, v.shape[-1]), dtype=np.result_type(dtype, v))  # (..., L, d_v)
    scores = weights = None
    if need_weights:
        scores, weights = np.empty(shape, dtype=dtype), np.empty(shape, dtype=dtype)  # (..., L, S) each
    scratch, nonfinite = threading.local(), _Nonfinite()

    def attend(block: Block) -> None:
        index = _batch_index(block)
        if need_weights:
            s, w = scores[block], weights[block]  # (rows, S) each, views into the results
        else:  # one buffer per thread, reused for every block it takes
            rows_shape = q[block].shape[:-1] + (n_k,)
            if getattr(scratch, "buffer", None) is None or scratch.buffer.size < math.prod(rows_shape):
                scratch.buffer = np.empty(math.prod(rows_shape), dtype=dtype)
            s = w = scratch.buffer[: math.prod(rows_shape)].reshape(rows_shape)  # (rows, S)
        np.matmul(q[block], k_t[index], out=s)
        s *= scale
        if allowed is not None:
            nonfinite.check(s)
        if not need_weights:  # normalise the (rows, d_v) output, not the (rows, S) weights
            _attend_unnormalised(s, None if allowed is None else allowed[block], v[index], output[block],
                                 fully_masked)
            return
        if allowed is None:
            _softmax_rows(s, w)
        else:
            _masked_softmax_rows(s, allowed[block], w, fully_masked)
        np.matmul(w, v[index], out=output[block])  # (rows, d_v)

    run_blocks(attend, row_blocks(shape, np.dtype(dtype).itemsize))
    nonfinite.refuse()
    if not need_weights:
        return inputs.restore(output)[0]
    return AttentionResult(*inputs.restore(output, weights, scores))


def tiled_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    block_size: int = 256,
    causal: bool = False,
    align: Align | None = None,
    scale: float | None = None,
) -> TiledResult:
    """:func:`lessonlib.cost.tiled_attention`, its query blocks on threads, each reusing its own buffers.

    Memory grows as L * d_v plus a constant per thread, as in the reference.
    """
    block_size = check_positive_int(block_size, "block_size")
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    value = as_float_array(value, "value")
    check_tiled_inputs(query, key, value)
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(key.shape[-1]) if scale is None else scale
    first_query = query_start(n_q, n_k, align, "causal tiled attention") if causal else 0
    dtype = np.result_type(query, key, value)
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    query = np.broadcast_to(query, batch + query.shape[-2:])  # (..., L, d_k), a view
    key = np.broadcast_to(key, batch + key.shape[-2:])  # (..., S, d_k)
    value = np.broadcast_to(value, batch + value.shape[-2:])  # (..., S, d_v)
    key_t = np.ascontiguousarray(np.swapaxes(key, -1, -2))  # (..., d_k, S): see scaled_dot_product_attention
    output = np.empty(batch + (n_q, value.shape[-1]), dtype=dtype)  # (..., L, d_v)
    logsumexp = np.empty(batch + (n_q,), dtype=dtype)  # (..., L)
    # Large stacks: one item per (batch index, query block), so threads share the work and each
    # item's tiles stay in cache. Small ones: one item per query block across the whole batch.
    indexes = list(np.ndindex(batch)) if worth_blocking(n_q, n_k, math.prod(batch)) else [()]

    def attend(item: tuple[tuple[int, ...], int]) -> None:
        index, q0 = item
        rows = slice(q0, min(q0 + block_size, n_q))
        q_block = query[(*index, Ellipsis, rows, slice(None))] * scale  # (..., bq, d_k)
        _attend_query_block(
            q_block, key_t[index], value[index], q0 + first_query if causal else None, block_size,
            output[(*index, Ellipsis, rows, slice(None))], logsumexp[(*index, Ellipsis, rows)],
        )

    run_blocks(attend, [(index, q0) for index in indexes for q0 in range(0, n_q, block_size)])
    return TiledResult(output=output, logsumexp=logsumexp)


def _attend_query_block(
    q_block: np.ndarray,
    key_t: np.ndarray,
    value: np.ndarray,
    first_pos: int | None,
    block_size: int,
    out: np.ndarray,
    logsumexp: np.ndarray,
) -> None:
    """Online softmax of one scaled query block over all key blocks, written into ``out`` and ``logsumexp``.

    q_block (..., bq, d_k), key_t (..., d_k, S) the keys transposed, value (..., S, d_v), out
    (..., bq, d_v), logsumexp (..., bq); ``first_pos`` is the block's first query position for the
    causal rule (None = no mask). Every step writes into buffers made once here, so the loop
    allocates nothing of size bq x bk.
    """
    n_rows, n_keys, dtype = q_block.shape[-2], key_t.shape[-1], np.result_type(q_block, key_t, value)
    shape = np.broadcast_shapes(q_block.shape[:-2], key_t.shape[:-2]) + (n_rows,)
    running_max = np.full(shape, -np.inf, dtype=dtype)  # (..., bq)
    new_max, rescale, row_sum = (np.empty_like(running_max) for _ in range(3))  # (..., bq)
    denom = np.zeros(shape, dtype=dtype)  # (..., bq)
    acc = np.zeros(shape + (value.shape[-1],), dtype=dtype)  # (..., bq, d_v)
    tile = np.empty(shape + (min(block_size, n_keys),), dtype=dtype)  # (..., bq, bk)
    block_out = np.empty_like(acc)  # (..., bq, d_v)
    for k0 in range(0, n_keys, block_size):
        k1 = min(k0 + block_size, n_keys)
        if first_pos is not None and k0 > first_pos + n_rows - 1:
            break  # this block and all later ones are in every query's future
        s = tile[..., : k1 - k0]  # (..., bq, bk); the last key block may be narrower
        np.matmul(q_block, key_t[..., k0:k1], out=s)
        if first_pos is not None and k1 - 1 > first_pos:  # the block crosses the diagonal
            allowed = (np.arange(n_rows)[:, None] + first_pos) >= np.arange(k0, k1)[None, :]  # (bq, bk)
            np.copyto(s, -np.inf, where=~allowed)
        np.max(s, axis=-1, out=new_max)
        np.maximum(running_max, new_max, out=new_max)  # (..., bq)
        shift = new_max
        if first_pos is not None:  # a row with nothing allowed yet keeps -inf: shift it by 0
            shift = np.where(np.isneginf(new_max), 0.0, new_max)
        np.subtract(running_max, shift, out=rescale)
        np.exp(rescale, out=rescale)  # (..., bq); 0 where the old max was -inf
        s -= shift[..., None]
        np.exp(s, out=s)  # now unnormalised probabilities p
        denom *= rescale
        denom += np.sum(s, axis=-1, out=row_sum)
        acc *= rescale[..., None]
        acc += np.matmul(s, value[..., k0:k1, :], out=block_out)  # (..., bq, d_v)
        running_max, new_max = new_max, running_max
    seen = denom > 0  # (..., bq); False on a row with no allowed key
    np.divide(acc, denom[..., None], out=acc, where=seen[..., None])
    out[...] = acc
    np.log(denom, out=row_sum, where=seen)
    logsumexp[...] = np.where(seen, running_max + row_sum, -np.inf)
