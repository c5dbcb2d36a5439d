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
    out = np.empty(batch + (n_q, value.shape[-1]), dtype=dtype)  # (..., L, d_v)
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        out[..., q0:q1, :] = _attend_query_block(
            query[..., q0:q1, :] * scale, key, value, q0 + start if causal else None, block_size
        )
    return out


def _attend_query_block(
    q_block: np.ndarray, key: np.ndarray, value: np.ndarray, first_pos: int | None, block_size: int
) -> np.ndarray:
    """Online softmax of one scaled query block over all key blocks; ``first_pos`` None = no mask."""
    n_rows = q_block.shape[-2]
    shape = np.broadcast_shapes(q_block.shape[:-2], key.shape[:-2]) + (n_rows,)
    running_max = np.full(shape, -np.inf, dtype=q_block.dtype)  # (..., bq)
    denom = np.zeros(shape, dtype=q_block.dtype)  # (..., bq)
    acc = np.zeros(shape + (value.shape[-1],), dtype=q_block.dtype)  # (..., bq, d_v)
    for k0 in range(0, key.shape[-2], block_size):
        k1 = min(k0 + block_size, key.shape[-2])
        if first_pos is not None and k0 > first_pos + n_rows - 1:
            break  # this block and all later ones are in every query's future
        s = np.matmul(q_block, np.swapaxes(key[..., k0:k1, :], -1, -2))  # (..., bq, bk)
        if first_pos is not None and k1 - 1 > first_pos:  # the block crosses the diagonal
            allowed = (np.arange(n_rows)[:, None] + first_pos) >= np.arange(k0, k1)[None, :]  # (bq, bk)
            s = np.where(allowed, s, -np.inf)
        new_max = np.maximum(running_max, s.max(axis=-1))  # (..., bq)
        safe_max = np.where(np.isneginf(new_max), 0.0, new_max)  # rows with nothing allowed yet
        rescale = np.exp(running_max - safe_max)  # (..., bq); 0 where the old max was -inf
        s -= safe_max[..., None]
        np.exp(s, out=s)  # now unnormalised probabilities p
        denom *= rescale
        denom += s.sum(axis=-1)
        acc *= rescale[..., None]
        acc += np.matmul(s, value[..., k0:k1, :])  # (..., bq, d_v)
        running_max = new_max
    np.divide(acc, denom[..., None], out=acc, where=denom[..., None] > 0)
    return acc


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
