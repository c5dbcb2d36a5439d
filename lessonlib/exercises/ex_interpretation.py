"""Exercise of 05_interpretation: the effect of excluding each key, measured after the output projection."""

from __future__ import annotations

import math

import numpy as np

from lessonlib.exercises.spec import ArrayOutput, Case, DiagnosisSpec, Exercise, matches_model, numbered, shows_on_every

NOTEBOOK = "05_interpretation.ipynb"


def _weights(query: np.ndarray, keys: np.ndarray, scale: float | None = None) -> np.ndarray:
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = keys @ query * scale  # (S,)
    e = np.exp(s - s.max())
    return e / e.sum()  # (S,)


def _moves(query: np.ndarray, keys: np.ndarray, values: np.ndarray, *,
           scale: float | None = None) -> np.ndarray:
    """(S, d_v) o_(-j) - o: how the attention output moves when key j alone is excluded before the softmax."""
    w = _weights(query, keys, scale)  # (S,)
    out = w @ values  # (d_v,)
    moves = np.empty((len(w), values.shape[-1]))
    for j in range(len(w)):
        keep = np.arange(len(w)) != j
        moves[j] = _weights(query, keys[keep], scale) @ values[keep] - out  # new minus old
    return moves


def exclusion_reference(query: np.ndarray, keys: np.ndarray, values: np.ndarray, w_o: np.ndarray, *,
                        scale: float | None = None) -> np.ndarray:
    """(S,) |(o_(-j) - o) W_o|: how far the projected output moves when key j alone is excluded.

    query (d,), keys (S, d), values (S, d_v), w_o (d_v, d_out). Excluding key j renormalises the
    rest: o_(-j) - o = w_j (m_(-j) - v_j), with m_(-j) the weighted mean of the other values
    (equivalently w_j / (1 - w_j) (o - v_j)); the layer's output moves by that times W_o.
    """
    return np.linalg.norm(_moves(query, keys, values, scale=scale) @ w_o, axis=-1)


def _before_projection(query, keys, values, w_o):
    """|o_(-j) - o|: the move of the attention output, W_o left out."""
    return np.linalg.norm(_moves(query, keys, values), axis=-1)


def _difference_of_norms(query, keys, values, w_o):
    """|o W_o| - |o_(-j) W_o|: the change of the projected output's length, not how far it moved."""
    w = _weights(query, keys)
    out = w @ values @ w_o  # (d_out,)
    moved = out + _moves(query, keys, values) @ w_o  # (S, d_out)
    return np.linalg.norm(out) - np.linalg.norm(moved, axis=-1)


def _not_renormalised(query, keys, values, w_o):
    """Weight j set to zero after the softmax (or value j set to zero): o moves by -w_j v_j."""
    w = _weights(query, keys)
    return w * np.linalg.norm(values @ w_o, axis=-1)


def _excluded_output(query, keys, values, w_o):
    """|o_(-j) W_o|: the length of the output without key j, not how far it moved."""
    out = _weights(query, keys) @ values  # (d_v,)
    return np.linalg.norm((out + _moves(query, keys, values)) @ w_o, axis=-1)


def _excluded_output_unprojected(query, keys, values, w_o):
    """|o_(-j)|: the output without key j, neither subtracted nor projected."""
    out = _weights(query, keys) @ values
    return np.linalg.norm(out + _moves(query, keys, values), axis=-1)


def _zeroed_key(query, keys, values, w_o):
    """Key vector j set to zero: its score becomes 0, and it still gets weight."""
    out = _weights(query, keys) @ values
    effects = []
    for j in range(len(keys)):
        k = keys.copy()
        k[j] = 0.0
        effects.append(np.linalg.norm((_weights(query, k) @ values - out) @ w_o))
    return np.array(effects)


def _full_weight_formula(case: Case, got, expected) -> bool:
    """Wrong exactly where a key holds all the weight to float64's precision (NaN, inf, or what a
    guard put there), right elsewhere: the closed form w_j / (1 - w_j) (o - v_j) divides by a 1 - w_j
    that rounded to 0."""
    query, keys, _, _ = case.args
    full = _weights(query, keys) >= 1.0 - 1e-12  # (S,): the keys whose 1 - w_j has no digits left
    got = np.asarray(got, dtype=float)
    if not full.any() or got.shape != expected.shape:
        return False
    rest_right = np.allclose(got[~full], expected[~full], rtol=1e-6, atol=1e-9)
    return bool(rest_right and not np.allclose(got[full], expected[full], rtol=1e-6, atol=1e-9))


