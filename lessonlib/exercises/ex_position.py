"""Exercises of 03_position: sinusoidal positions, RoPE, order sensitivity, ALiBi slopes and ALiBi weights."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lessonlib.attention import softmax
from lessonlib.exercises.outputs import BoolOutput
from lessonlib.exercises.runner import build_probe, probe
from lessonlib.exercises.spec import (
    ArrayOutput,
    Case,
    DetectFn,
    DiagnosisSpec,
    Exercise,
    Record,
    any_of,
    matches_model,
    numbered,
    shows,
    shows_on_every,
    wrong_only_on,
)
from lessonlib.position import rope as _reference_rope
from lessonlib.position import sinusoidal_positions as _reference_sinusoidal

NOTEBOOK = "03_position.ipynb"
BASE = 10000.0

# Wrong frequency rules learners write, as functions of (pair index i, width d) -> inverse frequency.
_CORRECT_FREQ: Callable[[np.ndarray, int], np.ndarray] = lambda i, d: BASE ** (-2.0 * i / d)  # noqa: E731
_WRONG_FREQS: tuple[Callable[[np.ndarray, int], np.ndarray], ...] = (
    lambda i, d: BASE ** (-1.0 * i / d),  # exponent i/d: the factor 2 forgotten
    lambda i, d: BASE ** (-4.0 * i / d),  # exponent 4i/d: the column index 2i doubled again
    lambda i, d: BASE ** (2.0 * i / d),  # multiplied by base^(2i/d) instead of divided
)


# --- sinusoidal_positions -----------------------------------------------------------------------


def sinusoidal_reference(n_positions: int, d_model: int) -> np.ndarray:
    return _reference_sinusoidal(n_positions, d_model)


def _table(
    n: int, d: int, *, freq=_CORRECT_FREQ, start: int = 0, swap: bool = False, halves: bool = False,
    per_column: bool = False,
) -> np.ndarray:
    """A sinusoidal table built with one chosen mistake (or none)."""
    pos = np.arange(start, start + n, dtype=float)[:, None]  # (n, 1)
    i = np.arange(d // 2)  # (d/2,)
    angle = pos * freq(i, d)  # (n, d/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    if halves:
        return np.concatenate([first(angle), second(angle)], axis=-1)  # (n, d)
    pe = np.empty((n, d))
    pe[:, 0::2] = first(angle)
    if per_column:  # column 2i+1 uses its own index in the exponent: (2i+1)/d
        pe[:, 1::2] = second(pos * BASE ** (-(2.0 * i + 1.0) / d))
    else:
        pe[:, 1::2] = second(angle)
    return pe


def _wrong_frequency_models():
    models = [lambda n, d, f=f: _table(n, d, freq=f) for f in _WRONG_FREQS]
    models.append(lambda n, d: _table(n, d, per_column=True))
    return tuple(models)


def _first_pair_right_rest_wrong(case: Case, got, expected) -> bool:
    """Columns 0 and 1 (frequency 1 in any convention) are right, a later column is not."""
    if got.shape != expected.shape or expected.shape[1] < 4:
        return False
    first_pair = np.allclose(got[:, :2], expected[:, :2], atol=1e-7)
    rest_ok = np.allclose(got[:, 2:], expected[:, 2:], atol=1e-7)
    return bool(first_pair and not rest_ok)


SINUSOIDAL_POSITIONS = Exercise(
    name="sinusoidal_positions",
    notebook=NOTEBOOK,
    signature="sinusoidal_positions(n_positions, d_model) -> (n_positions, d_model)",
    points=2,
    reference=sinusoidal_reference,
    output=ArrayOutput("float"),
    public=lambda: numbered([
        Case("", "4 positions, d_model 6", (4, 6)),
        Case("", "10 positions, d_model 8", (10, 8)),
        Case("", "6 positions, d_model 16", (6, 16)),
    ]),
    hidden=lambda rng: [
        Case("", f"{n} positions, d_model {d}", (int(n), int(d)))
        for n, d in zip(rng.integers(2, 51, size=4), 2 * rng.integers(2, 17, size=4))
    ],
    diagnoses=(
        DiagnosisSpec(
            "sin_cos_swapped", "sin and cos swapped",
            "Even columns hold cosines and odd columns sines: at position 0 the row starts 1, 0, "
            "1, 0 instead of 0, 1, 0, 1.",
            "Column 2i is sin(pos / 10000^(2i/d)), column 2i+1 is cos of the same angle.",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, swap=True)),
        ),
        DiagnosisSpec(
            "halves_concatenated", "Halves concatenated instead of interleaved",
            "All the sines come first and all the cosines after them; the convention interleaves "
            "them, sin and cos of one frequency side by side.",
            "Write sines into pe[:, 0::2] and cosines into pe[:, 1::2].",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, halves=True)),
        ),
        DiagnosisSpec(
            "wrong_frequency_exponent", "Wrong frequency exponent",
            "Some columns turn at the wrong speed: the frequencies do not follow 1 / 10000^(2i/d) "
            "with i the pair index, one frequency shared by the two columns of a pair.",
            "Pair i (columns 2i and 2i+1) shares one angle, pos / 10000^(2i/d); "
            "np.arange(0, d, 2) already gives the 2i.",
            "sinusoidal",
            any_of(matches_model(*_wrong_frequency_models()), shows_on_every(_first_pair_right_rest_wrong)),
        ),
        DiagnosisSpec(
            "positions_from_one", "Positions counted from 1",
            "The table starts at position 1: its first row is not sin(0), cos(0) = 0, 1, 0, 1, ...",
            "Positions are 0, 1, ..., n_positions - 1: use np.arange(n_positions).",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, start=1)),
        ),
    ),
    stub_hint="sines in even columns, cosines in odd ones; each pair shares one frequency",
)


# --- apply_rope ---------------------------------------------------------------------------------


def rope_reference(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return _reference_rope(x, positions)


def _rope_with(x: np.ndarray, positions: np.ndarray, freq=_CORRECT_FREQ, sign: float = 1.0) -> np.ndarray:
    """Interleaved RoPE with a chosen frequency rule and rotation sense."""
    d = x.shape[-1]
    angle = sign * np.asarray(positions, dtype=float)[..., None] * freq(np.arange(d // 2), d)  # (..., n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    first, second = x[..., 0::2], x[..., 1::2]
    out = np.empty(np.broadcast_shapes(x.shape, angle.shape[:-1] + (d,)))
    out[..., 0::2] = first * cos - second * sin
    out[..., 1::2] = first * sin + second * cos
    return out


def _rope_halves_out(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The interleaved pairs rotated right, then written back side by side: every first, then every second."""
    rotated = _reference_rope(x, positions)  # (..., n, d)
    return np.concatenate([rotated[..., 0::2], rotated[..., 1::2]], axis=-1)


