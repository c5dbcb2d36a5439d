"""Exercises of 01_scaling: scaled dot-product attention, and the first understanding question."""

from __future__ import annotations

import math

import numpy as np

from lessonlib.attention import scaled_dot_product_attention as _reference_attention
from lessonlib.exercises.spec import (
    ArrayOutput,
    Case,
    DiagnosisSpec,
    Exercise,
    NumberOutput,
    TupleOutput,
    any_of,
    close,
    matches_model,
    numbered,
    overflows_only_on,
    shows,
)

NOTEBOOK = "01_scaling.ipynb"


def reference(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(output, weights) of unmasked scaled dot-product attention."""
    result = _reference_attention(query, key, value)
    return result.output, result.weights


def _attend(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, *, scale: float, axis: int = -1, stable: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Attention with a chosen scale and softmax axis: the engine of every wrong model below."""
    scores = np.matmul(query, np.swapaxes(key, -1, -2)) * scale  # (..., L, S)
    if stable:
        scores = scores - scores.max(axis=axis, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=axis, keepdims=True)  # (..., L, S)
    scalar = value.ndim == key.ndim - 1
    v = value[..., None] if scalar else value  # (..., S, d_v)
    output = np.matmul(weights, v)  # (..., L, d_v)
    return (output[..., 0] if scalar else output), weights


def _value_width(key: np.ndarray, value: np.ndarray) -> int:
    return 1 if value.ndim == key.ndim - 1 else value.shape[-1]


def _no_scale(q, k, v):
    return _attend(q, k, v, scale=1.0)


def _scale_by_dk(q, k, v):
    return _attend(q, k, v, scale=1.0 / k.shape[-1])


def _value_width_models():
    def sqrt_dv(q, k, v):
        d_v = _value_width(k, v)
        return None if d_v in (1, k.shape[-1]) else _attend(q, k, v, scale=1.0 / math.sqrt(d_v))

    def dv(q, k, v):
        d_v = _value_width(k, v)
        return None if d_v in (1, k.shape[-1]) else _attend(q, k, v, scale=1.0 / d_v)

    return sqrt_dv, dv


def _softmax_over_queries(q, k, v):
    return _attend(q, k, v, scale=1.0 / math.sqrt(k.shape[-1]), axis=-2)


def _softmax_over_axis_one(q, k, v):
    """axis=1: the key axis of one (L, S) matrix, the query axis once a batch axis comes first."""
    return _attend(q, k, v, scale=1.0 / math.sqrt(k.shape[-1]), axis=1)


def _weights_transposed(case: Case, got, expected) -> bool:
    w = expected[1]
    flipped = np.swapaxes(w, -1, -2)  # (..., S, L)
    if flipped.shape == w.shape and np.allclose(flipped, w):
        return False  # symmetric weights cannot tell the two apart
    return close(got[1], flipped)


def large_score_inputs(rng: np.random.Generator | None, n_keys: int = 3, d_k: int = 4):
    """One query whose scaled scores are about 800, 799, 798, ...: exp(800) overflows float64."""
    top = 800.0
    targets = top - np.arange(n_keys, dtype=float)  # (S,) wanted scaled scores
    a = 40.0
    query = np.zeros((1, d_k))
    query[0, 0] = a
    key = np.zeros((n_keys, d_k))
    key[:, 0] = targets * math.sqrt(d_k) / a
    if rng is not None:
        key[:, 1:] = rng.normal(size=(n_keys, d_k - 1))
        value = rng.normal(size=(n_keys, 2))
    else:
        value = np.arange(2 * n_keys, dtype=float).reshape(n_keys, 2)
    return query, key, value


def public_cases() -> list[Case]:
    rng = np.random.default_rng(101)
    q2, k2, v2 = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 6))
    q3, k3, v3 = rng.normal(size=(2, 4, 9)), rng.normal(size=(2, 3, 9)), rng.normal(size=(2, 3, 2))
    x4 = rng.normal(size=(4, 4))  # one sequence, projected three ways
    w_q, w_k, w_v = (rng.normal(size=(4, 4)) for _ in range(3))
    return numbered([
        Case("", "the lesson's first fixture: one query, two keys, scalar values 2 and 8",
             (np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, 8.0]))),
        Case("", "3 queries, 5 keys, d_k = 4, value width 6", (q2, k2, v2)),
        Case("", "a batch of 2: 4 queries, 3 keys, d_k = 9, value width 2", (q3, k3, v3)),
        Case("", "self-attention: query, key and value all projected from one sequence of 4 positions",
             (x4 @ w_q, x4 @ w_k, x4 @ w_v)),
        Case("", "large scores (about 800): exp overflows unless the maximum is subtracted first",
             large_score_inputs(None), frozenset({"large-scores"})),
    ])


