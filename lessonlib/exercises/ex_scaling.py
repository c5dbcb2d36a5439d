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
    fails_only_on,
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


def _softmax_over_axis_zero(q, k, v):
    """axis=0: the query axis of one (L, S) matrix, the batch axis once a batch axis comes first."""
    return _attend(q, k, v, scale=1.0 / math.sqrt(k.shape[-1]), axis=0)


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
        "softmax_over_queries", "Softmax over another axis than the keys",
        "The weights sum to one along another axis than the keys': the softmax ran over the queries "
        "(axis -2), or over a fixed axis number that is the right one only for some shapes. Axis 1 is "
        "the key axis of an (L, S) matrix but the query axis of a (B, L, S) one; axis 0 is the query "
        "axis of an (L, S) matrix but the batch axis of a (B, L, S) one. Either way a query's weights "
        "are not a distribution over the keys.",
        "Normalise over the keys, the last axis: axis=-1 with keepdims=True, whatever the shape.",
        "fixture", matches_model(_softmax_over_queries, _softmax_over_axis_one, _softmax_over_axis_zero),
    ),
    DiagnosisSpec(
        "no_max_subtraction", "Softmax without subtracting the maximum",
        "Only the case with large scores goes wrong: exp(800) overflows to inf, and inf / inf is NaN. "
        "The answer returns NaN or inf there, or the numbers that replaced them (a guard such as "
        "np.nan_to_num hides the overflow, it does not undo it).",
        "Subtract each row's maximum score before exp: softmax does not change when a constant is "
        "added to every score of a row, and the largest exponent becomes exp(0) = 1.",
        "shift-invariance", any_of(overflows_only_on("large-scores"), fails_only_on("large-scores")),
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


# --- heads_by_slices: multi-head attention, every head at once, head h on its block of columns ------


def _heads(x, w_q, w_k, w_v, w_o, n_heads, *, columns="blocks", join=None, scale_width="head", project=True,
           axis=-1):
    """Multi-head self-attention with one chosen slip: how the columns are split (``columns``) and
    put back (``join``, by default where they came from), the scale, W_o, the softmax's axis."""
    width = w_q.shape[1]
    d_head = width // n_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, H * d_head) each
    blocks = [np.arange(h * d_head, (h + 1) * d_head) for h in range(n_heads)]
    strided = [np.arange(h, width, n_heads) for h in range(n_heads)]  # every H-th column
    groups = {"none": [np.arange(width)], "strided": strided, "blocks": blocks}[columns]
    outs = []
    for cols in groups:
        d = {"head": len(cols), "model": width, "none": 1}[scale_width]
        s = q[:, cols] @ k[:, cols].T / math.sqrt(d)  # (n, n)
        e = np.exp(s - s.max(axis=axis, keepdims=True))
        outs.append(e / e.sum(axis=axis, keepdims=True) @ v[:, cols])  # (n, d_head)
    concat = np.empty((x.shape[0], width))  # (n, H * d_head)
    places = groups if join is None else {"blocks": blocks, "strided": strided}[join]
    for out, cols in zip(outs, places):
        concat[:, cols] = out
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
            "heads_split_strided", "Heads split or joined as every H-th column",
            "A head's columns were taken, or put back, as every n_heads-th column (h, h + H, h + 2H, ...) "
            "instead of a block of d_head neighbouring ones. That is what the axes (n, d_head, H) do where "
            "(n, H, d_head) was meant: in the split, the columns of one head are interleaved with the "
            "others'; in the join, each head's outputs land in the other heads' places.",
            "Reshape Q to (n, n_heads, d_head) and transpose to (n_heads, n, d_head); on the way back, "
            "transpose to (n, n_heads, d_head) before reshaping to (n, n_heads * d_head).",
            "multi-head",
            matches_model(lambda *a: _heads(*a, columns="strided"),
                          lambda *a: _heads(*a, columns="strided", join="blocks"),
                          lambda *a: _heads(*a, join="strided")),
        ),
        DiagnosisSpec(
            "heads_softmax_over_queries", "Each head's softmax over the queries",
            "In each head the weights of a key's column sum to one, not those of a query's row: the "
            "softmax ran over axis -2 (or axis 1 of the (H, n, n) scores). A query's weights must be a "
            "distribution over the keys.",
            "Take the softmax over the last axis of the (H, n, n) scores: axis=-1, keepdims=True.",
            "multi-head", matches_model(lambda *a: _heads(*a, axis=0)),
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
    stub_hint="reshape Q, K and V to (n_heads, n, d_head), attend in every head at once, join back, then @ w_o",
)


# --- saturated_share: how many queries the 1/sqrt(d_k) scaling rescues from saturation -----------------


def _max_weights(query: np.ndarray, key: np.ndarray, scale: float | None = None, axis: int = -1) -> np.ndarray:
    """(L,) each query's largest softmax weight over the keys, of q.k times ``scale`` (1/sqrt(d_k) by default)."""
    scale = 1.0 / math.sqrt(key.shape[-1]) if scale is None else scale
    s = query @ key.T * scale  # (L, S)
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    w = e / e.sum(axis=axis, keepdims=True)
    return w.max(axis=-1)  # (L,)


def _rescued(query, key, threshold, *, axis: int = -1, strict: bool = False) -> np.ndarray:
    """(L,) True where the raw largest weight reaches the threshold and the scaled one does not."""
    raw, scaled = _max_weights(query, key, 1.0, axis), _max_weights(query, key, None, axis)
    if strict:  # "more than" where "at least" was asked, in both comparisons
        return (raw > threshold) & ~(scaled > threshold)
    return (raw >= threshold) & (scaled < threshold)