def rope_public() -> list[Case]:
    rng = np.random.default_rng(303)
    return numbered([
        Case("", "4 vectors of width 6 at positions 0..3", (rng.normal(size=(4, 6)), np.arange(4))),
        Case("", "a batch of 2, 5 vectors of width 4 at positions 0..4",
             (rng.normal(size=(2, 5, 4)), np.arange(5))),
        Case("", "3 vectors of width 8 at positions 0, 7 and 100",
             (rng.normal(size=(3, 8)), np.array([0, 7, 100]))),
    ])


# (batch, vectors, width) of each hidden case: every seed draws these, only the numbers and positions differ.
ROPE_HIDDEN = (((), 6, 4), ((2,), 5, 6), ((), 3, 10), ((3,), 4, 12))


def rope_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for batch, n, d in ROPE_HIDDEN:
        positions = np.sort(rng.choice(300, size=n, replace=False))
        cases.append(Case("", f"x {batch + (n, d)} at positions {positions.tolist()}",
                          (rng.normal(size=batch + (n, d)), positions)))
    return cases


APPLY_ROPE = Exercise(
    name="apply_rope",
    notebook=NOTEBOOK,
    signature="apply_rope(x, positions) -> array shaped like x",
    points=2,
    reference=rope_reference,
    output=ArrayOutput("float"),
    public=rope_public,
    hidden=rope_hidden,
    diagnoses=(
        DiagnosisSpec(
            "rope_half_pairing", "Pairs taken as (i, i + d/2)",
            "The answer rotates coordinate i with coordinate i + d/2, the half-split convention of "
            "GPT-NeoX and of the Hugging Face LLaMA port (which permutes the query and key weights "
            "when it converts Meta's checkpoints). This exercise pairs interleaved coordinates "
            "(2i, 2i+1), as RoFormer and Meta's reference LLaMA code do (a complex view of adjacent pairs).",
            "Rotate x[..., 0::2] with x[..., 1::2]. Mixing the two conventions between a model's "
            "weights and its code is a classic bug.",
            "rope", matches_model(lambda x, p: _reference_rope(x, p, pairing="half")),
        ),
        DiagnosisSpec(
            "rope_wrong_direction", "Rotation in the wrong direction",
            "Each pair is rotated by -angle instead of +angle: the sin terms have the opposite sign.",
            "(a, b) becomes (a cos t - b sin t, a sin t + b cos t) with t = pos / 10000^(2i/d).",
            "rope", matches_model(lambda x, p: _rope_with(x, p, sign=-1.0)),
        ),
        DiagnosisSpec(
            "rope_wrong_frequency", "Wrong rotation frequencies",
            "The first pair turns at the right speed but later pairs do not: the angles do not "
            "follow pos / 10000^(2i/d).",
            "Pair i turns by pos * 10000^(-2i/d), i = 0 .. d/2 - 1.",
            "rope", matches_model(*(lambda x, p, f=f: _rope_with(x, p, freq=f) for f in _WRONG_FREQS)),
        ),
        DiagnosisSpec(
            "rope_positions_from_one", "Positions shifted by one",
            "Every vector is rotated as if it sat one position later: position 0 must not rotate at all.",
            "Use the positions as given; do not add one.",
            "rope", matches_model(lambda x, p: _rope_with(x, np.asarray(p) + 1)),
        ),
        DiagnosisSpec(
            "rope_output_in_halves", "Rotated pairs written back in halves",
            "Each interleaved pair (2i, 2i+1) is rotated by the right angle, but the results come back "
            "as all the first coordinates, then all the second ones: the strided split x[..., 0::2], "
            "x[..., 1::2] was joined back with a concatenation, which lays them out side by side.",
            "Write each rotated coordinate back where it came from: out[..., 0::2] = ... and "
            "out[..., 1::2] = ... into out = np.empty_like(x).",
            "rope", matches_model(_rope_halves_out),
        ),
    ),
    stub_hint="rotate each interleaved pair of coordinates by its own angle",
)