# (batch, queries, keys, d_k, d_v) of the random hidden cases. Every seed draws these shapes and only
# the numbers differ, so an answer meets the same cases whatever the seed. No d_v is 1, d_k, d_k ** 2 or
# sqrt(d_k): a scale taken from the value width differs from 1/sqrt(d_k) and from 1/d_k on each of them.
HIDDEN_SHAPES = (((), 3, 5, 6, 3), ((2,), 4, 2, 3, 5), ((2, 3), 1, 4, 5, 7), ((3,), 5, 6, 8, 2))
HIDDEN_SCALAR = (3, 5, 3)  # queries, keys, d_k with one number per key: 5 keys, not d_k ** 2
HIDDEN_LARGE_KEYS = 4


def hidden_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for batch, n_q, n_k, d_k, d_v in HIDDEN_SHAPES:
        spread = float(rng.uniform(0.5, 3.0))
        cases.append(Case("", f"random: batch {batch}, {n_q} queries, {n_k} keys, d_k {d_k}, d_v {d_v}", (
            rng.normal(size=batch + (n_q, d_k)) * spread,
            rng.normal(size=batch + (n_k, d_k)) * spread,
            rng.normal(size=batch + (n_k, d_v)),
        )))
    n_q, n_k, d_k = HIDDEN_SCALAR
    cases.append(Case("", f"random, scalar values: {n_q} queries, {n_k} keys, d_k {d_k}", (
        rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k,)),
    )))
    cases.append(Case("", "large scores (about 800)", large_score_inputs(rng, HIDDEN_LARGE_KEYS),
                      frozenset({"large-scores"})))
    return cases


DIAGNOSES = (
    DiagnosisSpec(
        "missing_scale", "No 1/sqrt(d_k) scaling",
        "The weights are those of the raw dot products q.k: the scores were never divided by sqrt(d_k).",
        "Multiply the scores by 1/sqrt(d_k), where d_k is the last axis of key (the query/key width).",
        "scaling", matches_model(_no_scale),
    ),
    DiagnosisSpec(
        "scaled_by_d_k", "Divided by d_k instead of sqrt(d_k)",
        "The weights match scores divided by d_k itself: too flat whenever d_k > 1.",
        "The scale is 1/sqrt(d_k): it keeps the scores' variance near one when q and k have "
        "unit-variance entries. Use math.sqrt(d_k) or d_k ** 0.5.",
        "scaling", matches_model(_scale_by_dk),
    ),
    DiagnosisSpec(
        "scaled_by_value_width", "Scaled by the value width",
        "The weights match scores scaled with the width of value (d_v), not of key (d_k).",
        "d_k is key.shape[-1]. The value width is free and plays no part in the scores.",
        "scaling", matches_model(*_value_width_models()),
    ),
    DiagnosisSpec(
        "softmax_over_queries", "Softmax over the query axis",
        "Each column of weights sums to one instead of each row: the softmax ran over the queries "
        "(axis -2), so a query's weights are not a distribution over keys. With axis=1 this happens "
        "only once a batch axis comes first: axis 1 is the key axis of an (L, S) matrix, the query "
        "axis of a (B, L, S) one.",
        "Normalise over the keys, the last axis: axis=-1 with keepdims=True.",
        "fixture", matches_model(_softmax_over_queries, _softmax_over_axis_one),
    ),
    DiagnosisSpec(
        "no_max_subtraction", "Softmax without subtracting the maximum",
        "On large scores the answer returns NaN or inf: exp(800) overflows, and inf / inf is NaN.",
        "Subtract each row's maximum score before exp: softmax does not change when a constant is "
        "added to every score of a row, and the largest exponent becomes exp(0) = 1.",
        "shift-invariance", overflows_only_on("large-scores"),
    ),
    DiagnosisSpec(
        "weights_transposed", "Weights returned transposed",
        "The weights returned are the expected ones with the last two axes swapped: (S, L) instead of (L, S).",
        "Row i of weights belongs to query i and has one entry per key: shape (..., L, S).",
        "fixture", shows(_weights_transposed),
    ),
)

