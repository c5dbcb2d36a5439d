"""What dense attention costs, and an exact way to avoid the n x n score matrix.

- :func:`score_matrix_bytes`: B * H * L * S * bytes per element of the dense score matrix;
- :func:`tiled_attention`: the dense result, computed block by block with an online softmax;
- :func:`measure` and :func:`loglog_slope`: median wall time, peak traced memory, growth rate.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lessonlib._blocks import run_blocks, worth_blocking
from lessonlib._checks import as_float_array, check_positive_int
from lessonlib.masks import _query_offset

# numpy has no bfloat16; its size is what a learner compares against float16 and float32.
_EXTRA_DTYPE_BYTES = {"bfloat16": 2}


def dtype_bytes(dtype: str | np.dtype | type) -> int:
    """Bytes per element of ``dtype`` ("float16", "bfloat16", "float32", np.float64, ...)."""
    if isinstance(dtype, str) and dtype in _EXTRA_DTYPE_BYTES:
        return _EXTRA_DTYPE_BYTES[dtype]
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}; use a NumPy dtype name or 'bfloat16'") from None


def score_matrix_bytes(
    batch: int, heads: int, n_queries: int, n_keys: int | None = None, dtype: str | np.dtype = "float32"
) -> int:
    """Bytes of one dense (batch, heads, L, S) score matrix: B * H * L * S * itemsize (S = L by default)."""
    batch = check_positive_int(batch, "batch")
    heads = check_positive_int(heads, "heads")
    n_queries = check_positive_int(n_queries, "n_queries")
    n_keys = n_queries if n_keys is None else check_positive_int(n_keys, "n_keys")
    return batch * heads * n_queries * n_keys * dtype_bytes(dtype)


def tiled_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    block_size: int = 256,
    causal: bool = False,
    align: str | None = None,
    scale: float | None = None,
) -> np.ndarray:
    """Exact softmax attention computed in (block x block) tiles with an online softmax.

    query (..., L, d_k), key (..., S, d_k), value (..., S, d_v) -> output (..., L, d_v).
    For each query block, key blocks are visited in order, keeping a running maximum m, a
    running denominator l and an unnormalised output acc; when a new block raises the maximum,
    l and acc are rescaled by exp(m_old - m_new). No (L, S) array is ever held. With ``causal``,
    alignment works as in :func:`lessonlib.masks.causal_mask`; rows with no allowed key give zeros.
    Query blocks run on several threads (:func:`lessonlib.set_num_threads`), each reusing its own
    (block x block) buffer, so memory grows as L * d_v plus a constant per thread.
    """
    block_size = check_positive_int(block_size, "block_size")
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    value = as_float_array(value, "value")
    d_k, n_q, n_k = key.shape[-1], query.shape[-2], key.shape[-2]
    if query.shape[-1] != d_k:
        raise ValueError(f"query width d_q={query.shape[-1]} does not match key width d_k={d_k}")
    if value.shape[-2] != n_k:
        raise ValueError(f"key has S={n_k} positions but value has shape {value.shape}")
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    start = _query_offset(n_q, n_k, align, "causal tiled attention") if causal else 0
    dtype = np.result_type(query, key, value)
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    query = np.broadcast_to(query, batch + query.shape[-2:])  # (..., L, d_k), a view
    key = np.broadcast_to(key, batch + key.shape[-2:])  # (..., S, d_k)
    value = np.broadcast_to(value, batch + value.shape[-2:])  # (..., S, d_v)
    out = np.empty(batch + (n_q, value.shape[-1]), dtype=dtype)  # (..., L, d_v)
    # Large matrices: one item per (batch index, query block), so threads share the work and each
    # item's tiles stay in cache. Small ones: one item per query block across the whole batch.
    indexes = list(np.ndindex(batch)) if worth_blocking(n_q, n_k, math.prod(batch)) else [()]

    def attend(item: tuple[tuple[int, ...], int]) -> None:
        index, q0 = item
        rows = (*index, Ellipsis, slice(q0, min(q0 + block_size, n_q)), slice(None))
        q_block = query[rows] * scale  # (..., bq, d_k)
        _attend_query_block(
            q_block, key[index], value[index], q0 + start if causal else None, block_size, out[rows]
        )

    run_blocks(attend, [(index, q0) for index in indexes for q0 in range(0, n_q, block_size)])
    return out


def _attend_query_block(
    q_block: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    first_pos: int | None,
    block_size: int,
    out: np.ndarray,
) -> None:
    """Online softmax of one scaled query block over all key blocks, written into ``out``.

    q_block (..., bq, d_k), key (..., S, d_k), value (..., S, d_v), out (..., bq, d_v);
    ``first_pos`` is the block's first query position for the causal rule (None = no mask).
    Every step writes into buffers made once here, so the loop allocates nothing of size bq x bk.
    """
    n_rows, n_keys, dtype = q_block.shape[-2], key.shape[-2], np.result_type(q_block, key, value)
    shape = np.broadcast_shapes(q_block.shape[:-2], key.shape[:-2]) + (n_rows,)
    running_max = np.full(shape, -np.inf, dtype=dtype)  # (..., bq)
    new_max, rescale, row_sum = (np.empty_like(running_max) for _ in range(3))  # (..., bq)
    denom = np.zeros(shape, dtype=dtype)  # (..., bq)
    acc = np.zeros(shape + (value.shape[-1],), dtype=dtype)  # (..., bq, d_v)
    tile = np.empty(shape + (min(block_size, n_keys),), dtype=dtype)  # (..., bq, bk)
    block_out = np.empty_like(acc)  # (..., bq, d_v)
    key_t = np.swapaxes(key, -1, -2)  # (..., d_k, S), a view
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
    np.divide(acc, denom[..., None], out=acc, where=denom[..., None] > 0)
    out[...] = acc


@dataclass(frozen=True)
class Measurement:
    """Median wall time over repeats, and peak memory traced during one extra call."""

    median_seconds: float
    peak_bytes: int
    times: tuple[float, ...]


def measure(fn: Callable[[], object], *, repeat: int = 5, warmup: int = 1) -> Measurement:
    """Time ``fn()`` ``repeat`` times (after ``warmup`` calls) and trace one call's peak allocation.

    Timing and tracing are separate: tracemalloc slows allocation, so it never touches the times.
    NumPy reports its array buffers to tracemalloc, so the peak includes them.
    """
    repeat = check_positive_int(repeat, "repeat")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    if not was_tracing:
        tracemalloc.stop()
    return Measurement(statistics.median(times), max(peak - base, 0), tuple(times))


def loglog_slope(sizes: np.ndarray | list[float], values: np.ndarray | list[float]) -> float:
    """Least-squares slope of log(values) against log(sizes): ~1 linear growth, ~2 quadratic."""
    sizes = np.asarray(sizes, dtype=float)
    values = np.asarray(values, dtype=float)
    if sizes.shape != values.shape or sizes.ndim != 1 or sizes.size < 2:
        raise ValueError(
            f"need two 1-D sequences of equal length >= 2, got shapes {sizes.shape} and {values.shape}"
        )
    if np.any(sizes <= 0) or np.any(values <= 0):
        raise ValueError("sizes and values must be positive to take logarithms")
    slope, _ = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)