# --- is_order_sensitive: a library-shaped layer, batch first ------------------------------------
#
# The layers take a batch of sequences, (batch, n, d), as torch's nn.MultiheadAttention with
# batch_first=True, Keras and Flax do, and mix their two heads with an output projection W_o. The
# tokens of a sequence are on axis 1; axis 0 holds independent sequences.

_ORDER_TEXT = {
    "plain": "two-head self-attention with no position and no mask",
    "rowwise": "a layer that transforms each token on its own",
    "sinusoidal": "two-head self-attention with sinusoidal positions added to the input",
    "learned": "two-head self-attention with learned positions added to the input",
    "causal": "two-head self-attention with a causal mask and no position",
    "rope": "two-head self-attention with RoPE on queries and keys",
    "distance": "two-head self-attention with the bias -|i - j| / 2 on its scores",
    "faint": "two-head self-attention with a faint bias, -|i - j| / 1000, on its scores",
}
ORDER_BLIND = frozenset({"plain", "rowwise"})


def _order_case(kind: str, seed: int, batch: int, n: int, d: int) -> Case:
    mask = "causal" if kind == "causal" else "none"
    position = {"plain": "none", "causal": "none"}.get(kind, kind)
    x = np.random.default_rng(seed + 1).normal(size=(batch, n, d))  # (batch, n, d)
    tags = {kind, "blind" if kind in ORDER_BLIND else "sensitive"}
    return Case("", f"{_ORDER_TEXT[kind]}, x of shape ({batch}, {n}, {d})",
                 (probe("layer", d=d, seed=seed, mask=mask, position=position, batch_first=True), x),
                 frozenset(tags))