SCALED_DOT_PRODUCT_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    notebook=NOTEBOOK,
    signature="scaled_dot_product_attention(query, key, value) -> (output, weights)",
    points=3,
    reference=reference,
    output=TupleOutput(("output", "weights"), (ArrayOutput(), ArrayOutput())),
    public=public_cases,
    hidden=hidden_cases,
    diagnoses=DIAGNOSES,
    stub_hint="scaled scores, a softmax over the keys, then a weighted sum of the values",
)


def q1_reference() -> float:
    """Two allowed keys with equal scores get weight 1/2 each: 0.5 * 2 + 0.5 * 6 (the masked key: 0)."""
    return 4.0


Q1_CONTEXT = Exercise(
    name="q1_context",
    notebook=NOTEBOOK,
    signature="q1_context = <a number>",
    points=1,
    reference=q1_reference,
    output=NumberOutput(reveal=False),
    public=lambda: numbered([Case("", "equal scores, values 2 and 6, a third key masked", (), call=False)]),
    hidden=None,
    diagnoses=(
        DiagnosisSpec(
            "q1_weights_not_normalised", "Weights not normalised",
            "The answer adds the values with weight one each; softmax weights sum to one.",
            "Equal scores give equal weights, and the weights of a row sum to one.",
            "convex", matches_model(lambda: 8.0),
        ),
        DiagnosisSpec(
            "q1_weight_not_context", "A weight instead of the context",
            "The answer is the weight of one key; the context is the weighted sum of the values.",
            "Multiply each value by its weight and add them up.",
            "convex", matches_model(lambda: 0.5),
        ),
        DiagnosisSpec(
            "q1_masked_key_included", "The masked key counted in",
            "The answer gives all three keys weight 1/3, the masked one included: (2 + 6 + 0) / 3. A "
            "masked key is removed before the softmax and contributes nothing, whatever its score or "
            "value.",
            "Only the two allowed keys share the weight: 1/2 each.",
            "second-fixture", matches_model(lambda: 8.0 / 3.0),
        ),
        DiagnosisSpec(
            "q1_larger_value_wins", "The larger value taken whole",
            "The answer is the larger of the two values, as if the key with the larger value got all "
            "the weight. The weights come from the scores, not from the values: equal scores give equal "
            "weights, whatever the values are, and the output is a weighted average of the values.",
            "Find the weights first (equal scores, two allowed keys: 1/2 each), then average the values "
            "with them.",
            "convex", matches_model(lambda: 6.0),
        ),
    ),
    stub_hint="a number",
    kind="value",
)


# --- heads_by_slices: multi-head attention as separate heads on column slices --------------------


