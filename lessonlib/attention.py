"""Scaled dot-product and multi-head attention in NumPy.

    scores  = query @ key^T * scale            (..., L, S), scale = 1/sqrt(d_k) by default
    weights = softmax over allowed keys         (..., L, S), each row sums to one
    output  = weights @ value                   (..., L, d_v)

Masks are boolean and mean *allowed*: True = this key may be attended to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lessonlib._blocks import row_blocks, rows_per_block, run_blocks, worth_blocking
from lessonlib._checks import (
    as_allowed_mask,
    as_float_array,
    broadcast_shape,
    check_policy,
    check_positive_int,
)


@dataclass(frozen=True)
class AttentionResult:
    """What one attention call computed: the output and the arrays a reader wants to inspect."""

    output: np.ndarray  # (..., L, d_v), or (..., L) for scalar values
    weights: np.ndarray  # (..., L, S)
    scores: np.ndarray  # (..., L, S), scaled, before masking


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax: exp(x - max) / sum(exp(x - max)) along ``axis``.

    Large arrays taken along the last axis are done in row blocks on several threads
    (:func:`lessonlib.set_num_threads`); each row gets exactly the same steps as here.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.ndim >= 2 and axis in (-1, x.ndim - 1) and worth_blocking(x.shape[-2], x.shape[-1], _stack(x.shape)):
        out = np.empty(x.shape, dtype=x.dtype)  # (..., S)
        _for_row_blocks(out, lambda block: _softmax_rows(x[block], out[block]))
        return out
    # The plain version: the same four steps on the whole array at once.
    shifted = x - np.max(x, axis=axis, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= np.sum(shifted, axis=axis, keepdims=True)
    return shifted


def _softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    """Write the softmax of each row of ``x`` (..., S) into ``out`` (..., S), with no temporary."""
    row_max = np.max(x, axis=-1, keepdims=True)  # (..., 1)
    np.subtract(x, row_max, out=out)  # (..., S)
    np.exp(out, out=out)
    out /= np.sum(out, axis=-1, keepdims=True)


def _stack(shape: tuple[int, ...]) -> int:
    """How many (L, S) matrices an array of ``shape`` (..., L, S) holds."""
    return math.prod(shape[:-2])


def _for_row_blocks(out: np.ndarray, work: Callable[[tuple[int | slice, ...]], None]) -> None:
    """Run ``work(block)`` on threads for every block index ``block`` = (*batch index, row slice).

    ``out`` (..., L, S) is the array the work fills: its shape and item size set the blocks.
    """
    rows = rows_per_block(out.shape[-2], out.shape[-1] * out.itemsize, _stack(out.shape))
    blocks = [(*index, row_slice) for index, row_slice in row_blocks(out.shape[:-2], out.shape[-2], rows)]
    run_blocks(work, blocks)


def attention_entropy(weights: np.ndarray) -> np.ndarray:
    """H(w) = -sum_j w_j log w_j over the last axis, in nats (0 log 0 taken as 0).

    weights (..., S) -> (...). Uniform weights over S keys give log S; one-hot weights give 0.
    """
    w = np.asarray(weights, dtype=float)  # (..., S)
    logs = np.log(np.where(w > 0, w, 1.0))  # (..., S), log 1 = 0 where w = 0
    return -np.sum(w * logs, axis=-1)  # (...)


def attention_scores(query: np.ndarray, key: np.ndarray, *, scale: float | None = None) -> np.ndarray:
    """Scaled compatibility scores ``query @ key^T * scale``.

    query (..., L, d_k), key (..., S, d_k) -> (..., L, S); ``scale`` defaults to 1/sqrt(d_k).
    """
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    d_q, d_k = query.shape[-1], key.shape[-1]
    if d_q != d_k:
        raise ValueError(
            f"query width d_q={d_q} does not match key width d_k={d_k}: a score is a dot "
            "product of a query with a key, so their widths must agree (the value width is free)"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    scores = np.matmul(query, np.swapaxes(key, -1, -2))  # (..., L, S)
    scores *= scale
    return scores


def masked_softmax(scores: np.ndarray, allowed: np.ndarray, *, fully_masked: str = "zeros") -> np.ndarray:
    """Softmax over the last axis with disallowed keys excluded *before* normalisation.

    scores (..., S); allowed boolean, broadcastable to scores, True = may be attended to.
    Allowed weights: exp(s - m) / sum over allowed exp(s - m), m the row's allowed maximum;
    disallowed weights are exactly zero. A row with no allowed key follows ``fully_masked``:
    "zeros" (all-zero weights), "nan" (all NaN) or "raise" (ValueError).
    Large inputs are done in row blocks on several threads, with the same steps on every row.
    """
    check_policy(fully_masked)
    scores = as_float_array(scores, "scores")
    allowed = as_allowed_mask(allowed, "allowed")
    shape = broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    if fully_masked == "raise":
        _refuse_empty_rows(allowed, shape)
    scores, allowed = np.broadcast_to(scores, shape), np.broadcast_to(allowed, shape)
    weights = np.empty(shape, dtype=scores.dtype)  # (..., S)
    if len(shape) >= 2 and worth_blocking(shape[-2], shape[-1], _stack(shape)):
        _for_row_blocks(
            weights,
            lambda block: _masked_softmax_rows(scores[block], allowed[block], weights[block], fully_masked),
        )
    else:
        _masked_softmax_rows(scores, allowed, weights, fully_masked)
    return weights


def _refuse_empty_rows(allowed: np.ndarray, shape: tuple[int, ...]) -> None:
    """Raise if some row of ``allowed`` broadcast to ``shape`` (..., S) has no allowed key."""
    empty = np.broadcast_to(~np.any(allowed, axis=-1, keepdims=True), shape[:-1] + (1,))  # (..., 1)
    if np.any(empty):
        rows = int(np.count_nonzero(empty))
        raise ValueError(
            f"{rows} row(s) have no allowed key, so softmax over them is not a distribution; "
            "choose fully_masked='zeros' or 'nan', or fix the mask"
        )


def _masked_softmax_rows(scores: np.ndarray, allowed: np.ndarray, out: np.ndarray, fully_masked: str) -> None:
    """Write the masked softmax of each row of ``scores`` (..., S) into ``out`` (..., S).

    ``allowed`` has the shape of ``scores`` (a broadcast view is fine). Rows with no allowed key
    are zeros, or NaN under ``fully_masked="nan"`` ("raise" is checked before any block runs).
    """
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


def _scalar_values(key: np.ndarray, value: np.ndarray) -> bool:
    """True when ``value`` holds one number per key, shape (..., S)."""
    return value.ndim == key.ndim - 1


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    fully_masked: str = "zeros",
) -> AttentionResult:
    """softmax(query @ key^T * scale, over allowed keys) @ value.

    query (..., L, d_k) or a single query (d_k,); key (..., S, d_k); value (..., S, d_v) or
    (..., S) for scalar values; mask boolean, broadcastable to (..., L, S), True = allowed.
    Returns output (..., L, d_v), weights and scores (..., L, S).
    """
    check_policy(fully_masked)
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    value = as_float_array(value, "value")
    if key.ndim < 2:
        raise ValueError(f"key must have shape (..., S, d_k), got {key.shape}")
    single_query = query.ndim == 1
    if single_query:
        query = query[None, :]  # (1, d_k)
    scalar_values = _scalar_values(key, value)
    if scalar_values:
        value = value[..., None]  # (..., S, 1)
    if value.ndim < 2 or value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"key has S={key.shape[-2]} positions (shape {key.shape}) but value has shape "
            f"{value.shape}: each key needs exactly one value"
        )
    batch = _blocked_batch(query, key, value, mask)
    if batch is not None:  # large inputs: the same three steps, one block of query rows at a time
        scores, weights, output = _attend_in_blocks(query, key, value, mask, scale, fully_masked, batch)
    else:  # the plain version: three whole-array steps
        scores = attention_scores(query, key, scale=scale)  # (..., L, S)
        if mask is None:
            weights = softmax(scores)
        else:
            weights = masked_softmax(scores, mask, fully_masked=fully_masked)
        output = np.matmul(weights, value)  # (..., L, d_v)
    if scalar_values:
        output = output[..., 0]  # (..., L)
    if single_query:  # drop the length-1 query axis again
        output = output[..., 0] if scalar_values else output[..., 0, :]  # (...,) or (..., d_v)
        weights, scores = weights[..., 0, :], scores[..., 0, :]  # (..., S)
    return AttentionResult(output=output, weights=weights, scores=scores)


def _blocked_batch(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None
) -> tuple[int, ...] | None:
    """The batch shape (...) all inputs share when attention can run in row blocks, else None.

    None sends a call down the plain path: small inputs, and unusual ones (widths that disagree,
    a non-boolean mask, a mask or value that adds batch axes), whose errors the plain code raises.
    """
    n_q, n_k = query.shape[-2], key.shape[-2]
    if query.shape[-1] != key.shape[-1] or (mask is not None and np.asarray(mask).dtype != bool):
        return None
    try:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2])
        if not worth_blocking(n_q, n_k, math.prod(batch)):
            return None
        scores_shape = batch + (n_q, n_k)
        mask_fits = mask is None or np.broadcast_shapes(scores_shape, np.shape(mask)) == scores_shape
        value_fits = np.broadcast_shapes(batch, value.shape[:-2]) == batch
    except ValueError:
        return None
    return batch if mask_fits and value_fits else None


def _attend_in_blocks(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    mask: np.ndarray | None,
    scale: float | None,
    fully_masked: str,
    batch: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, weights and output of the plain path, filled one block of query rows at a time.

    Each block goes through scores, softmax and weights @ value while it is still in cache, writing
    straight into the result arrays (no other L x S array is made); blocks run on several threads,
    each calling BLAS on one thread.
    """
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(key.shape[-1]) if scale is None else scale
    query = np.broadcast_to(query, batch + query.shape[-2:])  # (..., L, d_k), a view
    key = np.broadcast_to(key, batch + key.shape[-2:])  # (..., S, d_k)
    value = np.broadcast_to(value, batch + value.shape[-2:])  # (..., S, d_v)
    scores = np.empty(batch + (n_q, n_k), dtype=np.result_type(query, key))  # (..., L, S)
    weights = np.empty_like(scores)  # (..., L, S)
    output = np.empty(batch + (n_q, value.shape[-1]), dtype=np.result_type(weights, value))  # (..., L, d_v)
    allowed = None
    if mask is not None:
        allowed = np.broadcast_to(as_allowed_mask(mask, "allowed"), scores.shape)  # (..., L, S), a view
    overflowed = []  # blocks whose scores hold an inf or NaN

    def attend(block: tuple[int | slice, ...]) -> None:
        index = block[:-1]  # the batch index; block[-1] is the slice of query rows
        s, w = scores[block], weights[block]  # (rows, S) each
        np.matmul(query[block], key[index].T, out=s)
        s *= scale
        if allowed is None:
            _softmax_rows(s, w)
        else:
            if not np.isfinite(np.sum(s)):  # one cheap pass; the plain path refuses such scores
                overflowed.append(block)
            _masked_softmax_rows(s, allowed[block], w, fully_masked)
        np.matmul(w, value[index], out=output[block])  # (rows, d_v)

    _for_row_blocks(scores, attend)
    if overflowed:
        as_float_array(scores, "scores")  # raises, naming the count (unless only the sum overflowed)
    if allowed is not None and fully_masked == "raise":
        _refuse_empty_rows(allowed, scores.shape)
    return scores, weights, output


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(..., n, H * d_head) -> (..., H, n, d_head)."""
    n_heads = check_positive_int(n_heads, "n_heads")
    width = x.shape[-1]
    if width % n_heads:
        raise ValueError(f"width {width} does not split into {n_heads} equal heads")
    x = x.reshape(*x.shape[:-1], n_heads, width // n_heads)  # (..., n, H, d_head)
    return np.swapaxes(x, -2, -3)  # (..., H, n, d_head)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(..., H, n, d_head) -> (..., n, H * d_head), the inverse of :func:`split_heads`."""
    x = np.swapaxes(x, -2, -3)  # (..., n, H, d_head)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