def _permutations(n: int, count: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    perms = [np.roll(np.arange(n), 1)]  # never the identity
    perms += [rng.permutation(n) for _ in range(count - 1)]
    return perms


def order_sensitive_reference(layer: str, x: np.ndarray) -> bool:
    """True when layer(x[:, p]) differs from layer(x)[:, p] (beyond rounding) for some permutation p
    of the tokens (axis 1)."""
    fn = build_probe(layer)
    base = fn(x)  # (batch, n, d)
    return any(not np.allclose(fn(x[:, p]), base[:, p], rtol=1e-7, atol=1e-9) for p in _permutations(x.shape[1]))


def _order_exact(layer: str, x: np.ndarray) -> bool:
    fn = build_probe(layer)
    base = fn(x)
    return any(not np.array_equal(fn(x[:, p]), base[:, p]) for p in _permutations(x.shape[1]))


def _rowwise_called_sensitive(records: Sequence[Record]) -> bool:
    """A token-by-token layer called order-sensitive: its outputs are exactly the permuted ones, so only a
    comparison that does not undo the permutation sees a difference (no tolerance is too tight)."""
    return any(r.got is True for r in records if "rowwise" in r.case.tags)


def _not_unpermuted(records: Sequence[Record]) -> list[str]:
    """The order-blind layers called sensitive, when a token-by-token layer is one of them.

    A permutation the answer draws may leave some x unchanged (the identity), and then that case
    comes out right; the token-by-token layer called sensitive is the evidence, whatever the others say.
    """
    if not _rowwise_called_sensitive(records):
        return []
    return [r.case.id for r in records if "blind" in r.case.tags and r.got is True]


def _exact_not_unpermuted(detect: DetectFn) -> DetectFn:
    """``detect``, unless the permutation was not undone: that mistake also calls plain attention
    sensitive, and then an exact comparison is not what the evidence shows."""

    def exact(records: Sequence[Record]) -> list[str]:
        return [] if _rowwise_called_sensitive(records) else detect(records)

    return exact


def _reversal_only(records: Sequence[Record]) -> list[str]:
    """The layers with a symmetric distance bias (strong or faint) called order-blind, every other
    layer right: reversing the tokens keeps every distance |i - j|, so a test that only reverses
    cannot see such a bias, however strong."""
    distance = [r for r in records if r.case.tags & {"distance", "faint"}]
    if not any("distance" in r.case.tags for r in distance) or any(r.got is not False for r in distance):
        return []
    if not all(r.passed for r in records if not r.case.tags & {"distance", "faint"}):
        return []
    return [r.case.id for r in distance]


def _all_called_blind(records: Sequence[Record]) -> list[str]:
    """Every layer called order-blind, those with a position or a mask included: what reordering the
    sequences of the batch (axis 0) gives, since a layer treats each sequence on its own."""
    if any(r.got is not False for r in records):
        return []
    return [r.case.id for r in records if "sensitive" in r.case.tags]


def order_public() -> list[Case]:
    return numbered([
        _order_case("plain", 31, 3, 5, 4),
        _order_case("rowwise", 32, 2, 4, 8),
        _order_case("sinusoidal", 33, 3, 5, 8),
        _order_case("causal", 34, 2, 4, 4),
        _order_case("rope", 35, 3, 6, 4),
        _order_case("distance", 36, 2, 5, 4),
        _order_case("faint", 37, 2, 6, 4),
    ])


HIDDEN_ORDER_SHAPE = (3, 7, 8)  # batch, n, d of every hidden x: its shape says nothing of the layer's kind


def order_hidden(rng: np.random.Generator) -> list[Case]:
    """One layer of each kind (two plain ones), in an order drawn from the seed.

    Every seed draws the same kinds and shape; only the layers' weights, x and the order differ.
    """
    kinds = ["plain", "rowwise", "learned", "sinusoidal", "causal", "rope", "distance", "faint", "plain"]
    return [_order_case(str(k), int(rng.integers(1000, 10**6)), *HIDDEN_ORDER_SHAPE) for k in rng.permutation(kinds)]


IS_ORDER_SENSITIVE = Exercise(
    name="is_order_sensitive",
    notebook=NOTEBOOK,
    signature="is_order_sensitive(layer, x) -> bool, x of shape (batch, n, d)",
    points=2,
    reference=order_sensitive_reference,
    output=BoolOutput(),
    public=order_public,
    hidden=order_hidden,
    diagnoses=(
        DiagnosisSpec(
            "sequences_reordered", "The sequences of the batch reordered, not the tokens",
            "The answer calls every layer order-blind, even those with positions or a causal mask. "
            "That is what reordering axis 0 gives: it holds the independent sequences of the batch, "
            "and a layer treats each sequence on its own, so their order never matters. The tokens of "
            "a sequence are on axis 1.",
            "Permute axis 1: x[:, p], and compare layer(x[:, p]) with layer(x)[:, p].",
            "permutation", _all_called_blind,
        ),
        DiagnosisSpec(
            "permutation_not_undone", "Outputs compared without undoing the permutation",
            "The answer calls order-blind layers order-sensitive, even one that transforms each token on "
            "its own: layer(x[:, p]) was compared with layer(x), whose tokens are in the other order. Those "
            "differ for every layer, order-blind or not.",
            "Compare layer(x[:, p]) with layer(x)[:, p]: an order-blind layer moves its outputs with its "
            "inputs, so the two are equal up to rounding.",
            "permutation", _not_unpermuted,
        ),
        DiagnosisSpec(
            "order_exact_equality", "Outputs compared for exact equality",
            "Plain self-attention is called order-sensitive: after a permutation it adds the same "
            "numbers in another order, so its outputs differ from the permuted ones by rounding "
            "(about 1e-16), and an exact comparison counts that.",
            "Compare with a tolerance: np.allclose(layer(x[:, p]), layer(x)[:, p]).",
            "permutation", _exact_not_unpermuted(matches_model(_order_exact, tags=["plain"])),
        ),
        DiagnosisSpec(
            "reversal_only", "Only permutations that keep every distance were tried",
            "Every layer is right but the one whose scores carry the bias -|i - j| / 2, called order-blind. "
            "Reversing the tokens (the lesson's 'dog bites man' and 'man bites dog') keeps the distance "
            "between every two tokens, so a bias on distance alone comes out the same after it: only a "
            "permutation that changes some distance, such as a rotation by one, shows it.",
            "Try several permutations, at least one that is not a reversal: np.roll(np.arange(n), 1), or "
            "random ones.",
            "permutation", _reversal_only,
        ),
        DiagnosisSpec(
            "order_tolerance_too_loose", "A tolerance that hides a faint effect",
            "Every layer is right but those whose position bias is faint (-|i - j| / 1000), called "
            "order-blind: after a permutation their outputs move by about 1e-3, and the answer's "
            "tolerance is as large as that. Rounding moves outputs by about 1e-16; a tolerance only has "
            "to be above rounding, not above every effect too small to matter to you.",
            "Compare with np.allclose's defaults (or a tolerance near 1e-9): np.allclose(layer(x[:, p]), "
            "layer(x)[:, p]).",
            "permutation", wrong_only_on("faint", False),
        ),
    ),
    stub_hint="does reordering the tokens change more than the order of the outputs?",
)


# --- alibi_slopes ---------------------------------------------------------------------------------


def alibi_reference(n_heads: int) -> np.ndarray:
    """(n_heads,) slopes 2^(-8 (h + 1) / n_heads), h = 0 .. n_heads - 1."""
    return 2.0 ** (-8.0 * (np.arange(n_heads) + 1) / n_heads)


def _alibi_off_by_one_models():
    def from_zero(n):
        return 2.0 ** (-8.0 * np.arange(n) / n)

    def from_two(n):
        return 2.0 ** (-8.0 * (np.arange(n) + 2) / n)

    return from_zero, from_two


def _alibi_base_models():
    h = lambda n: np.arange(n) + 1.0  # noqa: E731
    return (
        lambda n: np.exp(-8.0 * h(n) / n),  # e instead of 2
        lambda n: 10.0 ** (-8.0 * h(n) / n),  # 10 instead of 2
        lambda n: 2.0 ** (-h(n) / n),  # the 8 left out: ratio 2^(-1/n)
    )


def _alibi_sign_models():
    return (lambda n: -alibi_reference(n), lambda n: 2.0 ** (8.0 * (np.arange(n) + 1) / n))


ALIBI_SLOPES = Exercise(
    name="alibi_slopes",
    notebook=NOTEBOOK,
    signature="alibi_slopes(n_heads) -> (n_heads,) slopes",
    points=1,
    reference=alibi_reference,
    output=ArrayOutput("float"),
    public=lambda: numbered([Case("", f"{n} heads", (n,)) for n in (1, 2, 4, 8, 16)]),
    hidden=lambda rng: [Case("", f"{n} heads", (int(n),)) for n in 2 ** rng.choice(np.arange(1, 7), 4, replace=False)],
    diagnoses=(
        DiagnosisSpec(
            "alibi_off_by_one_head", "Exponent off by one head",
            "The slopes are the right geometric sequence shifted by one head: the first head should "
            "have slope 2^(-8/n), not 1 (h counted from 0) or 2^(-16/n).",
            "Head h (h = 0 .. n-1) has slope 2 ** (-8 * (h + 1) / n_heads).",
            "alibi", matches_model(*_alibi_off_by_one_models()),
        ),
        DiagnosisSpec(
            "alibi_wrong_base", "Wrong base of the geometric sequence",
            "The slopes fall by the wrong ratio from head to head: the sequence starts at 2^(-8/n) "
            "and multiplies by 2^(-8/n) again for each head, so with 8 heads the slopes are 1/2, 1/4, "
            "..., 1/256.",
            "Use base 2 and the factor 8: 2 ** (-8 * (h + 1) / n_heads).",
            "alibi", matches_model(*_alibi_base_models()),
        ),
        DiagnosisSpec(
            "alibi_sign_confused", "Positive and negative confused",
            "The slopes have the wrong sign or grow instead of shrink: a slope is a positive number, "
            "and the bias added to a score is minus the slope times the distance.",
            "Return positive slopes below one, 2 ** (-8 * (h + 1) / n_heads); the minus sign belongs in "
            "the bias, -slope * |i - j|.",
            "alibi", matches_model(*_alibi_sign_models()),
        ),
    ),
    stub_hint="a geometric sequence of positive slopes, one per head",
)


# --- alibi_weights: the bias of one head, aligned, before a causal softmax ---------------------------


def _slope(head: int, n_heads: int) -> float:
    """Head ``head``'s ALiBi slope 2^(-8 (head + 1) / n_heads), head counted from 0."""
    return 2.0 ** (-8.0 * (head + 1) / n_heads)


def _distances(n_queries: int, n_keys: int, at_end: bool = True) -> np.ndarray:
    """(L, S) query position minus key position; the queries are the last L of the S positions."""
    start = n_keys - n_queries if at_end else 0
    return (start + np.arange(n_queries))[:, None] - np.arange(n_keys)[None, :]  # (L, S), i - j


def _causal_softmax(biased: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Softmax of each row over the keys with distance >= 0 (j <= i); weight 0 on the others."""
    allowed = distance >= 0  # (L, S)
    filled = np.where(allowed, biased, -np.inf)  # (L, S)
    e = np.exp(filled - filled.max(axis=-1, keepdims=True))  # every row keeps its own query's key
    return e / e.sum(axis=-1, keepdims=True)


def alibi_weights_reference(scores: np.ndarray, head: int, n_heads: int) -> np.ndarray:
    """(L, S) causal weights of scores - m_h (i - j), the queries at the last L key positions."""
    distance = _distances(*scores.shape)  # (L, S)
    return _causal_softmax(scores - _slope(head, n_heads) * distance, distance)


def _alibi_with(scores, head, n_heads, *, slope=None, sign=-1.0, mask_at_end=True, masked=True, absolute=False):
    """The weights with one chosen mistake: the slope, its sign, where the mask puts the queries, no mask."""
    m = _slope(head, n_heads) if slope is None else slope
    bias_distance = _distances(*scores.shape)  # (L, S); placing it elsewhere only adds a constant per row
    if absolute:
        bias_distance = np.abs(bias_distance)
    biased = scores + sign * m * bias_distance  # (L, S)
    if not masked:
        return softmax(biased)
    return _causal_softmax(biased, _distances(*scores.shape, at_end=mask_at_end))


def _bias_after_softmax(scores, head, n_heads, *, everywhere=False, absolute=False):
    """Causal weights of the plain scores, with the bias then added to the weights."""
    distance = _distances(*scores.shape)  # (L, S)
    bias = -_slope(head, n_heads) * (np.abs(distance) if absolute else distance)  # (L, S)
    weights = _causal_softmax(scores, distance)  # (L, S)
    return weights + (bias if everywhere else np.where(distance >= 0, bias, 0.0))


def _bias_multiplied_after_softmax(scores, head, n_heads):
    """Causal weights of the plain scores times exp(-m_h (i - j)), not renormalised."""
    distance = _distances(*scores.shape)  # (L, S)
    return _causal_softmax(scores, distance) * np.exp(-_slope(head, n_heads) * np.maximum(distance, 0))


def _own_key_excluded_models():
    """The causal mask j < i: a query's own key blocked (a first query with no key: zeros or NaN)."""

    def strict(scores, head, n_heads, empty):
        distance = _distances(*scores.shape)  # (L, S)
        allowed = distance > 0
        filled = np.where(allowed, scores - _slope(head, n_heads) * distance, -np.inf)
        top = np.where(allowed.any(-1, keepdims=True), filled.max(-1, keepdims=True), 0.0)
        e = np.exp(filled - top)
        total = e.sum(-1, keepdims=True)
        if empty == "nan":
            return e / total
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    return (lambda s, h, n: strict(s, h, n, "zeros"), lambda s, h, n: strict(s, h, n, "nan"))


def _biased_scores_models():
    """The biased scores returned in place of the weights (masked keys at -inf, at 0, or kept)."""
    def biased(scores, head, n_heads):
        return scores - _slope(head, n_heads) * _distances(*scores.shape)

    def filled(fill):
        return lambda s, h, n: np.where(_distances(*s.shape) >= 0, biased(s, h, n), fill)

    return biased, filled(-np.inf), filled(0.0)


def _shifted_by_bias(case: Case, got, expected) -> bool:
    """On the keys a query may see, the weights minus the plain causal weights are +-m_h (i - j)."""
    scores, head, n_heads = case.args
    distance = _distances(*scores.shape)
    seen = distance >= 0
    gap = (got - _causal_softmax(scores, distance))[seen]
    bias = (_slope(head, n_heads) * distance)[seen]
    return bool(np.allclose(gap, -bias, atol=1e-6) or np.allclose(gap, bias, atol=1e-6))


def _other_head(case: Case, got, expected) -> bool:
    """The weights are those of another head's slope, 2^(-8k/n) for some k = 0 .. n + 1 other than h + 1."""
    scores, head, n_heads = case.args
    return any(
        np.allclose(got, _alibi_with(scores, head, n_heads, slope=2.0 ** (-8.0 * k / n_heads)), atol=1e-6)
        for k in range(n_heads + 2) if k != head + 1
    )


def _alibi_over_queries_models():
    """The causal softmax of the biased scores taken down each column (over the queries), a column
    with no allowed query left as NaN or guarded to zeros."""

    def over(guard: bool):
        def model(scores, head, n_heads):
            distance = _distances(*scores.shape)  # (L, S)
            s = np.where(distance >= 0, scores - _slope(head, n_heads) * distance, -np.inf)
            top = s.max(axis=0, keepdims=True)
            e = np.exp(s - (np.where(np.isneginf(top), 0.0, top) if guard else top))
            total = e.sum(axis=0, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0) if guard else e / total

        return model

    return over(True), over(False)


def _alibi_case(scores: np.ndarray, head: int, n_heads: int) -> Case:
    q, k = scores.shape
    return Case("", f"{q} quer{'y' if q == 1 else 'ies'} at the end of {k} keys, head {head} of {n_heads}",
                (scores, head, n_heads))


def alibi_weights_public() -> list[Case]:
    rng = np.random.default_rng(304)
    shapes = ((3, 6, 1, 4), (4, 4, 0, 2), (2, 7, 5, 8), (1, 5, 2, 4))  # n_queries, n_keys, head, n_heads
    return numbered([_alibi_case(rng.normal(size=(q, k)), h, n) for q, k, h, n in shapes])


# (n_queries, n_keys, n_heads) of each hidden case: every seed draws these; the scores and the head differ.
ALIBI_HIDDEN = ((2, 5, 4), (5, 5, 8), (3, 8, 2), (1, 6, 16))


def alibi_weights_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for q, k, n in ALIBI_HIDDEN:
        head = int(rng.integers(n))
        cases.append(_alibi_case(rng.normal(scale=1.5, size=(q, k)), head, n))
    return cases


ALIBI_WEIGHTS = Exercise(
    name="alibi_weights",
    notebook=NOTEBOOK,
    signature="alibi_weights(scores, head, n_heads) -> (n_queries, n_keys) causal attention weights",
    points=2,
    reference=alibi_weights_reference,
    output=ArrayOutput("float"),
    public=alibi_weights_public,
    hidden=alibi_weights_hidden,
    diagnoses=(
        DiagnosisSpec(
            "alibi_bias_rewards_distance", "The bias rewards distance",
            "Farther keys get more weight than the scores alone give them, not less: the answer adds "
            "+m_h (i - j). Two mistakes give exactly these numbers: the slope term with the wrong sign, "
            "or the offset taken key minus query (j - i) in -m_h * offset. On the keys a causal query "
            "sees, -m_h (j - i) = +m_h (i - j), so no output can tell them apart.",
            "The distance is query position minus key position, i - j >= 0 for every key the query "
            "sees; subtract m_h times it: scores - m_h * (i - j).",
            "alibi", matches_model(lambda s, h, n: _alibi_with(s, h, n, sign=1.0)),
        ),
        DiagnosisSpec(
            "alibi_after_softmax", "Bias added after the softmax",
            "The weights are the plain causal softmax of the scores with -m_h (i - j) added to them: "
            "the rows no longer sum to one, and farther keys can get negative weights.",
            "A position bias is part of the score: add it to the scores, then take the causal softmax.",
            "position-enters",
            any_of(
                matches_model(
                    _bias_after_softmax,
                    lambda s, h, n: _bias_after_softmax(s, h, n, everywhere=True),
                    lambda s, h, n: _bias_after_softmax(s, h, n, everywhere=True, absolute=True),
                    _bias_multiplied_after_softmax,
                ),
                shows(_shifted_by_bias),
            ),
        ),
        DiagnosisSpec(
            "alibi_own_key_excluded", "Each query's own key blocked",
            "The causal mask allows only the keys strictly before each query (j < i): a query loses its "
            "own key, and a query with no earlier key is left with none. A causal query may attend to "
            "itself: the distance i - j = 0 gets bias 0.",
            "Allow key j when j <= i, with i = n_keys - n_queries + r for query row r.",
            "alibi", matches_model(*_own_key_excluded_models()),
        ),
        DiagnosisSpec(
            "alibi_scores_not_weights", "The biased scores returned, not the weights",
            "The answer returns the scores with the bias added, scores - m_h (i - j): the step before "
            "the softmax. The exercise asks for the attention weights, which are non-negative and sum "
            "to one over the keys a query may see.",
            "After adding the bias, fill the keys j > i with -inf and take the softmax of each row.",
            "alibi", matches_model(*_biased_scores_models()),
        ),
        DiagnosisSpec(
            "alibi_wrong_head", "Another head's slope",
            "The bias has the right form but the slope of another head. Heads are counted from 0 here: "
            "head h has slope 2^(-8 (h + 1) / n_heads), so head 0 has 2^(-8/n_heads), not 1 (that is "
            "the lesson's 1-based 2^(-8h/H) used with a 0-based h).",
            "Use m = 2 ** (-8 * (head + 1) / n_heads), the slope alibi_slopes(n_heads)[head] of "
            "Exercise 3.4.",
            "alibi",
            any_of(
                matches_model(
                    lambda s, h, n: _alibi_with(s, h, n, slope=2.0 ** (-8.0 * h / n)),  # h counted from 1
                    lambda s, h, n: _alibi_with(s, h, n, slope=2.0 ** (-8.0 * (h + 2) / n)),  # one head further
                    lambda s, h, n: _alibi_with(s, h, n, slope=2.0 ** (-8.0 * (n - h) / n)),  # heads reversed
                ),
                shows_on_every(_other_head),
            ),
        ),
        DiagnosisSpec(
            "alibi_queries_at_start", "Queries placed at the first key positions",
            "The answer is right when there are as many queries as keys, and wrong when there are "
            "fewer: it puts query r at position r, while the queries are the last n_queries of the "
            "n_keys positions (a cache holds the earlier keys), so query r sits at "
            "n_keys - n_queries + r.",
            "Take i = n_keys - n_queries + r in the causal mask j <= i: the last query sees every key. "
            "(In the bias alone the shift would not matter: it changes -m (i - j) by the same amount "
            "for every key of a row, and the softmax ignores that.)",
            "alignment",
            matches_model(lambda s, h, n: _alibi_with(s, h, n, mask_at_end=False)),
        ),
        DiagnosisSpec(
            "alibi_bias_per_query", "No bias left after the softmax",
            "The weights are the plain causal softmax of the scores: the bias is missing, or it is the "
            "same for every key of a row, such as +m_h * i (the query's position) where the key form of "
            "ALiBi uses +m_h * j (the key's position). A constant added to a whole row changes nothing.",
            "The bias must differ from key to key: -m_h (i - j), or equivalently under the causal mask "
            "+m_h * j, with j the key position.",
            "alibi", matches_model(lambda s, h, n: _causal_softmax(s, _distances(*s.shape))),
        ),
        DiagnosisSpec(
            "alibi_over_queries", "Softmax down the columns",
            "The weights of each key's column sum to one (or zero) instead of each query's row: the "
            "softmax's maximum and sum ran over axis 0, the queries. A query's weights must be a "
            "distribution over the keys it may see.",
            "Take the maximum and the sum of each row: axis=-1, keepdims=True.",
            "alibi", matches_model(*_alibi_over_queries_models()),
        ),
        DiagnosisSpec(
            "alibi_no_causal_mask", "No causal mask",
            "Keys after a query get weight: the softmax ran over every key. ALiBi's bias is meant for "
            "the keys j <= i of a causal model: past the query -m_h (i - j) even rewards distance, and "
            "-m_h |i - j| still lets the query read later keys.",
            "Give weight 0 to the keys j > i: fill their biased scores with -inf before the softmax.",
            "alibi",
            matches_model(
                lambda s, h, n: _alibi_with(s, h, n, masked=False),
                lambda s, h, n: _alibi_with(s, h, n, masked=False, absolute=True),
            ),
        ),
    ),
    stub_hint="subtract the head's slope times the distance i - j, then a causal softmax",
)


# --- t5_bucket: T5's buckets, for a causal model, distances counted backwards ----------------------


def t5_bucket_reference(distance: np.ndarray, n_buckets: int, max_distance: int) -> np.ndarray:
    """Bucket of each distance d = query position - key position >= 0, one direction (causal):
    d itself below n_buckets // 2, then log-spaced up to max_distance, then the last bucket."""
    from lessonlib.position import relative_position_bucket

    return relative_position_bucket(-np.asarray(distance), bidirectional=False, n_buckets=n_buckets,
                                    max_distance=max_distance)


def _t5_log_part(distance, n_buckets, max_distance, *, exact=None, rounding=np.floor, clip=True, log_range=None,
                 origin=None, last_from=None):
    """The buckets with one chosen slip: rounding, no clip, the log's range or origin, or the last
    bucket given only from ``last_from`` on (clipping nothing below it)."""
    d = np.asarray(distance)
    exact = n_buckets // 2 if exact is None else exact
    log_range = max_distance / exact if log_range is None else log_range
    origin = exact if origin is None else origin
    log = exact + rounding(np.log(np.maximum(d, 1) / origin) / np.log(log_range) * (n_buckets - exact))
    log = log.astype(d.dtype)
    if last_from is not None:
        log = np.where(d >= last_from, n_buckets - 1, log)
    elif clip:
        log = np.minimum(log, n_buckets - 1)
    return np.where(d < exact, d, log)


def _t5_case(distance: np.ndarray, n_buckets: int, max_distance: int, text: str) -> Case:
    return Case("", f"{text}, n_buckets {n_buckets}, max_distance {max_distance}",
                (np.asarray(distance, dtype=np.int64), n_buckets, max_distance))


def t5_bucket_public() -> list[Case]:
    return numbered([
        _t5_case(np.arange(12), 8, 20, "distances 0 .. 11"),
        _t5_case(np.array([0, 1, 7, 8, 9, 15, 16, 30, 31, 60, 127, 128, 500]), 16, 128, "13 distances from 0 to 500"),
        _t5_case((np.arange(24).reshape(4, 6) * 7) % 90, 32, 40, "a (4, 6) array of distances"),
    ])


T5_HIDDEN = ((8, 16), (16, 64), (32, 128), (12, 30))  # n_buckets, max_distance


def _rounded_up(n_buckets: int, max_distance: int) -> int:
    """The first distance whose place on the log scale has a fractional part of at least 1/2."""
    exact = n_buckets // 2
    d = np.arange(exact, max_distance)
    place = np.log(d / exact) / np.log(max_distance / exact) * (n_buckets - exact)
    return int(d[np.argmax(place - np.floor(place) >= 0.5)])


def t5_bucket_hidden(rng: np.random.Generator) -> list[Case]:
    """Every seed holds, in each case and at places drawn from it: 0, the last exact distance, the
    first log-spaced one, one that rounding moves up a bucket, max_distance itself and one past it."""
    cases = []
    for n_buckets, max_distance in T5_HIDDEN:
        d = rng.integers(0, 3 * max_distance, size=12)
        d[:6] = [0, n_buckets // 2 - 1, n_buckets // 2, _rounded_up(n_buckets, max_distance), max_distance,
                 2 * max_distance]
        cases.append(_t5_case(d[rng.permutation(d.size)], n_buckets, max_distance, "12 distances"))
    return cases


T5_BUCKET = Exercise(
    name="t5_bucket",
    notebook=NOTEBOOK,
    signature="t5_bucket(distance, n_buckets, max_distance) -> integer array shaped like distance",
    points=2,
    reference=t5_bucket_reference,
    output=ArrayOutput("float"),
    public=t5_bucket_public,
    hidden=t5_bucket_hidden,
    diagnoses=(
        DiagnosisSpec(
            "bucket_offset_sign", "Distances read as key minus query",
            "Every distance falls in bucket 0: the answer negated the distance (as for an offset key - "
            "query) and then clipped the negative values to 0. Here the distance is already query - key, "
            "0 or more for every key a causal query sees.",
            "Use the distance as given: d = distance, with d >= 0.",
            "t5-buckets", matches_model(lambda d, n, m: np.zeros_like(np.asarray(d))),
        ),
        DiagnosisSpec(
            "bucket_halved", "Half the buckets used",
            "The buckets are those of n_buckets // 2: the bidirectional rule, which keeps half of the "
            "buckets for keys after the query. A causal model sees no such key and uses all n_buckets "
            "for the past.",
            "Exact buckets for d < n_buckets // 2; the log-spaced ones fill the rest, up to n_buckets - 1.",
            "t5-buckets", matches_model(lambda d, n, m: t5_bucket_reference(d, n // 2, m)),
        ),
        DiagnosisSpec(
            "bucket_log_rounded", "The log-spaced bucket rounded, not floored",
            "The log-spaced buckets are one too high for some distances: the position on the log scale "
            "was rounded to the nearest integer (or rounded up), where T5 truncates it.",
            "Truncate: exact + int(log(d / exact) / log(max_distance / exact) * (n_buckets - exact)), "
            "or np.floor(...).astype(int).",
            "t5-buckets",
            matches_model(lambda d, n, m: _t5_log_part(d, n, m, rounding=np.round),
                          lambda d, n, m: _t5_log_part(d, n, m, rounding=np.ceil)),
        ),
        DiagnosisSpec(
            "bucket_not_clipped", "Far distances beyond the last bucket",
            "Distances from max_distance on get bucket numbers of n_buckets or more (at max_distance "
            "itself the log-spaced part reaches n_buckets exactly, so a last bucket given only past "
            "max_distance misses it): the last bucket holds every distance from max_distance on.",
            "Clip the log-spaced bucket: np.minimum(bucket, n_buckets - 1).",
            "t5-buckets",
            matches_model(lambda d, n, m: _t5_log_part(d, n, m, clip=False),
                          lambda d, n, m: _t5_log_part(d, n, m, last_from=m + 1)),
        ),
        DiagnosisSpec(
            "bucket_log_range", "The log scale measured from distance 1",
            "The log-spaced part divides by log(max_distance) instead of log(max_distance / exact) (and "
            "maybe takes log(d) for log(d / exact)): it measures the scale from distance 1, while it "
            "starts where the exact buckets end, at d = n_buckets // 2. The buckets then fill too slowly.",
            "The log part is exact + log(d / exact) / log(max_distance / exact) * (n_buckets - exact), "
            "with exact = n_buckets // 2.",
            "t5-buckets",
            matches_model(lambda d, n, m: _t5_log_part(d, n, m, log_range=m),
                          lambda d, n, m: _t5_log_part(d, n, m, log_range=m, origin=1)),
        ),
    ),
    stub_hint="bucket d below n_buckets // 2, then log-spaced buckets up to max_distance (rounded down), then the last",
)