def _softmax_last(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _heads(x, w_q, w_k, w_v, w_o, n_heads, *, columns="blocks", scale_width="head", project=True):
    """Multi-head self-attention with one chosen slip: how the columns are split, the scale, W_o."""
    width = w_q.shape[1]
    d_head = width // n_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, H * d_head) each
    if columns == "none":
        groups = [np.arange(width)]
    elif columns == "strided":
        groups = [np.arange(h, width, n_heads) for h in range(n_heads)]  # every H-th column
    else:
        groups = [np.arange(h * d_head, (h + 1) * d_head) for h in range(n_heads)]
    outs = []
    for cols in groups:
        d = {"head": len(cols), "model": width, "none": 1}[scale_width]
        w = _softmax_last(q[:, cols] @ k[:, cols].T / math.sqrt(d))  # (n, n)
        outs.append(w @ v[:, cols])  # (n, d_head)
    concat = np.concatenate(outs, axis=-1)  # (n, H * d_head), columns back in the order of the groups
    if columns == "strided":
        concat = concat[:, np.argsort(np.concatenate(groups))]
    return concat @ w_o if project else concat


def heads_reference(x, w_q, w_k, w_v, w_o, n_heads):
    """(n, d_model) multi-head self-attention: head h uses columns h*d_head .. (h+1)*d_head - 1."""
    from lessonlib.attention import MultiHeadParams, multi_head_attention

    return multi_head_attention(x, None, MultiHeadParams(w_q, w_k, w_v, w_o, n_heads)).output


def _heads_case(rng: np.random.Generator, n: int, d_model: int, n_heads: int, d_head: int, text: str = "") -> Case:
    width = n_heads * d_head
    x = rng.normal(size=(n, d_model))
    ws = [rng.normal(size=(d_model, width)) * 0.7 for _ in range(3)]
    w_o = rng.normal(size=(width, d_model)) / math.sqrt(width)
    return Case("", f"{n} tokens, d_model {d_model}, {n_heads} heads of width {d_head}{text}",
                (x, *ws, w_o, n_heads))


def heads_public() -> list[Case]:
    rng = np.random.default_rng(103)
    return numbered([
        _heads_case(rng, 3, 4, 2, 2),
        _heads_case(rng, 5, 6, 3, 2),
        _heads_case(rng, 4, 8, 2, 4, " (W_o maps 8 columns back to 8)"),
        _heads_case(rng, 6, 5, 4, 3, " (the heads are wider in total than d_model)"),
    ])


HEADS_HIDDEN = ((4, 6, 2, 3), (7, 8, 4, 2), (5, 4, 2, 4))  # n, d_model, H, d_head


def heads_hidden(rng: np.random.Generator) -> list[Case]:
    return [_heads_case(rng, n, d, h, dh) for n, d, h, dh in HEADS_HIDDEN]


HEADS_BY_SLICES = Exercise(
    name="heads_by_slices",
    notebook=NOTEBOOK,
    signature="heads_by_slices(x, w_q, w_k, w_v, w_o, n_heads) -> (n, d_model)",
    points=2,
    reference=heads_reference,
    output=ArrayOutput("float"),
    public=heads_public,
    hidden=heads_hidden,
    diagnoses=(
        DiagnosisSpec(
            "heads_not_split", "One head over every column",
            "The output is that of a single head that uses all H * d_head columns at once: the "
            "columns were never split into heads. One head mixes every subspace in one softmax; H "
            "heads each take their own softmax over their own d_head columns.",
            "Head h takes columns h * d_head to (h + 1) * d_head - 1 of Q, K and V, with "
            "d_head = w_q.shape[1] // n_heads; attend within each head, then concatenate.",
            "multi-head", matches_model(lambda *a: _heads(*a, columns="none", scale_width="model")),
        ),
        DiagnosisSpec(
            "heads_split_strided", "Heads taken as every H-th column",
            "Each head took every n_heads-th column (h, h + H, h + 2H, ...) instead of a block of "
            "d_head neighbouring columns. That is what reshaping to (n, d_head, H) instead of "
            "(n, H, d_head) does: the columns of one head are interleaved with the others'.",
            "Reshape Q to (n, n_heads, d_head), so that head h holds columns h * d_head .. "
            "(h + 1) * d_head - 1; or slice those columns directly.",
            "multi-head", matches_model(lambda *a: _heads(*a, columns="strided")),
        ),
        DiagnosisSpec(
            "heads_scaled_by_width", "Each head scaled by the full width",
            "Each head's scores are divided by sqrt(H * d_head), the width of all heads together, "
            "not by sqrt(d_head): a head's dot product sums d_head products, so its softmax is too flat.",
            "Inside head h, divide the scores by sqrt(d_head), d_head = w_q.shape[1] // n_heads.",
            "scaling", matches_model(lambda *a: _heads(*a, scale_width="model")),
        ),
        DiagnosisSpec(
            "heads_unscaled", "No 1/sqrt(d_head) in the heads",
            "Each head's weights are those of the raw dot products: the scores were never scaled.",
            "Divide each head's scores by sqrt(d_head) before the softmax.",
            "scaling", matches_model(lambda *a: _heads(*a, scale_width="none")),
        ),
        DiagnosisSpec(
            "output_projection_missing", "No output projection",
            "The answer returns the concatenated heads, (n, H * d_head): W_o, which mixes the heads "
            "and maps them back to d_model, is missing.",
            "Multiply the concatenation by w_o: concat(heads) @ w_o has shape (n, d_model).",
            "multi-head",
            any_of(matches_model(lambda *a: _heads(*a, project=False)),
                   shows(lambda case, got, expected: got.shape == (expected.shape[0], case.args[1].shape[1])
                         and got.shape != expected.shape)),
        ),
    ),
    stub_hint="split the columns of Q, K and V into n_heads blocks, attend in each, concatenate, then @ w_o",
)


# --- saturated_share: how many queries put nearly all their weight on one key ------------------------


def _max_weights(query: np.ndarray, key: np.ndarray, scale: float | None = None, axis: int = -1) -> np.ndarray:
    scale = 1.0 / math.sqrt(key.shape[-1]) if scale is None else scale
    s = query @ key.T * scale  # (L, S)
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    w = e / e.sum(axis=axis, keepdims=True)
    return w.max(axis=-1)  # (L,)


def saturated_reference(query: np.ndarray, key: np.ndarray, threshold: float) -> float:
    """Share of queries whose largest scaled-softmax weight is at least ``threshold``."""
    return float(np.mean(_max_weights(query, key) >= threshold))


def _saturation_case(rng: np.random.Generator, n_q: int, n_k: int, d_k: int, spread: float, threshold: float) -> Case:
    query = rng.normal(size=(n_q, d_k)) * spread
    key = rng.normal(size=(n_k, d_k)) * spread
    return Case("", f"{n_q} queries, {n_k} keys, d_k {d_k}, entries of size about {spread:g}, threshold {threshold:g}",
                (query, key, float(threshold)))


def _saturation_cases(rng: np.random.Generator, shapes, *, separate: bool = True) -> list[Case]:
    """Cases drawn until no largest weight sits within 1e-3 of the threshold and (``separate``)
    every wrong idea below gives another number than the right one: the same score on every seed."""
    cases = []
    for n_q, n_k, d_k, spread, threshold in shapes:
        for _ in range(500):
            case = _saturation_case(rng, n_q, n_k, d_k, spread, threshold)
            q, k, t = case.args
            tops = [_max_weights(q, k, scale=s) for s in (None, 1.0)] + [_max_weights(q, k, axis=0)]
            if any(np.abs(m - t).min() <= 1e-3 for m in tops):
                continue
            right = saturated_reference(q, k, t)
            if not separate or all(not close(model(q, k, t), right) for model in _saturation_models()):
                break
        cases.append(case)
    return cases


def saturated_public() -> list[Case]:
    rng = np.random.default_rng(104)
    return numbered(_saturation_cases(rng, ((24, 5, 16, 1.5, 0.9), (30, 6, 64, 1.0, 0.95), (20, 4, 4, 2.0, 0.8)),
                                      separate=False))


SATURATION_HIDDEN = ((40, 8, 32, 1.3, 0.9), (28, 5, 128, 1.1, 0.95), (36, 6, 8, 1.8, 0.85))


def saturated_hidden(rng: np.random.Generator) -> list[Case]:
    return _saturation_cases(rng, SATURATION_HIDDEN)


def _saturation_models():
    def unscaled(query, key, threshold):
        return float(np.mean(_max_weights(query, key, scale=1.0) >= threshold))

    def over_queries(query, key, threshold):
        return float(np.mean(_max_weights(query, key, axis=0) >= threshold))

    def count(query, key, threshold):
        return int(np.sum(_max_weights(query, key) >= threshold))

    def mean_max(query, key, threshold):
        return float(np.mean(_max_weights(query, key)))

    return unscaled, over_queries, count, mean_max


_UNSCALED, _OVER_QUERIES, _COUNT, _MEAN_MAX = _saturation_models()

SATURATED_SHARE = Exercise(
    name="saturated_share",
    notebook=NOTEBOOK,
    signature="saturated_share(query, key, threshold) -> float",
    points=1,
    reference=saturated_reference,
    output=NumberOutput(),
    public=saturated_public,
    hidden=saturated_hidden,
    diagnoses=(
        DiagnosisSpec(
            "saturation_unscaled", "Measured on unscaled scores",
            "The share is the one of the raw dot products q.k, before dividing by sqrt(d_k): it measures "
            "the saturation attention would have without its scaling, which grows with d_k.",
            "Divide the scores by sqrt(d_k) (d_k = key.shape[-1]) before the softmax, as attention does.",
            "scaling", matches_model(_UNSCALED),
        ),
        DiagnosisSpec(
            "saturation_over_queries", "Softmax over the queries",
            "The weights were normalised down each column (over the queries), so a query's weights are "
            "not a distribution over the keys.",
            "Take the softmax of each row (axis=-1), then the largest weight of each row.",
            "fixture", matches_model(_OVER_QUERIES),
        ),
        DiagnosisSpec(
            "saturation_count", "A count instead of a share",
            "The answer is how many queries are saturated, not which share of them: a count grows with "
            "the number of queries and cannot be compared between two inputs.",
            "Divide by the number of queries: np.mean(max_weights >= threshold).",
            "scaling", matches_model(_COUNT),
        ),
        DiagnosisSpec(
            "saturation_mean_weight", "The mean largest weight, not a share",
            "The answer is the average of the largest weights; the question is which share of the "
            "queries reach the threshold.",
            "Compare each query's largest weight with the threshold, then take the mean of those True/False values.",
            "scaling", matches_model(_MEAN_MAX),
        ),
    ),
    stub_hint="the softmax of each row of q.k / sqrt(d_k), its largest weight, and the share at or above threshold",
)
