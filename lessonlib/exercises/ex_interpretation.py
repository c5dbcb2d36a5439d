"""Exercise of 05_interpretation: the effect of excluding each key, next to its weight."""

from __future__ import annotations

import math

import numpy as np

from lessonlib.exercises.spec import ArrayOutput, Case, DiagnosisSpec, Exercise, matches_model, numbered

NOTEBOOK = "05_interpretation.ipynb"


def _weights(query: np.ndarray, keys: np.ndarray, scale: float | None = None) -> np.ndarray:
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = keys @ query * scale  # (S,)
    e = np.exp(s - s.max())
    return e / e.sum()  # (S,)


def exclusion_reference(query: np.ndarray, keys: np.ndarray, values: np.ndarray, *,
                        scale: float | None = None) -> np.ndarray:
    """(S,) |o - o_(-j)|: the output moved when key j alone is excluded before the softmax.

    query (d,), keys (S, d), values (S, d_v). Excluding key j renormalises the rest:
    o - o_(-j) = w_j (v_j - m_(-j)) with m_(-j) the weighted mean of the other values
    (equivalently w_j / (1 - w_j) (v_j - o)).
    """
    w = _weights(query, keys, scale)  # (S,)
    out = w @ values  # (d_v,)
    effects = np.empty(len(w))
    for j in range(len(w)):
        keep = np.arange(len(w)) != j
        rest = _weights(query, keys[keep], scale) @ values[keep]  # (d_v,)
        effects[j] = np.linalg.norm(out - rest)
    return effects


def _not_renormalised(query, keys, values):
    """Weight j set to zero after the softmax (or value j set to zero): o moves by w_j v_j."""
    w = _weights(query, keys)
    return w * np.linalg.norm(values, axis=-1)


def _zeroed_key(query, keys, values):
    """Key vector j set to zero: its score becomes 0, and it still gets weight."""
    out = _weights(query, keys) @ values
    effects = []
    for j in range(len(keys)):
        k = keys.copy()
        k[j] = 0.0
        effects.append(np.linalg.norm(out - _weights(query, k) @ values))
    return np.array(effects)


def exclusion_public() -> list[Case]:
    rng = np.random.default_rng(505)
    # key 0 gets the largest weight, and its value equals the weighted mean of the others: no effect
    q = np.array([2.0, 0.0])
    k = np.array([[1.5, 0.0], [0.0, 1.0], [0.0, -1.0]])
    v = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, -1.0]])
    return numbered([
        Case("", "3 keys: the one with the largest weight has the others' mean as its value", (q, k, v)),
        Case("", "4 keys, d 3, value width 2", (rng.normal(size=3), rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))),
        Case("", "5 keys, d 4, value width 1", (rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 1)))),
        Case("", "2 keys, d 2, value width 3",
             (rng.normal(size=2) * 2, rng.normal(size=(2, 2)), rng.normal(size=(2, 3)))),
    ])


EXCLUSION_HIDDEN = ((3, 2, 1), (5, 4, 2), (7, 3, 3), (4, 6, 4))  # keys, d, value width: every seed draws these


def exclusion_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for s, d, d_v in EXCLUSION_HIDDEN:
        cases.append(Case("", f"random: {s} keys, d {d}, value width {d_v}", (
            rng.normal(size=d) * float(rng.uniform(0.5, 2.5)), rng.normal(size=(s, d)), rng.normal(size=(s, d_v)))))
    return cases


EXCLUSION_EFFECTS = Exercise(
    name="exclusion_effects",
    notebook=NOTEBOOK,
    signature="exclusion_effects(query, keys, values) -> (S,)",
    points=2,
    reference=exclusion_reference,
    output=ArrayOutput("float"),
    public=exclusion_public,
    hidden=exclusion_hidden,
    diagnoses=(
        DiagnosisSpec(
            "effects_are_weights", "Weights returned instead of effects",
            "The answer returns the attention weights: the question is how far the output moves when a "
            "key is excluded, which depends on the key's value as well as its weight.",
            "For each key j: exclude it before the softmax, recompute the output, and return "
            "np.linalg.norm(output - output_without_j).",
            "exclusion", matches_model(lambda q, k, v: _weights(q, k)),
        ),
        DiagnosisSpec(
            "exclusion_not_renormalised", "Excluded after the softmax, without renormalising",
            "The answer removes key j after the softmax (its weight, or its value vector, set to zero), "
            "so the output moves by exactly w_j times the norm of v_j and the remaining weights sum to "
            "1 - w_j. That is the lesson's error of zeroing probabilities after the softmax. Excluding a "
            "key renormalises the others: the output moves by w_j (m - v_j) (new minus old), with m the "
            "weighted mean of the other values.",
            "Exclude key j before the softmax: drop its score (or set it to -inf), take the softmax of "
            "the rest, and recompute the output.",
            "zeroed-after", matches_model(_not_renormalised),
        ),
        DiagnosisSpec(
            "exclusion_zeroed_key", "The key vector set to zero",
            "The answer sets key j to zero: its score becomes 0, not -inf, and exp(0) = 1 still gives it "
            "weight. A zero key is a different key, not an excluded one.",
            "Remove the key from the softmax: drop its score, or set the score to -inf.",
            "times-mask", matches_model(_zeroed_key),
        ),
        DiagnosisSpec(
            "exclusion_missing_scale", "No 1/sqrt(d) scaling",
            "The effects match attention on unscaled scores q.k.",
            "Scale the scores by 1/sqrt(d), d the width of the query and keys.",
            "scaling", matches_model(lambda q, k, v: exclusion_reference(q, k, v, scale=1.0)),
        ),
    ),
    stub_hint="for each key: exclude it before the softmax, recompute the output, measure how far it moved",
)
