"""What dense attention costs, and an exact way to avoid the n x n score matrix.

- :func:`score_matrix_bytes`: B * H * L * S * bytes per element of the dense score matrix;
- :func:`tiled_attention`: the dense output, computed block by block with an online softmax;
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

from lessonlib._checks import (
    array_bytes,
    as_dtype,
    as_float_array,
    attention_batch,
    check_callable,
    check_choice,
    check_flag,
    check_ndim,
    check_positive_int,
    check_scale,
    check_widths,
    overflow_message,
    refuse_oversized,
)
from lessonlib.masks import ALIGNMENTS, Align, query_start

# numpy has no bfloat16; its size is what a learner compares against float16 and float32.
_EXTRA_DTYPE_BYTES = {"bfloat16": 2}


def dtype_bytes(dtype: str | np.dtype | type) -> int:
    """Bytes per element of ``dtype`` ("float16", "bfloat16", "float32", np.float64, ...)."""
    if isinstance(dtype, str) and dtype in _EXTRA_DTYPE_BYTES:
        return _EXTRA_DTYPE_BYTES[dtype]
    return as_dtype(dtype).itemsize


def score_matrix_bytes(
    batch: int, heads: int, n_queries: int, n_keys: int | None = None, dtype: str | np.dtype = "float32"
) -> int:
    """Bytes of one dense (batch, heads, L, S) score matrix: B * H * L * S * itemsize (S = L by default)."""
    batch = check_positive_int(batch, "batch")
    heads = check_positive_int(heads, "heads")
    n_queries = check_positive_int(n_queries, "n_queries")
    n_keys = n_queries if n_keys is None else check_positive_int(n_keys, "n_keys")
    return batch * heads * n_queries * n_keys * dtype_bytes(dtype)


@dataclass(frozen=True)
class TiledResult:
    """What tiled attention computed. ``output`` is the dense :class:`AttentionResult`'s output;
    no (L, S) array exists, so there are no weights or scores, only each row's normaliser."""

    output: np.ndarray  # (..., L, d_v)
    logsumexp: np.ndarray  # (..., L): log sum_j exp(score_ij) over allowed keys; -inf if none


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
    """Exact softmax attention computed in (block x block) tiles with an online softmax.

    query (..., L, d_k), key (..., S, d_k), value (..., S, d_v) -> output (..., L, d_v).
    For each query block, key blocks are visited in order, keeping a running maximum m, a
    running denominator l and an unnormalised output acc. When a key block raises the maximum
    to m', what was summed so far is rescaled by exp(m - m'):

        l' = l * exp(m - m') + sum_j exp(s_j - m'),   acc' = acc * exp(m - m') + exp(s - m') @ v

    and at the end output = acc / l, logsumexp = m + log l. No (L, S) array is ever held. With
    ``causal``, ``align`` places the queries as in :func:`lessonlib.masks.causal_mask`; rows with
    no allowed key give zeros.
    """
    block_size = check_positive_int(block_size, "block_size")
    causal = check_flag(causal, "causal")
    scale = check_scale(scale)
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    value = as_float_array(value, "value")
    check_tiled_inputs(query, key, value)
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(key.shape[-1]) if scale is None else scale
    if align is not None:  # checked even without causal, where it changes nothing: it may be a mistake
        check_choice(align, "align", ALIGNMENTS)
    first_query = query_start(n_q, n_k, align, "causal tiled attention") if causal else 0
    batch = attention_batch(query, key, value)
    dtype = np.result_type(query, key, value)
    tile = (min(block_size, n_q), min(block_size, n_k))
    refuse_oversized(array_bytes(batch + (n_q, value.shape[-1] + 1), dtype) + array_bytes(batch + tile, dtype, 4),
                     f"tiled_attention of query {query.shape} with value {value.shape} (its output and four "
                     f"{tile} tiles per example)", "Use a smaller block_size, a smaller batch or fewer queries.")
    output = np.empty(batch + (n_q, value.shape[-1]), dtype=dtype)  # (..., L, d_v)
    logsumexp = np.empty(batch + (n_q,), dtype=dtype)  # (..., L)
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        q_block = query[..., q0:q1, :] * scale  # (..., bq, d_k)
        query_pos = np.arange(q0, q1) + first_query  # (bq,) positions of these queries
        running_max = np.full(batch + (q1 - q0,), -np.inf, dtype=dtype)  # m (..., bq)
        denom = np.zeros(batch + (q1 - q0,), dtype=dtype)  # l (..., bq)
        acc = np.zeros(batch + (q1 - q0, value.shape[-1]), dtype=dtype)  # (..., bq, d_v)
        for k0 in range(0, n_k, block_size):
            k1 = min(k0 + block_size, n_k)
            if causal and k0 > query_pos[-1]:
                break  # this key block and all later ones are in every query's future
            s = q_block @ np.swapaxes(key[..., k0:k1, :], -1, -2)  # (..., bq, bk)
            if causal:
                s = np.where(np.arange(k0, k1)[None, :] <= query_pos[:, None], s, -np.inf)  # (..., bq, bk)
            new_max = np.maximum(running_max, np.max(s, axis=-1))  # m' (..., bq)
            shift = np.where(np.isneginf(new_max), 0.0, new_max)  # a row with nothing allowed yet: 0
            p = np.exp(s - shift[..., None])  # (..., bq, bk), unnormalised weights
            rescale = np.exp(running_max - shift)  # exp(m - m') (..., bq); 0 while m = -inf
            denom = denom * rescale + np.sum(p, axis=-1)  # (..., bq)
            acc = acc * rescale[..., None] + p @ value[..., k0:k1, :]  # (..., bq, d_v)
            running_max = new_max
        seen = denom > 0  # (..., bq); False on a row with no allowed key
        output[..., q0:q1, :] = acc / np.where(seen, denom, 1.0)[..., None]  # (..., bq, d_v)
        logsumexp[..., q0:q1] = np.where(seen, running_max + np.log(np.where(seen, denom, 1.0)), -np.inf)
    if not math.isfinite(float(np.sum(output))):  # finite inputs: only scores that overflowed do this
        raise ValueError(overflow_message(int(output.size - np.count_nonzero(np.isfinite(output))), dtype))
    return TiledResult(output=output, logsumexp=logsumexp)


def check_tiled_inputs(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
    """Refuse tiled-attention inputs whose widths or key/value lengths disagree, or that lack a sequence axis."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_ndim(x, name, 2, "(..., n, d)")
    check_widths(query, key)
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(f"key has S={key.shape[-2]} positions but value has shape {value.shape}")


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
    check_callable(fn, "fn")
    repeat = check_positive_int(repeat, "repeat")
    warmup = check_positive_int(warmup, "warmup", minimum=0)
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
    """Least-squares slope of log(values) against log(sizes): ~1 linear growth, ~2 quadratic.

    sizes and values: 1-D, of equal length >= 2, finite and positive; the sizes not all equal.
    """
    sizes = as_float_array(sizes, "sizes")
    values = as_float_array(values, "values")
    if sizes.shape != values.shape or sizes.ndim != 1 or sizes.size < 2:
        raise ValueError(
            f"sizes and values must be two 1-D sequences of equal length >= 2, got shapes {sizes.shape} and "
            f"{values.shape}"
        )
    for name, x in (("sizes", sizes), ("values", values)):
        if np.any(x <= 0):
            raise ValueError(f"{name} must be positive to take logarithms, got {x[x <= 0][:4].tolist()}")
    if np.all(sizes == sizes[0]):
        raise ValueError(f"sizes are all {sizes[0]:g}: a slope needs at least two different sizes")
    slope, _ = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)
