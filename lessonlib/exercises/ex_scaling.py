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
