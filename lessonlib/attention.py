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
    array_bytes,
    as_allowed_mask,
    as_float_array,
    as_numeric_array,
    attention_inputs,
    broadcast_shape,
    check_axis,
    check_mask_reading,
    check_ndim,
    check_policy,
    check_positive_int,
    check_rng,
    check_scale,
    check_widths,
    overflow_message,
    refuse_dense_scores,
    refuse_empty_rows,
    refuse_oversized,
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

    An entry of -inf gets weight exactly 0 (exp(-inf) = 0), so a row that holds only -inf is
    0/0 = NaN, as in torch and JAX (:func:`masked_softmax` has a policy for such rows). NaN and
    +inf have no meaningful weight and are refused.
    """
    x = as_float_array(x, "x", finite=False)
    check_ndim(x, "x", 1, "(..., S)")
    axis = check_axis(axis, x.ndim)
    total = float(np.sum(x))  # NaN or +inf exactly when some entry is NaN or +inf (or finite ones overflow)
    bad = 0 if math.isfinite(total) or total == -math.inf else (
        np.count_nonzero(np.isnan(x)) + np.count_nonzero(x == np.inf))  # one boolean scan at a time
    if bad:
        raise ValueError(f"x has {bad} NaN or +inf entr{'y' if bad == 1 else 'ies'}, which no softmax weight can "
                         "represent (-inf is allowed: it gets weight 0)")
    refuse_oversized(array_bytes(x.shape, x.dtype, 3), f"softmax of x with shape {x.shape} (3 arrays of its size)",
                     "Apply it to fewer rows at a time.")
    return _softmax(x, axis)


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The formula of :func:`softmax`, for arrays already checked."""
    shifted = x - np.max(x, axis=axis, keepdims=True)  # (..., S), largest entry 0
    exps = np.exp(shifted)  # (..., S), in (0, 1]
    return exps / np.sum(exps, axis=axis, keepdims=True)  # (..., S), rows sum to 1


def attention_entropy(weights: np.ndarray) -> np.ndarray:
    """H(w) = -sum_j w_j log w_j over the last axis, in nats (0 log 0 taken as 0).

    weights (..., S) -> (...). Uniform weights over S keys give log S; one-hot weights give 0.
    Each row must be a distribution: entries in [0, 1] summing to one (to sqrt of the dtype's
    precision). An all-zero row, what a row with no allowed key becomes under
    ``fully_masked="zeros"``, is accepted and has entropy 0.
    """
    w = as_float_array(weights, "weights")  # (..., S)
    check_ndim(w, "weights", 1, "(..., S)")
    negative = int(np.count_nonzero(w < 0))
    if negative:
        raise ValueError(f"weights has {negative} negative entr{'y' if negative == 1 else 'ies'}: attention "
                         "weights are probabilities, each in [0, 1]")
    sums = np.sum(w, axis=-1)  # (...)
    tolerance = math.sqrt(np.finfo(w.dtype).eps)
    off = (np.abs(sums - 1.0) > tolerance) & np.any(w, axis=-1)  # (...), all-zero rows allowed
    if np.any(off):
        raise ValueError(
            f"weights must sum to one along the last axis (each row a distribution over keys), but "
            f"{int(np.count_nonzero(off))} row(s) sum to between {float(sums[off].min()):.6g} and "
            f"{float(sums[off].max()):.6g}; pass the output of softmax or masked_softmax"
        )
    logs = np.log(np.where(w > 0, w, 1.0))  # (..., S), log 1 = 0 where w = 0
    return -np.sum(w * logs, axis=-1)  # (...)


def attention_scores(query: np.ndarray, key: np.ndarray, *, scale: float | None = None) -> np.ndarray:
    """Scaled compatibility scores ``query @ key^T * scale``.

    query (..., L, d_k), key (..., S, d_k) -> (..., L, S); ``scale`` defaults to 1/sqrt(d_k).
    Scores that overflow the dtype (float16 overflows above 65504) are refused.
    """
    scale = check_scale(scale)
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    check_ndim(query, "query", 1, "(..., L, d_k)")
    check_ndim(key, "key", 2, "(..., S, d_k)")
    check_widths(query, key)
    batch = broadcast_shape(query.shape[:-2], key.shape[:-2], "the batch axes of query and key")
    refuse_dense_scores("attention_scores", query.shape, key.shape, batch + query.shape[-2:-1] + key.shape[-2:-1],
                        np.result_type(query, key), 2)
    return _scores(query, key, scale)