def _accumulated_exclusions(query, keys, values, w_o, *, empty: str = "zero"):
    """Key j's effect measured with keys 0 .. j all excluded: each exclusion stays in one scores array.
    With every key excluded the output is taken as 0 ("zero") or NaN ("nan")."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    s = keys @ query * scale  # (S,)
    out = _weights(query, keys) @ values  # (d_v,)
    effects = []
    for j in range(len(keys)):
        rest = s[j + 1:]  # keys after j: the ones still in
        if rest.size == 0:
            moved = np.zeros_like(out) if empty == "zero" else np.full_like(out, np.nan)
        else:
            e = np.exp(rest - rest.max())
            moved = (e / e.sum()) @ values[j + 1:]
        effects.append(np.linalg.norm((moved - out) @ w_o))
    return np.array(effects)


def exclusion_public() -> list[Case]:
    rng = np.random.default_rng(505)
    # key 0 gets the largest weight, and its value differs from the others' mean [1, 0, 0] only in the
    # third coordinate, which W_o ignores: excluding it moves o but not o W_o
    q = np.array([2.0, 0.0])
    k = np.array([[1.5, 0.0], [0.0, 1.0], [0.0, -1.0]])
    v = np.array([[1.0, 0.0, 2.0], [2.0, 1.0, 1.0], [0.0, -1.0, -1.0]])
    w_o = np.array([[1.0, -0.5], [0.5, 2.0], [0.0, 0.0]])  # (d_v, d_out): row 2 is zero
    return numbered([
        Case("", "3 keys: excluding the largest weight moves the output only in a direction W_o ignores",
             (q, k, v, w_o)),
        Case("", "4 keys, d 3, value width 2, output width 3",
             (rng.normal(size=3), rng.normal(size=(4, 3)), rng.normal(size=(4, 2)), rng.normal(size=(2, 3)))),
        Case("", "5 keys, d 4, value width 2, output width 4",
             (rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), rng.normal(size=(2, 4)))),
        Case("", "2 keys, d 2, value width 3, output width 3",
             (rng.normal(size=2) * 2, rng.normal(size=(2, 2)), rng.normal(size=(2, 3)), rng.normal(size=(3, 3)))),
        Case("", "4 keys: key 0's score is 60 above the others, so its weight is 1 to float64's precision",
             (np.array([60.0 * math.sqrt(2.0), 0.0]),
              np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [0.0, 0.5]]),
              np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0], [-2.0, 0.5]]),
              np.array([[1.0, 0.5, 0.0], [-1.0, 2.0, 1.0]])),
             frozenset({"full-weight"})),
    ])


# keys, d, value width, output width: every seed draws these (widths of 2 or more, so that no slip
# agrees with the reference by chance, as a difference of lengths would for vectors of width 1)
EXCLUSION_HIDDEN = ((3, 2, 2, 3), (5, 4, 2, 2), (7, 3, 3, 4), (4, 6, 4, 2))


def exclusion_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for s, d, d_v, d_out in EXCLUSION_HIDDEN:
        cases.append(Case("", f"random: {s} keys, d {d}, value width {d_v}, output width {d_out}", (
            rng.normal(size=d) * float(rng.uniform(0.5, 2.5)), rng.normal(size=(s, d)), rng.normal(size=(s, d_v)),
            rng.normal(size=(d_v, d_out)))))
    return cases


EXCLUSION_EFFECTS = Exercise(
    name="exclusion_effects",
    notebook=NOTEBOOK,
    signature="exclusion_effects(query, keys, values, w_o) -> (S,)",
    points=2,
    reference=exclusion_reference,
    output=ArrayOutput("float"),
    public=exclusion_public,
    hidden=exclusion_hidden,
    diagnoses=(
        DiagnosisSpec(
            "effects_are_weights", "Weights returned instead of effects",
            "The answer returns the attention weights: the question is how far the projected output moves "
            "when a key is excluded, which depends on the key's value and on W_o as well as on its weight.",
            "For each key j: exclude it before the softmax, recompute the output, and return "
            "np.linalg.norm((output_without_j - output) @ w_o).",
            "exclusion", matches_model(lambda q, k, v, w_o: _weights(q, k)),
        ),
        DiagnosisSpec(
            "exclusion_before_projection", "Measured before the output projection",
            "The answer returns how far the attention output o moves, |o_(-j) - o|, and leaves W_o out. "
            "The layer's output is o W_o, and W_o can shrink, stretch or ignore directions of o: a key "
            "whose exclusion moves o a lot can move o W_o by nothing.",
            "Multiply the move by W_o before taking its length: np.linalg.norm((output_without_j - output) @ w_o).",
            "no-effect", matches_model(_before_projection),
        ),
        DiagnosisSpec(
            "difference_of_norms", "Difference of lengths instead of the length of the difference",
            "The answer compares the lengths of the two projected outputs, |o W_o| and |o_(-j) W_o|. That "
            "says how much the output grew or shrank, not how far it moved: an output can turn to point "
            "elsewhere and keep its length.",
            "Subtract first, then take the norm: np.linalg.norm((output_without_j - output) @ w_o).",
            "exclusion", matches_model(_difference_of_norms, lambda *a: np.abs(_difference_of_norms(*a))),
        ),
        DiagnosisSpec(
            "excluded_output_returned", "The output without the key, not its change",
            "The answer returns the length of the output computed without key j, |o_(-j) W_o|, and "
            "does not subtract the full output o W_o. That length is large for every key, whatever the "
            "key did: the effect of excluding a key is how far the output moved, new minus old.",
            "Compute the full output once, then for each key: np.linalg.norm((output_without_j - output) @ w_o).",
            "exclusion", matches_model(_excluded_output, _excluded_output_unprojected),
        ),
        DiagnosisSpec(
            "exclusion_not_renormalised", "Excluded after the softmax, without renormalising",
            "The answer removes key j after the softmax (its weight, or its value vector, set to zero), "
            "so the output moves by exactly -w_j v_j and the remaining weights sum to 1 - w_j. That is "
            "the lesson's error of zeroing probabilities after the softmax. Excluding a key renormalises "
            "the others: the output moves by w_j (m - v_j) (new minus old), with m the weighted mean of "
            "the other values.",
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
            "closed_form_at_full_weight", "The closed form divides by 1 - w, which rounded to 0",
            "The effects are right except for a key that holds all the weight, where the answer gives NaN, "
            "inf, or what a guard put in their place. The lesson's formula w_j / (1 - w_j) (o - v_j) is exact "
            "on paper, but when one weight is 1 to float64's precision, 1 - w_j is 0 and the division has "
            "nothing left to divide by. Excluding that key is still well defined: the output becomes the "
            "other keys' weighted mean.",
            "Compute the effect from its definition: exclude key j before the softmax, recompute the output "
            "from the other keys, subtract the full output, then project with W_o.",
            "exclusion", shows_on_every(_full_weight_formula),
        ),
        DiagnosisSpec(
            "exclusions_accumulate", "Each exclusion stays for the next key",
            "Key j's effect is that of excluding keys 0 to j together: the exclusions accumulate. That "
            "is what one scores array does when each key's score is set to -inf in it and never put back "
            "(excluded = scores makes no copy), so the last key's effect is the output with no key at all.",
            "Start each key from the full scores: excluded = scores.copy(); excluded[j] = -np.inf; or "
            "drop key j with np.delete, which returns a new array.",
            "exclusion",
            matches_model(_accumulated_exclusions,
                          lambda q, k, v, w: _accumulated_exclusions(q, k, v, w, empty="nan")),
        ),
        DiagnosisSpec(
            "exclusion_missing_scale", "No 1/sqrt(d) scaling",
            "The effects match attention on unscaled scores q.k.",
            "Scale the scores by 1/sqrt(d), d the width of the query and keys.",
            "scaling", matches_model(lambda q, k, v, w_o: exclusion_reference(q, k, v, w_o, scale=1.0)),
        ),
    ),
    stub_hint="for each key: exclude it before the softmax, recompute the output, measure how far it moved after W_o",
)