@dataclass(frozen=True)
class MultiHeadParams:
    """Projection matrices of one multi-head attention layer.

    w_q (d_query_in, H*d_head), w_k and w_v (d_kv_in, H*d_head), w_o (H*d_head, d_model).
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    n_heads: int


@dataclass(frozen=True)
class MultiHeadResult:
    """Output of multi-head attention, with each head's weights and outputs kept for inspection."""

    output: np.ndarray  # (..., L, d_model)
    weights: np.ndarray  # (..., H, L, S)
    head_outputs: np.ndarray  # (..., H, L, d_head)


def init_multi_head(
    d_model: int,
    n_heads: int,
    *,
    d_kv_in: int | None = None,
    d_head: int | None = None,
    rng: np.random.Generator | None = None,
) -> MultiHeadParams:
    """Random projections (Glorot-scaled normal) for ``n_heads`` heads of width ``d_head``.

    ``d_kv_in`` is the width of the key/value source (differs from d_model in cross-attention);
    ``d_head`` defaults to d_model // n_heads.
    """
    d_model = check_positive_int(d_model, "d_model")
    n_heads = check_positive_int(n_heads, "n_heads")
    d_kv_in = d_model if d_kv_in is None else check_positive_int(d_kv_in, "d_kv_in")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} does not split into {n_heads} heads; pass d_head")
        d_head = d_model // n_heads
    rng = np.random.default_rng(0) if rng is None else rng
    inner = n_heads * d_head

    def draw(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0.0, math.sqrt(2.0 / (rows + cols)), size=(rows, cols))

    return MultiHeadParams(
        w_q=draw(d_model, inner), w_k=draw(d_kv_in, inner), w_v=draw(d_kv_in, inner),
        w_o=draw(inner, d_model), n_heads=n_heads,
    )


