"""Scaled dot-product and multi-head attention in NumPy.

    scores  = query @ key^T * scale            (..., L, S), scale = 1/sqrt(d_k) by default
    weights = softmax over allowed keys         (..., L, S), each row sums to one
    output  = weights @ value                   (..., L, d_v)

Masks are boolean and mean *allowed*: True = this key may be attended to.

This is the reference: each function is its formula in a few NumPy lines, on whole arrays.
:mod:`lessonlib.fast` computes the same results with threads and in-place buffers, when asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lessonlib._checks import (
    FullyMasked,
    as_allowed_mask,
    as_float_array,
    attention_inputs,
    broadcast_shape,
    check_policy,
    check_positive_int,
    check_widths,
    refuse_empty_rows,
)


@dataclass(frozen=True)
class AttentionResult:
    """What one attention call computed: the output and the arrays a reader wants to inspect."""

    output: np.ndarray  # (..., L, d_v), or (..., L) for scalar values
    weights: np.ndarray  # (..., L, S)
    scores: np.ndarray  # (..., L, S), scaled, before masking


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax: exp(x - max) / sum(exp(x - max)) along ``axis``.

    Subtracting the row maximum changes nothing mathematically (it cancels in the ratio) and
    keeps exp from overflowing: the largest term becomes exp(0) = 1.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    shifted = x - np.max(x, axis=axis, keepdims=True)  # (..., S), largest entry 0
    exps = np.exp(shifted)  # (..., S), in (0, 1]
    return exps / np.sum(exps, axis=axis, keepdims=True)  # (..., S), rows sum to 1


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
    check_widths(query, key)
    if scale is None:
        scale = 1.0 / math.sqrt(key.shape[-1])
    return (query @ np.swapaxes(key, -1, -2)) * scale  # (..., L, S)


def masked_softmax(
    scores: np.ndarray, allowed: np.ndarray, *, fully_masked: FullyMasked = "zeros"
) -> np.ndarray:
    """Softmax over the last axis with disallowed keys excluded *before* normalisation.

    scores (..., S); allowed boolean, broadcastable to scores, True = may be attended to.
    Allowed weights: exp(s - m) / sum over allowed exp(s - m), m the row's allowed maximum;
    disallowed weights are exactly zero. A row with no allowed key follows ``fully_masked``:
    "zeros" (all-zero weights), "nan" (all NaN) or "raise" (ValueError).
    """
    check_policy(fully_masked)
    scores = as_float_array(scores, "scores")
    allowed = as_allowed_mask(allowed, "allowed")
    broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    if fully_masked == "raise":
        refuse_empty_rows(allowed)
    kept = np.where(allowed, scores, -np.inf)  # (..., S): allowed scores, -inf elsewhere
    row_max = np.max(kept, axis=-1, keepdims=True)  # (..., 1), -inf on a row with nothing allowed
    empty = np.isneginf(row_max)  # (..., 1)
    exps = np.exp(kept - np.where(empty, 0.0, row_max))  # (..., S), exp(-inf) = 0 where disallowed
    total = np.sum(exps, axis=-1, keepdims=True)  # (..., 1), >= 1 on rows with an allowed key
    weights = exps / np.where(empty, 1.0, total)  # (..., S); an empty row stays all zeros
    if fully_masked == "nan":
        weights = np.where(empty, np.nan, weights)  # (..., S)
    return weights


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    fully_masked: FullyMasked = "zeros",
) -> AttentionResult:
    """softmax(query @ key^T * scale, over allowed keys) @ value.

    query (..., L, d_k) or a single query (d_k,); key (..., S, d_k); value (..., S, d_v) or
    (..., S) for scalar values; mask boolean, broadcastable to (..., L, S), True = allowed.
    Returns output (..., L, d_v), weights and scores (..., L, S).
    """
    check_policy(fully_masked)
    inputs = attention_inputs(query, key, value)  # query (..., L, d_k), value (..., S, d_v)
    scores = attention_scores(inputs.query, inputs.key, scale=scale)  # (..., L, S)
    if mask is None:
        weights = softmax(scores)  # (..., L, S)
    else:
        weights = masked_softmax(scores, mask, fully_masked=fully_masked)  # (..., L, S)
    output = weights @ inputs.value  # (..., L, d_v)
    return AttentionResult(*inputs.restore(output, weights, scores))


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
    """Output of multi-head attention, with each head's scores, weights and outputs kept for inspection.

    The fields shared with :class:`AttentionResult` carry the same quantities, with a head axis.
    """

    output: np.ndarray  # (..., L, d_model)
    weights: np.ndarray  # (..., H, L, S)
    scores: np.ndarray  # (..., H, L, S), scaled, before masking
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
    fully_masked: FullyMasked = "zeros",
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
    return MultiHeadResult(output=output, weights=result.weights, scores=result.scores, head_outputs=result.output)