def saturated_reference(query: np.ndarray, key: np.ndarray, threshold: float) -> float:
    """Share of queries whose largest raw-softmax weight is at least ``threshold`` and whose largest
    scaled one (q.k / sqrt(d_k)) is below it."""
    return float(np.mean(_rescued(query, key, threshold)))


def _saturation_case(rng: np.random.Generator, n_q: int, n_k: int, d_k: int, spread: float, threshold: float) -> Case:
    query = rng.normal(size=(n_q, d_k)) * spread
    key = rng.normal(size=(n_k, d_k)) * spread
    return Case("", f"{n_q} queries, {n_k} keys, d_k {d_k}, entries of size about {spread:g}, threshold {threshold:g}",
                (query, key, float(threshold)))


def _saturation_cases(rng: np.random.Generator, shapes, *, separate: bool = True) -> list[Case]:
    """Cases drawn until no largest weight sits within 1e-3 of the threshold and (``separate``)
    every wrong idea below but the strict comparison (which only an exact tie separates, see
    :func:`_exactly_one_hot`) gives another number than the right one: the same score on every seed."""
    cases = []
    for n_q, n_k, d_k, spread, threshold in shapes:
        for _ in range(500):
            case = _saturation_case(rng, n_q, n_k, d_k, spread, threshold)
            q, k, t = case.args
            tops = [_max_weights(q, k, scale=s, axis=a) for s in (None, 1.0) for a in (-1, 0)]
            if any(np.abs(m - t).min() <= 1e-3 for m in tops):
                continue
            right = saturated_reference(q, k, t)
            if not separate or all(not close(model(q, k, t), right) for model in _saturation_models()[:-1]):
                break
        cases.append(case)
    return cases


def _exactly_one_hot(d_k: int = 1024, n_q: int = 6, n_k: int = 5) -> Case:
    """Raw scores whose top beats the rest by 900 or more: exp(-900) is 0, so the raw largest weight
    is exactly 1.0, while the scaled one (a gap of 900 / 32) stays below 1.0. Threshold 1.0."""
    key = np.zeros((n_k, d_k))
    key[np.arange(n_k), np.arange(n_k)] = 30.0  # key j points along axis j
    query = np.zeros((n_q, d_k))
    query[np.arange(n_q), np.arange(n_q) % n_k] = 30.0 + np.arange(n_q)  # raw top score 900 and more
    return Case("", f"{n_q} queries, {n_k} keys, d_k {d_k}: each raw largest weight is exactly 1.0; threshold 1.0",
                (query, key, 1.0), frozenset({"boundary"}))


def saturated_public() -> list[Case]:
    rng = np.random.default_rng(104)
    cases = _saturation_cases(rng, ((24, 5, 16, 1.5, 0.9), (30, 6, 64, 1.0, 0.95), (20, 4, 4, 2.0, 0.8)),
                              separate=False)
    return numbered(cases + [_exactly_one_hot()])


SATURATION_HIDDEN = ((40, 8, 32, 1.8, 0.9), (28, 5, 128, 1.6, 0.95), (36, 6, 16, 2.0, 0.85))


def saturated_hidden(rng: np.random.Generator) -> list[Case]:
    return _saturation_cases(rng, SATURATION_HIDDEN) + [_exactly_one_hot(n_q=8, n_k=6)]


def _saturation_models():
    def raw_only(query, key, threshold):
        return float(np.mean(_max_weights(query, key, scale=1.0) >= threshold))

    def over_queries(query, key, threshold):
        return float(np.mean(_rescued(query, key, threshold, axis=0)))

    def count(query, key, threshold):
        return int(np.sum(_rescued(query, key, threshold)))

    def strict(query, key, threshold):
        return float(np.mean(_rescued(query, key, threshold, strict=True)))

    return raw_only, over_queries, count, strict


_RAW_ONLY, _OVER_QUERIES, _COUNT, _STRICT_MODEL = _saturation_models()

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
            "saturation_unscaled", "Every query saturated without the scaling",
            "The share is that of the queries whose raw largest weight reaches the threshold, whether "
            "or not the scaled one does: the second condition, below the threshold after dividing by "
            "sqrt(d_k), is missing.",
            "Count a query when its raw largest weight is at least the threshold and its scaled one "
            "(scores divided by sqrt(d_k), d_k = key.shape[-1]) is below it.",
            "scaling", matches_model(_RAW_ONLY),
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
            "The answer is how many queries are rescued, not which share of them: a count grows with "
            "the number of queries and cannot be compared between two inputs.",
            "Divide by the number of queries: np.mean(rescued).",
            "scaling", matches_model(_COUNT),
        ),
        DiagnosisSpec(
            "saturation_strict_threshold", "More than the threshold, where at least was asked",
            "Only the case whose raw largest weights are exactly 1.0, with a threshold of 1.0, goes "
            "wrong: the answer compares with > where 'at least' (>=) was asked, so a weight equal to the "
            "threshold does not count as saturated.",
            "At least is >=: raw_largest >= threshold, and below is <: scaled_largest < threshold.",
            "scaling", matches_model(_STRICT_MODEL),
        ),
    ),
    stub_hint="the largest softmax weight of each row, raw and scaled; count raw >= threshold > scaled",
)