def multi_head_attention(
    x_query: np.ndarray,
    x_kv: np.ndarray | None,
    params: MultiHeadParams,
    *,
    mask: np.ndarray | None = None,
    fully_masked: str = "zeros",
) -> MultiHeadResult:
    """Project, split into heads, attend in each head, merge, project out.

    x_query (..., L, d_query_in); x_kv (..., S, d_kv_in), or None for self-attention (x_kv = x_query);
    mask boolean, broadcastable to (..., H, L, S), True = allowed.
    head_h = attention(x_q W_q^h, x_kv W_k^h, x_kv W_v^h); output = concat_h(head_h) @ W_o.
    """
    x_query = as_float_array(x_query, "x_query")
    x_kv = x_query if x_kv is None else as_float_array(x_kv, "x_kv")
    for name, x, w in (("x_query", x_query, params.w_q), ("x_kv", x_kv, params.w_k)):
        if x.shape[-1] != w.shape[0]:
            raise ValueError(
                f"{name} has width {x.shape[-1]} but its projection expects {w.shape[0]}"
            )
    q = split_heads(x_query @ params.w_q, params.n_heads)  # (..., H, L, d_head)
    k = split_heads(x_kv @ params.w_k, params.n_heads)  # (..., H, S, d_head)
    v = split_heads(x_kv @ params.w_v, params.n_heads)  # (..., H, S, d_head)
    result = scaled_dot_product_attention(q, k, v, mask=mask, fully_masked=fully_masked)
    output = merge_heads(result.output) @ params.w_o  # (..., L, d_model)
    return MultiHeadResult(output=output, weights=result.weights, head_outputs=result.output)