def _scores(query: np.ndarray, key: np.ndarray, scale: float | None) -> np.ndarray:
    """The formula of :func:`attention_scores`, for arrays already checked; scores that overflow are refused."""
    if scale is None:
        scale = 1.0 / math.sqrt(key.shape[-1])
    scores = (query @ np.swapaxes(key, -1, -2)) * scale  # (..., L, S)
    if not math.isfinite(float(np.sum(scores))):  # one pass; counted only when something overflowed
        raise ValueError(overflow_message(int(scores.size - np.count_nonzero(np.isfinite(scores))), scores.dtype))
    return scores


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
    check_ndim(scores, "scores", 1, "(..., S)")
    allowed = as_allowed_mask(allowed, "allowed")
    shape = broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    refuse_oversized(array_bytes(shape, scores.dtype, 5),
                     f"masked_softmax of scores {scores.shape} with allowed {allowed.shape} "
                     f"(5 arrays of shape {shape})",
                     "Apply it to fewer rows at a time, or for attention use lessonlib.tiled_attention(..., "
                     "causal=True), which masks without any (L, S) array.")
    if fully_masked == "raise":
        refuse_empty_rows(allowed)
    return _masked_softmax(scores, allowed, fully_masked)


def _masked_softmax(scores: np.ndarray, allowed: np.ndarray, fully_masked: str) -> np.ndarray:
    """The formula of :func:`masked_softmax`, for arrays already checked (a "raise" policy included)."""
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

    A 2-D mask (X, S) with batched inputs is refused when X is both L and the size of the leading
    (batch) axis: it could be an (L, S) mask for every example or a (B, S) key-padding mask (the
    error names both ways to say which). A call whose score matrices would not fit in the
    available memory is refused before it allocates, naming :func:`lessonlib.tiled_attention` and
    ``need_weights=False``.
    """
    check_policy(fully_masked)
    scale = check_scale(scale)
    inputs = attention_inputs(query, key, value)  # query (..., L, d_k), value (..., S, d_v)
    scores_shape = inputs.batch + (inputs.query.shape[-2], inputs.key.shape[-2])  # (..., L, S)
    if mask is not None:
        allowed = as_allowed_mask(mask, "mask")
        broadcast_shape(scores_shape, allowed.shape, "scores (..., L, S) and mask")
        check_mask_reading(allowed.shape, scores_shape)
        if fully_masked == "raise":
            refuse_empty_rows(allowed)
    refuse_dense_scores("scaled_dot_product_attention", np.shape(query), np.shape(key), scores_shape,
                        np.result_type(inputs.query, inputs.key), 5 if mask is None else 6)
    scores = _scores(inputs.query, inputs.key, scale)  # (..., L, S)
    if mask is None:
        weights = _softmax(scores)  # (..., L, S)
    else:
        weights = _masked_softmax(scores, allowed, fully_masked)  # (..., L, S)
    output = weights @ inputs.value  # (..., L, d_v)
    return AttentionResult(*inputs.restore(output, weights, scores))


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(..., n, H * d_head) -> (..., H, n, d_head). Entries are moved, not computed with (NaN moves too)."""
    n_heads = check_positive_int(n_heads, "n_heads")
    x = as_numeric_array(x, "x")
    check_ndim(x, "x", 2, "(..., n, H * d_head)")
    width = x.shape[-1]
    if width % n_heads:
        raise ValueError(f"x: width {width} does not split into {n_heads} equal heads (n_heads={n_heads})")
    x = x.reshape(*x.shape[:-1], n_heads, width // n_heads)  # (..., n, H, d_head)
    return np.swapaxes(x, -2, -3)  # (..., H, n, d_head)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(..., H, n, d_head) -> (..., n, H * d_head), the inverse of :func:`split_heads`."""
    x = as_numeric_array(x, "x")
    check_ndim(x, "x", 3, "(..., H, n, d_head)")
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

    def __post_init__(self) -> None:
        """Refuse projections whose shapes do not fit together, as arrays of finite real numbers."""
        check_positive_int(self.n_heads, "n_heads")
        for name in ("w_q", "w_k", "w_v", "w_o"):
            w = as_float_array(getattr(self, name), name)
            if w.ndim != 2:
                raise ValueError(f"{name} must be a matrix (2-D), got shape {w.shape}")
            object.__setattr__(self, name, w)
        inner = self.w_q.shape[1]
        if (self.w_k.shape[1], self.w_v.shape[1], self.w_o.shape[0]) != (inner, inner, inner):
            raise ValueError(f"w_q {self.w_q.shape}, w_k {self.w_k.shape}, w_v {self.w_v.shape} and w_o "
                             f"{self.w_o.shape} must share the inner width H * d_head: w_q, w_k and w_v as "
                             "columns, w_o as rows")
        if self.w_k.shape[0] != self.w_v.shape[0]:
            raise ValueError(f"w_k {self.w_k.shape} and w_v {self.w_v.shape} project the same key/value source, "
                             "so they need the same number of rows")
        if inner % self.n_heads:
            raise ValueError(f"the inner width {inner} does not split into n_heads={self.n_heads} equal heads")


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
            raise ValueError(f"d_model={d_model} does not split into {n_heads} heads (n_heads={n_heads}); pass d_head")
        d_head = d_model // n_heads
    d_head = check_positive_int(d_head, "d_head")
    rng = np.random.default_rng(0) if rng is None else check_rng(rng)
    inner = n_heads * d_head
    refuse_oversized(array_bytes((max(d_model, d_kv_in), inner), np.float64, 4),
                     f"init_multi_head(d_model={d_model}, n_heads={n_heads}, d_kv_in={d_kv_in}, d_head={d_head}) "
                     "(four projection matrices)", "Choose smaller widths.")

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
    mask boolean, broadcastable to (..., H, L, S), True = allowed; a 2-D mask is (L, S), shared by
    every head and example (refused when a leading batch axis of L entries makes it look like (B, S)
    padding).
    head_h = attention(x_q W_q^h, x_kv W_k^h, x_kv W_v^h); output = concat_h(head_h) @ W_o.
    """
    check_policy(fully_masked)
    if not isinstance(params, MultiHeadParams):
        raise TypeError(f"params must be MultiHeadParams (from init_multi_head), got {type(params).__name__}")
    x_query = as_float_array(x_query, "x_query")
    x_kv = x_query if x_kv is None else as_float_array(x_kv, "x_kv")
    for name, x, w in (("x_query", x_query, params.w_q), ("x_kv", x_kv, params.w_k)):
        check_ndim(x, name, 2, f"(..., n, {w.shape[0]})")
        if x.shape[-1] != w.shape[0]:
            raise ValueError(
                f"{name} has width {x.shape[-1]} but its projection expects {w.shape[0]}"
            )
    batch = broadcast_shape(x_query.shape[:-2], x_kv.shape[:-2], "the batch axes of x_query and x_kv")
    n_q, n_k = x_query.shape[-2], x_kv.shape[-2]
    if mask is not None:
        mask = as_allowed_mask(mask, "mask")
        if mask.ndim == 2:  # (L, S), or a (B, S) padding mask that the batch could be mistaken for
            check_mask_reading(mask.shape, batch + (n_q, n_k))
            mask = mask[None]  # (1, L, S): the same for every head, never read as (H, S)
        broadcast_shape(batch + (params.n_heads, n_q, n_k), mask.shape, "scores (..., H, L, S) and mask")
    refuse_dense_scores("multi_head_attention", x_query.shape, x_kv.shape, batch + (params.n_heads, n_q, n_k),
                        np.result_type(x_query, x_kv), 5 if mask is None else 6, names=("x_query", "x_kv"))
    q = split_heads(x_query @ params.w_q, params.n_heads)  # (..., H, L, d_head)
    k = split_heads(x_kv @ params.w_k, params.n_heads)  # (..., H, S, d_head)
    v = split_heads(x_kv @ params.w_v, params.n_heads)  # (..., H, S, d_head)
    result = scaled_dot_product_attention(q, k, v, mask=mask, fully_masked=fully_masked)
    output = merge_heads(result.output) @ params.w_o  # (..., L, d_model)
    return MultiHeadResult(output=output, weights=result.weights, scores=result.scores, head_outputs=result.output)
