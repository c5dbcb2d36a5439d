"""Exercises of 02_masking: masked softmax, the causal masks (square and with a cache) and the padding mask."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from lessonlib.attention import masked_softmax as _reference_masked_softmax
from lessonlib.attention import softmax
from lessonlib.exercises.outputs import BoolOutput, ChoiceOutput
from lessonlib.exercises.runner import build_probe, probe, probe_fields
from lessonlib.exercises.spec import (
    ArrayOutput,
    Case,
    DiagnosisSpec,
    Exercise,
    Record,
    any_of,
    matches_model,
    numbered,
    shows,
    wrong_only_on,
)
from lessonlib.exercises.spec import matches_model as _matches
from lessonlib.masks import causal_mask as _reference_causal_mask
from lessonlib.masks import padding_mask as _reference_padding_mask

NOTEBOOK = "02_masking.ipynb"


# --- masked_softmax -----------------------------------------------------------------------------


def masked_softmax_reference(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Softmax over the last axis with disallowed keys excluded first; empty rows all zero."""
    return _reference_masked_softmax(scores, allowed, fully_masked="zeros")


def _full(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    return np.broadcast_to(allowed, np.broadcast_shapes(scores.shape, allowed.shape))


def _empty_rows(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(...,) True for rows with no allowed key."""
    return ~_full(scores, allowed).any(axis=-1)


def _zeroed_after_models():
    """Probabilities of disallowed keys set to zero after an ordinary softmax: with its maximum
    subtracted, or without (a row whose disallowed score overflows is NaN, by * or by np.where)."""

    def stable(scores, allowed):
        return softmax(scores) * allowed

    def unstable(scores, allowed, where: bool):
        e = np.exp(scores)
        p = e / e.sum(axis=-1, keepdims=True)
        return np.where(allowed, p, 0.0) if where else p * allowed

    return stable, lambda s, a: unstable(s, a, False), lambda s, a: unstable(s, a, True)


def _renormalised_after_models():
    """Zeroed after the softmax, then renormalised: 0 / 0 (a dominant disallowed score) left as NaN, or guarded to 0."""

    def kept(scores, allowed):
        return softmax(scores) * allowed

    def nan(scores, allowed):
        p = kept(scores, allowed)
        return p / p.sum(axis=-1, keepdims=True)

    def guarded(scores, allowed):
        p = kept(scores, allowed)
        total = p.sum(axis=-1, keepdims=True)
        return np.divide(p, total, out=np.zeros_like(p), where=total > 0)

    return nan, guarded


def _whole_array_models():
    """The one-row softmax applied to a whole array: its maximum and its sum taken over every element."""

    def whole(scores, allowed):
        s = np.where(_full(scores, allowed), scores, -np.inf)
        e = np.exp(s - s.max())
        return e / e.sum()

    def whole_sum(scores, allowed):  # the maximum per row, the sum still over every element
        s = np.where(_full(scores, allowed), scores, -np.inf)
        top = s.max(axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
        return e / e.sum()

    return whole, whole_sum


def _wrong_axis_models():
    """The masked softmax taken down a column: over axis 0 or axis -2 instead of the keys, a column
    with no allowed key left as NaN or guarded to zeros."""

    def over(axis: int, guard: bool):
        def model(scores, allowed):
            s = np.where(_full(scores, allowed), scores, -np.inf)
            if s.ndim < 2 or axis % s.ndim == s.ndim - 1:
                return None  # the key axis itself: this case cannot tell the mistake apart
            top = s.max(axis=axis, keepdims=True)
            e = np.exp(s - (np.where(np.isneginf(top), 0.0, top) if guard else top))
            total = e.sum(axis=axis, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0) if guard else e / total

        return model

    return tuple(over(axis, guard) for axis in (0, -2) for guard in (True, False))


def _scores_times_mask(scores, allowed):
    return softmax(scores * allowed)


def _inverted_models():
    def zeros(scores, allowed):
        return masked_softmax_reference(scores, ~allowed)

    def nan_rows(scores, allowed):
        out = masked_softmax_reference(scores, ~allowed)
        out[_empty_rows(scores, ~allowed)] = np.nan
        return out

    def uniform_rows(scores, allowed):
        out = masked_softmax_reference(scores, ~allowed)
        out[_empty_rows(scores, ~allowed)] = 1.0 / scores.shape[-1]
        return out

    return zeros, nan_rows, uniform_rows


def _empty_rows_uniform(case: Case, got, expected) -> bool:
    empty = _empty_rows(*case.args)
    if not empty.any() or got.shape != expected.shape:
        return False
    rows = got[empty]  # (n_empty, S)
    return bool(np.allclose(rows, 1.0 / got.shape[-1], atol=1e-6))


def _empty_rows_nan(case: Case, got, expected) -> bool:
    empty = _empty_rows(*case.args)
    if not empty.any() or got.shape != expected.shape:
        return False
    return bool(np.isnan(got[empty]).any() and np.isfinite(got[~empty]).all())


def masked_softmax_public() -> list[Case]:
    rng = np.random.default_rng(202)
    s3 = np.round(rng.normal(size=(3, 4)) * 2, 3)
    a3 = np.array([[True, False, True, True], [False, True, True, False], [False, False, False, False]])
    s4 = np.round(rng.normal(size=(2, 3, 4)) * 2, 3)
    a4 = np.array([[[True, True, True, False]], [[True, True, False, False]]])  # (2, 1, 4) key padding
    s5 = np.round(rng.normal(size=(2, 5)), 3)
    return numbered([
        Case("", "the lesson's second fixture: scores [1, 2, 100], the third key not allowed",
             (np.array([1.0, 2.0, 100.0]), np.array([True, True, False]))),
        Case("", "disallowed scores far above the others (1000 and 900)",
             (np.array([[3.0, 1.0, 1000.0, 2.0], [0.5, 900.0, -1.0, 2.0], [0.5, -3.0, -1.0, 2.0]]),
              np.array([[True, True, False, True], [True, False, True, True], [True, True, False, True]])),
             frozenset({"dominant-masked"})),
        Case("", "3 rows of 4 keys; the last row has no allowed key", (s3, a3), frozenset({"empty-row"})),
        Case("", "a batch of 2 x 3 queries x 4 keys with a padding mask of shape (2, 1, 4)", (s4, a4)),
        Case("", "every key allowed: a plain softmax", (s5, np.ones((2, 5), dtype=bool))),
    ])


# (scores shape, a row with no allowed key, disallowed scores that dominate their row) of each hidden
# case. Every seed draws these and only the numbers differ: row 0 allows every key, row 1 some but
# not all, the last row none where asked, and every other row at least one.
MASKED_HIDDEN = (
    ((4, 5), True, False), ((2, 3, 6), False, False), ((3, 4, 3), True, False),
    ((5, 4), False, True), ((2, 4, 7), True, True),
)


def masked_softmax_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, empty, dominant in MASKED_HIDDEN:
        scores = rng.normal(size=shape) * float(rng.uniform(0.5, 4.0))
        allowed = rng.random(shape) < 0.7
        np.put_along_axis(allowed, rng.integers(shape[-1], size=shape[:-1] + (1,)), True, axis=-1)
        allowed[..., 0, :] = True  # one row with every key allowed
        allowed[..., 1, :] = rng.random(shape[:-2] + shape[-1:]) < 0.5  # one row with some keys allowed
        allowed[..., 1, 0], allowed[..., 1, -1] = True, False
        tags = set()
        if empty:  # a row with no allowed key
            allowed[..., -1, :] = False
            tags.add("empty-row")
        if dominant:  # disallowed scores that dominate their row
            scores = np.where(allowed, scores, scores + float(rng.uniform(800.0, 1200.0)))
            tags.add("dominant-masked")
        cases.append(Case("", f"random: scores {shape}", (scores, allowed), frozenset(tags)))
    return cases


MASKED_SOFTMAX_DIAGNOSES = (
    DiagnosisSpec(
        "zeroed_after_softmax", "Probabilities zeroed after the softmax",
        "Disallowed keys get zero, but the other weights of their row sum to less than one: the "
        "softmax ran over every key and the mask was applied to its probabilities afterwards.",
        "Exclude disallowed scores before normalising: replace them with -inf, then take the softmax.",
        "zeroed-after", _matches(*_zeroed_after_models()),
    ),
    DiagnosisSpec(
        "renormalised_after_softmax", "Zeroed after the softmax, then renormalised",
        "When a disallowed score dominates its row, the answer gives NaN, or zeros where a guard "
        "caught the 0 / 0: its softmax put all the weight on the disallowed key, the allowed weights "
        "underflowed to zero, and renormalising them divides zero by zero. Everywhere else the answer "
        "is right, as renormalising is on paper.",
        "Renormalising afterwards cannot recover weights that underflowed. Exclude the "
        "disallowed scores before the softmax instead.",
        "renormalised-after", _matches(*_renormalised_after_models(), tags=["dominant-masked"]),
    ),
    DiagnosisSpec(
        "normalised_over_whole_array", "Normalised over the whole array, not row by row",
        "The weights of the whole array sum to one instead of each row's: the softmax took its sum "
        "(and maybe its maximum) over every element, as it may for one row of scores.",
        "Each row is a distribution of its own: take the maximum and the sum over the last axis with "
        "axis=-1, keepdims=True, so that they broadcast back against the row.",
        "zeroed-after", _matches(*_whole_array_models()),
    ),
    DiagnosisSpec(
        "normalised_over_wrong_axis", "Normalised down the columns, not along the rows",
        "The weights of each column sum to one (or zero), not those of each row: the softmax's "
        "maximum and sum ran over axis 0 or axis -2, the queries or the batch, instead of the keys. "
        "For one row of scores axis 0 is the key axis, so the mistake shows only on arrays of rows.",
        "Take the maximum and the sum over the last axis, axis=-1 with keepdims=True: each row is one "
        "query's distribution over the keys.",
        "second-fixture", _matches(*_wrong_axis_models()),
    ),
    DiagnosisSpec(
        "scores_times_mask", "Scores multiplied by the mask",
        "Disallowed keys still get weight: multiplying a score by False (0) gives a score of 0, "
        "and exp(0) = 1 is not zero.",
        "A mask must remove a key from the softmax: use np.where(allowed, scores, -np.inf).",
        "times-mask", _matches(_scores_times_mask),
    ),
    DiagnosisSpec(
        "inverted_polarity", "Mask polarity inverted",
        "Only the disallowed keys get weight: the answer treats True as 'blocked'. Here True means "
        "'this key may be attended to'.",
        "Keep scores where allowed is True: np.where(allowed, scores, -np.inf).",
        "polarity", _matches(*_inverted_models()),
    ),
    DiagnosisSpec(
        "finite_fill_uniform_row", "A row with no allowed key comes out uniform",
        "A row with no allowed key gets weight 1/S on every key: a large finite fill (such as -1e9) "
        "leaves all the scores of such a row equal, so the softmax spreads over keys that were meant "
        "to be excluded.",
        "Fill with -inf and give a row with no allowed key all-zero weights (check row_max == -inf).",
        "fills", shows(_empty_rows_uniform, tags=["empty-row"]),
    ),
    DiagnosisSpec(
        "nan_for_empty_row", "NaN for a row with no allowed key",
        "A row with no allowed key comes out as NaN: its maximum is -inf, and -inf - (-inf) is NaN "
        "(or its sum of exponentials is 0, and 0 / 0 is NaN).",
        "Detect rows with no allowed key and return zeros for them, e.g. subtract 0 instead of a -inf "
        "maximum and divide only where the sum is positive.",
        "empty-rows", shows(_empty_rows_nan, tags=["empty-row"]),
    ),
)

MASKED_SOFTMAX = Exercise(
    name="masked_softmax",
    notebook=NOTEBOOK,
    signature="masked_softmax(scores, allowed) -> weights",
    points=3,
    reference=masked_softmax_reference,
    output=ArrayOutput("float"),
    public=masked_softmax_public,
    hidden=masked_softmax_hidden,
    diagnoses=MASKED_SOFTMAX_DIAGNOSES,
    stub_hint="exclude disallowed keys before the softmax; a row with no allowed key gives zeros",
)


# --- causal_mask --------------------------------------------------------------------------------


def _not_boolean(case: Case, got, expected) -> bool:
    return got.dtype != bool


MASK_NOT_BOOLEAN = DiagnosisSpec(
    "mask_not_boolean", "The mask is not boolean",
    "The mask holds numbers, not True/False. A 0/1 or 0/-inf number mask means different things in "
    "different libraries (kept, blocked, or added to the scores).",
    "Return a boolean array where True means allowed, e.g. from a comparison such as j <= i.",
    "polarity", shows(_not_boolean),
)


def causal_mask_reference(length: int) -> np.ndarray:
    return _reference_causal_mask(length)


CAUSAL_MASK = Exercise(
    name="causal_mask",
    notebook=NOTEBOOK,
    signature="causal_mask(length) -> (length, length) bool",
    points=1,
    reference=causal_mask_reference,
    output=ArrayOutput("bool"),
    public=lambda: numbered([
        Case("", "length 1", (1,)), Case("", "length 4", (4,)), Case("", "length 6", (6,)),
    ]),
    hidden=lambda rng: [Case("", f"length {n}", (int(n),)) for n in rng.integers(2, 17, size=4)],
    diagnoses=(
        DiagnosisSpec(
            "causal_upper_triangle", "Upper triangle instead of lower",
            "Each query is allowed to see itself and every later key, but none of the earlier ones: "
            "the triangle is the upper one.",
            "Row i is query i, column j is key j; allowed means j <= i, the lower triangle (np.tril).",
            "two-masks", _matches(lambda n: np.triu(np.ones((n, n), dtype=bool))),
        ),
        DiagnosisSpec(
            "causal_diagonal_excluded", "A query cannot see itself",
            "The diagonal is False: each query sees only strictly earlier keys, so the first query "
            "has no allowed key at all.",
            "A position may attend to itself: allowed is j <= i, not j < i.",
            "two-masks", _matches(lambda n: np.tril(np.ones((n, n), dtype=bool), k=-1)),
        ),
        DiagnosisSpec(
            "causal_inverted", "True marks the future",
            "True sits exactly on the future keys: this is a 'blocked' mask, the opposite polarity "
            "of the allowed mask asked for.",
            "Return True where the key may be attended to (j <= i); some libraries use the other "
            "polarity, so always state which one a mask has.",
            "polarity", _matches(lambda n: np.triu(np.ones((n, n), dtype=bool), k=1)),
        ),
        MASK_NOT_BOOLEAN,
    ),
    stub_hint="a boolean (length, length) array: row = query, column = key",
)


# --- cached_causal_mask: a batched decoding step, left padding and a cache ----------------------


def _decode_lengths(lengths, n_queries: int) -> tuple[np.ndarray, int]:
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0:
        raise ValueError(f"lengths must be a non-empty 1-D array of sequence lengths, got shape {lengths.shape}")
    if n_queries < 1 or lengths.min() < n_queries:
        raise ValueError(
            f"every sequence must hold its {n_queries} new tokens, but the lengths are {lengths.tolist()}: "
            "the new tokens are the last positions of every sequence, so n_queries <= min(lengths)"
        )
    return lengths, int(lengths.max())


def cached_causal_mask_reference(lengths, n_queries: int) -> np.ndarray:
    """(B, L, S) boolean with S = max(lengths): key j is real (j >= S - lengths[b], left padding) and
    at or before query i's position S - L + i (bottom-right alignment)."""
    lengths, s = _decode_lengths(lengths, n_queries)
    keys = np.arange(s)  # (S,)
    real = keys[None, :] >= s - lengths[:, None]  # (B, S): the padding comes first
    query_positions = s - n_queries + np.arange(n_queries)  # (L,): the last L positions
    causal = keys[None, :] <= query_positions[:, None]  # (L, S)
    return real[:, None, :] & causal[None, :, :]  # (B, L, S)


def _decode_parts(lengths, n_queries: int):
    """(lengths, S, key positions (S,), query positions (L,)) of a case."""
    lengths = np.asarray(lengths)
    s = int(lengths.max())
    return lengths, s, np.arange(s), s - n_queries + np.arange(n_queries)


def _decode_mask(real: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(B, S) real keys and (L, S) or (B, L, S) allowed keys combined into (B, L, S)."""
    return real[:, None, :] & allowed


def _left_real(lengths: np.ndarray, s: int) -> np.ndarray:
    return np.arange(s)[None, :] >= s - lengths[:, None]  # (B, S)


def _decode_top_left(lengths, n_queries: int) -> np.ndarray:
    lengths, s, keys, _ = _decode_parts(lengths, n_queries)
    return _decode_mask(_left_real(lengths, s), keys[None, :] <= np.arange(n_queries)[:, None])  # query i sees 0 .. i


def _decode_shifted_models():
    def one_fewer(lengths, n_queries):
        lengths, s, keys, positions = _decode_parts(lengths, n_queries)
        return _decode_mask(_left_real(lengths, s), keys[None, :] < positions[:, None])

    def one_more(lengths, n_queries):
        lengths, s, keys, positions = _decode_parts(lengths, n_queries)
        return _decode_mask(_left_real(lengths, s), keys[None, :] <= positions[:, None] + 1)

    return one_fewer, one_more


def _decode_padding_right(lengths, n_queries: int) -> np.ndarray:
    lengths, s, keys, positions = _decode_parts(lengths, n_queries)
    return _decode_mask(keys[None, :] < lengths[:, None], keys[None, :] <= positions[:, None])  # real tokens first


def _decode_padding_ignored(lengths, n_queries: int) -> np.ndarray:
    lengths, s, keys, positions = _decode_parts(lengths, n_queries)
    return _decode_mask(np.ones((lengths.size, s), dtype=bool), keys[None, :] <= positions[:, None])


def _decode_cache_blocked(lengths, n_queries: int) -> np.ndarray:
    lengths, s, keys, positions = _decode_parts(lengths, n_queries)
    new = (keys[None, :] >= s - n_queries) & (keys[None, :] <= positions[:, None])  # (L, S): new tokens only
    return _decode_mask(_left_real(lengths, s), new)


def _decode_padding_shifted_models():
    """The padding boundary one key off: the first real key blocked, or the last padding key allowed."""

    def first_real_blocked(lengths, n_queries):
        lengths, s, keys, positions = _decode_parts(lengths, n_queries)
        return _decode_mask(keys[None, :] > s - lengths[:, None], keys[None, :] <= positions[:, None])

    def one_padding_allowed(lengths, n_queries):
        lengths, s, keys, positions = _decode_parts(lengths, n_queries)
        return _decode_mask(keys[None, :] >= s - lengths[:, None] - 1, keys[None, :] <= positions[:, None])

    return first_real_blocked, one_padding_allowed


def _decode_positions_unpadded(lengths, n_queries: int) -> np.ndarray:
    """Query i of sequence b placed at lengths[b] - n_queries + i (its place without the padding),
    compared with key positions counted in the padded array."""
    lengths, s, keys, _ = _decode_parts(lengths, n_queries)
    positions = lengths[:, None] - n_queries + np.arange(n_queries)[None, :]  # (B, L)
    return _left_real(lengths, s)[:, None, :] & (keys[None, None, :] <= positions[:, :, None])


def _decode_padding_only(lengths, n_queries: int) -> np.ndarray:
    """The padding mask alone, repeated for every query: no causal part."""
    lengths, s, _, _ = _decode_parts(lengths, n_queries)
    return np.broadcast_to(_left_real(lengths, s)[:, None, :], (lengths.size, n_queries, s)).copy()


DECODE_MODELS = {
    "cache_top_left": (_decode_top_left,),
    "cache_padding_off_by_one": _decode_padding_shifted_models(),
    "cache_positions_unpadded": (_decode_positions_unpadded,),
    "cache_causal_part_missing": (_decode_padding_only,),
    "cache_off_by_one": _decode_shifted_models(),
    "cache_padding_on_right": (_decode_padding_right,),
    "cache_padding_ignored": (_decode_padding_ignored,),
    "cache_keys_blocked": (_decode_cache_blocked,),
}


def _top_left_on_full_sequences(case: Case, got, expected) -> bool:
    """Top-left rows on every sequence without padding, whatever the answer did with the padding."""
    if not isinstance(got, np.ndarray) or got.shape != expected.shape:
        return False
    lengths, n_queries = case.args
    full = np.asarray(lengths) == expected.shape[-1]  # (B,): the sequences of length S
    top_left = np.tril(np.ones(expected.shape[1:], dtype=bool))  # (L, S): query i sees 0 .. i
    return bool(full.any() and all(np.array_equal(got[b].astype(bool), top_left) for b in np.flatnonzero(full)))


def _same_for_every_sequence(case: Case, got, expected) -> bool:
    """One mask for every sequence, allowing a key that is padding in the shortest one."""
    if not isinstance(got, np.ndarray) or got.shape != expected.shape:
        return False
    lengths, n_queries = case.args
    g = got.astype(bool)
    padding = np.arange(g.shape[-1]) < g.shape[-1] - int(np.min(lengths))  # (S,): padding of the shortest
    return bool(padding.any() and (g == g[:1]).all() and g[0][:, padding].any())


def _axes_reordered(case: Case, got, expected) -> bool:
    """The right entries with the (B, L, S) axes in another order."""
    if not isinstance(got, np.ndarray) or got.ndim != 3 or got.shape == expected.shape:
        return False
    if sorted(got.shape) != sorted(expected.shape):
        return False
    for order in itertools.permutations(range(3)):
        moved = np.transpose(got, order)
        if moved.shape == expected.shape and np.array_equal(moved.astype(bool), expected):
            return True
    return False


def _decode_case(lengths: Sequence[int], n_queries: int, what: str = "") -> Case:
    lengths = np.array(lengths)
    text = f"lengths {lengths.tolist()} (left-padded to {int(lengths.max())}), {n_queries} new tokens"
    return Case("", f"{text}{what}", (lengths, int(n_queries)))


def cached_causal_mask_public() -> list[Case]:
    return numbered([
        _decode_case([5, 3, 4], 2),
        _decode_case([4, 7], 3),
        _decode_case([8, 5, 3, 8], 3, " (the third sequence is only its new tokens)"),
        _decode_case([2, 6, 4, 9, 5], 2),
    ])


# (batch, n_queries, range of S) of each hidden case. Every seed draws these and only the lengths
# differ: S, n_queries and the batch are three different numbers (so axes in another order show), at
# least two new tokens (so the diagonal off by one shows), one sequence of length S at a place drawn
# from the seed, the others shorter (so the padding shows), and S > n_queries + 1 (so the cache shows).
DECODE_HIDDEN = ((3, 2, (5, 11)), (2, 4, (7, 12)), (4, 3, (6, 10)), (5, 2, (12, 21)))


def cached_causal_mask_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for batch, n_queries, (low, high) in DECODE_HIDDEN:
        s = int(rng.integers(low, high))
        lengths = rng.integers(n_queries, s, size=batch)  # n_queries .. S - 1
        lengths[0] = s
        cases.append(_decode_case(lengths[rng.permutation(batch)].tolist(), n_queries))
    return cases


CACHED_CAUSAL_MASK = Exercise(
    name="cached_causal_mask",
    notebook=NOTEBOOK,
    signature="cached_causal_mask(lengths, n_queries) -> (batch, n_queries, max(lengths)) bool",
    points=1,
    reference=cached_causal_mask_reference,
    output=ArrayOutput("bool"),
    public=cached_causal_mask_public,
    hidden=cached_causal_mask_hidden,
    diagnoses=(
        DiagnosisSpec(
            "cache_top_left", "Top-left alignment: the queries placed at the start",
            "Query i sees keys 0 .. i, as if the new tokens were the first positions of the sequence "
            "(top-left alignment, what torch's is_causal does). In a decoding step they are the last "
            "ones: each query is blocked from keys of its own past, its own key included.",
            "Query i sits at position S - n_queries + i, with S = max(lengths); allow key j when "
            "j <= that position (bottom-right alignment).",
            "alignment", any_of(_matches(*DECODE_MODELS["cache_top_left"]), shows(_top_left_on_full_sequences)),
        ),
        DiagnosisSpec(
            "cache_off_by_one", "The diagonal is shifted by one",
            "Each query sees one key too few (its own key is blocked) or one too many (the key of the "
            "next token, its future): the boundary is off by one.",
            "Query i is at position S - n_queries + i, counting from 0, and may attend to itself: "
            "allow j <= S - n_queries + i, with <=, not < or + 1.",
            "alignment", _matches(*DECODE_MODELS["cache_off_by_one"]),
        ),
        DiagnosisSpec(
            "cache_causal_part_missing", "No causal part: the padding mask alone",
            "Every query of a sequence gets the same row: all its real keys, the later new tokens "
            "included. That is the padding mask repeated for each query; the causal part, which blocks "
            "each new token from the ones after it, is missing.",
            "Combine two masks with &: the padding one, (B, 1, S), and the causal one, (1, n_queries, S), "
            "True where j <= S - n_queries + i.",
            "two-masks", _matches(*DECODE_MODELS["cache_causal_part_missing"]),
        ),
        DiagnosisSpec(
            "cache_padding_off_by_one", "The padding boundary off by one",
            "The boundary between padding and real tokens is one key off: the first real key of a "
            "shorter sequence is blocked, or the last padding key before it is allowed. A sequence of "
            "length n, left-padded to S, has its real tokens at positions S - n .. S - 1.",
            "A key j of sequence b is real when j >= S - lengths[b] (>=, not >, and no - 1).",
            "two-masks", _matches(*DECODE_MODELS["cache_padding_off_by_one"]),
        ),
        DiagnosisSpec(
            "cache_positions_unpadded", "Query positions counted without the padding",
            "In a shorter sequence each query is placed at lengths[b] - n_queries + i, its place in the "
            "sequence without padding, while the keys are counted in the padded array of length S: the "
            "queries land too early and lose their own key and the keys just before it.",
            "Count queries and keys on the same axis, the padded one: query i sits at S - n_queries + i "
            "in every sequence, because the new tokens of every sequence end at position S - 1.",
            "alignment", _matches(*DECODE_MODELS["cache_positions_unpadded"]),
        ),
        DiagnosisSpec(
            "cache_padding_on_right", "The padding placed at the end instead of the start",
            "The keys allowed for a shorter sequence are its first lengths[b] positions: the answer "
            "treats the padding as coming after the real tokens. Here the sequences are left-padded: "
            "the real tokens are the last lengths[b] positions, so that the new tokens of every "
            "sequence end at the same place.",
            "A key j of sequence b is real when j >= S - lengths[b], not when j < lengths[b].",
            "empty-rows", _matches(*DECODE_MODELS["cache_padding_on_right"]),
        ),
        DiagnosisSpec(
            "cache_padding_ignored", "The padding is ignored",
            "Every sequence gets the same mask, whatever its length: the padding keys at the start of "
            "a shorter sequence are allowed, so its queries would put weight on tokens that do not "
            "exist.",
            "Combine two masks with &: the causal one, (n_queries, S), and a padding one, (B, S), "
            "True where j >= S - lengths[b]; insert the query axis into the padding mask: [:, None, :].",
            "two-masks", any_of(_matches(*DECODE_MODELS["cache_padding_ignored"]), shows(_same_for_every_sequence)),
        ),
        DiagnosisSpec(
            "cache_keys_blocked", "The cached keys are blocked",
            "Each query sees only the keys of the new tokens, up to itself: every cached key is False. "
            "The cache holds the keys of the earlier tokens, which are in the past of every query.",
            "Build the mask over all S positions, not over the new tokens alone: key j is allowed "
            "when it is real and j <= S - n_queries + i, cached keys included.",
            "alignment", _matches(*DECODE_MODELS["cache_keys_blocked"]),
        ),
        DiagnosisSpec(
            "cache_axes_order", "The axes in another order",
            "The entries are right but the axes are in another order: the mask must be "
            "(batch, n_queries, S), one row per query and one column per key, to broadcast against "
            "scores of shape (batch, n_queries, S).",
            "Build the padding mask as (B, 1, S) and the causal mask as (1, n_queries, S); their & "
            "broadcasts to (B, n_queries, S).",
            "padding-axis", shows(_axes_reordered),
        ),
        MASK_NOT_BOOLEAN,
    ),
    stub_hint="a boolean (B, n_queries, S) array, S = max(lengths): left padding, query i at S - n_queries + i",
)


# --- padding_mask -------------------------------------------------------------------------------


def padding_mask_reference(lengths: np.ndarray, max_length: int) -> np.ndarray:
    return _reference_padding_mask(lengths, max_length)


def _on_query_axis(case: Case, got, expected) -> bool:
    b, m = expected.shape
    g = got.astype(bool) if got.dtype != bool else got
    if g.shape == (b, m, 1):
        return bool(np.array_equal(g[..., 0], expected))
    if g.shape == (b, m, m) and m > 1:
        return bool(np.array_equal(g, np.broadcast_to(expected[:, :, None], (b, m, m))))
    return False


def _off_by_one_models():
    def one_more(lengths, m):
        return np.arange(m)[None, :] <= np.asarray(lengths)[:, None]

    def one_fewer(lengths, m):
        return np.arange(m)[None, :] < np.asarray(lengths)[:, None] - 1

    return one_more, one_fewer


def padding_mask_public() -> list[Case]:
    return numbered([
        Case("", "lengths [3, 1, 4], max_length 4", (np.array([3, 1, 4]), 4)),
        Case("", "lengths [0, 2], max_length 3 (an empty sequence)", (np.array([0, 2]), 3)),
        Case("", "lengths [5, 2, 6, 1], max_length 6", (np.array([5, 2, 6, 1]), 6)),
    ])


# (batch, max_length, an empty sequence, a full one) of each hidden case. Every seed draws these and
# only the lengths differ: each case holds partial sequences (0 < length < max_length), and the
# empty and full ones where asked, at a place drawn from the seed.
PADDING_HIDDEN = ((3, 6, True, False), (4, 8, False, True), (2, 5, False, False), (5, 10, True, True))


def padding_mask_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for batch, m, empty, full in PADDING_HIDDEN:
        lengths = rng.integers(1, m, size=batch)
        lengths[:2] = np.where([empty, full], [0, m], lengths[:2])
        lengths = lengths[rng.permutation(batch)]
        cases.append(Case("", f"lengths {lengths.tolist()}, max_length {m}", (lengths, m)))
    return cases


PADDING_MASK = Exercise(
    name="padding_mask",
    notebook=NOTEBOOK,
    signature="padding_mask(lengths, max_length) -> (batch, max_length) bool",
    points=1,
    reference=padding_mask_reference,
    output=ArrayOutput("bool"),
    public=padding_mask_public,
    hidden=padding_mask_hidden,
    diagnoses=(
        DiagnosisSpec(
            "padding_on_query_axis", "Padding applied to queries instead of keys",
            "The mask is shaped to broadcast along the key axis, (batch, L, 1): it would switch "
            "whole query rows on or off, while padded keys stay visible to every query.",
            "A padding mask says which keys are real. Return (batch, max_length); when combining it "
            "with scores (batch, L, S), insert the query axis: mask[:, None, :].",
            "padding-axis", shows(_on_query_axis),
        ),
        DiagnosisSpec(
            "padding_inverted", "True marks the padding",
            "True sits on the padding positions: this is a 'blocked' mask, the opposite of the "
            "allowed mask asked for.",
            "Return True for real tokens: position j < lengths[b].",
            "polarity", _matches(lambda lengths, m: ~padding_mask_reference(lengths, m)),
        ),
        DiagnosisSpec(
            "padding_off_by_one", "Off by one at the end of each sequence",
            "Each row has one real token too many or too few: a sequence of length n has real "
            "tokens at positions 0 .. n - 1.",
            "Use position j < lengths[b] (positions start at 0).",
            "two-masks", _matches(*_off_by_one_models()),
        ),
        MASK_NOT_BOOLEAN,
    ),
    stub_hint="a boolean (batch, max_length) array, True for real tokens",
)


# --- leaks_future: the causality test, for a step that decodes with a cache ---------------------

LEAKING_MASKS = frozenset({"none", "inverted", "next", "last", "early", "faint"})
_LAYER_TEXT = {
    "causal": "a causal layer", "causal-rounding": "a causal layer whose outputs carry rounding noise",
    "none": "a layer with no mask", "inverted": "a layer with an inverted causal mask",
    "next": "a layer whose mask is off by one (it sees the next token)",
    "last": "a causal layer that also lets every position see the last one",
    "early": "a causal layer that lets its first returned position see the one after it",
    "faint": "a causal layer whose outputs feel the next input faintly (a thousandth of it)",
}


def layer_leaks(mask: str, n_queries: int) -> bool:
    """Whether a probe layer leaks: its mask lets a later position in, and it returns an earlier one.

    A step that returns one position (the newest) has no earlier output to move, whatever its mask.
    """
    return mask in LEAKING_MASKS and n_queries > 1


def _layer_case(mask: str, seed: int, length: int, n_queries: int, d_model: int) -> Case:
    shape = "square" if n_queries == length else "cache"
    kind = "leaks" if layer_leaks(mask, n_queries) else "causal" if mask not in LEAKING_MASKS else "one-step"
    tags = {kind, mask, shape}
    returned = ("every position" if shape == "square" else "the newest position only" if n_queries == 1
                else f"the last {n_queries} positions")
    return Case("", f"{_LAYER_TEXT[mask]}, length {length}, returns {returned}, d_model {d_model}",
                (probe("layer", d=d_model, seed=seed, mask=mask, queries=n_queries), length, n_queries, d_model),
                frozenset(tags))


def _probe_input(length: int, d_model: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(length, d_model))  # (length, d_model)


def leaks_future_reference(layer: str, length: int, n_queries: int, d_model: int) -> bool:
    """True when changing the input at some position t moves a returned output at a position before t.

    Output row r is position length - n_queries + r, so the rows before position t are the first
    t - (length - n_queries) of them.
    """
    fn = build_probe(layer)
    rng = np.random.default_rng(1)
    x = _probe_input(length, d_model)
    first = length - n_queries  # position of output row 0
    base = fn(x)  # (n_queries, d_model)
    for t in range(first + 1, length):  # a change before the first returned position has no earlier row
        changed = x.copy()
        changed[t] += rng.normal(size=d_model)
        rows = t - first  # output rows at positions first .. t - 1
        if not np.allclose(fn(changed)[:rows], base[:rows], rtol=1e-7, atol=1e-9):
            return True
    return False


def _perturb_last_only(layer: str, length: int, n_queries: int, d_model: int) -> bool:
    fn = build_probe(layer)
    x = _probe_input(length, d_model)
    changed = x.copy()
    changed[-1] += 1.0
    return not np.allclose(fn(changed)[:-1], fn(x)[:-1])


def _compare_exactly(layer: str, length: int, n_queries: int, d_model: int) -> bool:
    fn = build_probe(layer)
    x = _probe_input(length, d_model)
    first = length - n_queries
    base = fn(x)
    for t in range(first + 1, length):
        changed = x.copy()
        changed[t] += 1.0
        if not np.array_equal(fn(changed)[:t - first], base[:t - first]):
            return True
    return False


def _changes_accumulate(layer: str, length: int, n_queries: int, d_model: int) -> bool:
    """The perturbed input is the input itself (changed = x), so each change stays for the next t,
    compared with the outputs of the untouched input."""
    fn = build_probe(layer)
    x = _probe_input(length, d_model)
    first = length - n_queries
    base = fn(x)
    for t in range(first + 1, length):
        x[t] += 1.0  # what changed[t] += 1 does when changed is x
        if not np.allclose(fn(x)[:t - first], base[:t - first]):
            return True
    return False


def _always(answer: bool, tag: str, expected: bool):
    """Detect an answer that returns ``answer`` on every case tagged ``tag`` (whose truth is ``expected``)."""

    def detect(records: Sequence[Record]) -> list[str]:
        tagged = [r for r in records if tag in r.case.tags]
        if len(tagged) < 2 or any(r.got is not answer for r in tagged) or answer == expected:
            return []
        return [r.case.id for r in tagged if not r.passed]

    return detect


def _whole_output_compared(records: Sequence[Record]) -> list[str]:
    """Every layer called leaky, a causal one and one that returns only its newest position included:
    a change at t always moves the output at t and after it, which a comparison of every row sees."""
    one_step = [r for r in records if "one-step" in r.case.tags]
    if not one_step or any(r.got is not True for r in one_step):
        return []
    return _always(True, "causal", False)(records)


def _causal_cache_called_leaky(records: Sequence[Record]) -> list[str]:
    """Right on every layer that returns every position, and calls causal cache steps leaky,
    one without rounding noise among them (an exact comparison calls only the noisy one leaky)."""
    square = [r for r in records if "square" in r.case.tags]
    if not square or not all(r.passed for r in square):
        return []
    called = [r for r in records if {"cache", "causal"} <= r.case.tags and r.got is True]
    if not any("causal-rounding" not in r.case.tags for r in called):
        return []
    return [r.case.id for r in called]


def leaks_future_public() -> list[Case]:
    return numbered([
        _layer_case("causal", 11, 5, 5, 4),
        _layer_case("causal", 16, 7, 3, 4),
        _layer_case("none", 12, 6, 2, 4),
        _layer_case("causal-rounding", 13, 6, 4, 4),
        _layer_case("early", 14, 7, 3, 6),
        _layer_case("last", 15, 5, 5, 4),
        _layer_case("none", 17, 6, 1, 4),
        _layer_case("causal", 18, 6, 2, 4),
        _layer_case("faint", 19, 7, 4, 4),
    ])


# (mask, length, n_queries) of every hidden layer, d_model 6: two that return every position, the
# others the last four of eight. Square and cache steps both hold causal and leaky layers.
HIDDEN_LAYERS = (
    ("causal", 7, 7), ("none", 7, 7), ("causal", 8, 4), ("causal-rounding", 8, 4), ("none", 8, 4),
    ("inverted", 8, 4), ("next", 8, 4), ("last", 8, 4), ("early", 8, 4), ("faint", 8, 4),
)


def leaks_future_hidden(rng: np.random.Generator) -> list[Case]:
    """One layer of each kind, in an order drawn from the seed: where a case stands says nothing.

    Every seed draws the same kinds and shapes; only the layers' weights and the order differ.
    """
    return [_layer_case(mask, int(rng.integers(1000, 10**6)), length, n_queries, 6)
            for mask, length, n_queries in (HIDDEN_LAYERS[i] for i in rng.permutation(len(HIDDEN_LAYERS)))]


LEAKS_FUTURE = Exercise(
    name="leaks_future",
    notebook=NOTEBOOK,
    signature="leaks_future(layer, length, n_queries, d_model) -> bool",
    points=2,
    reference=leaks_future_reference,
    output=BoolOutput(),
    public=leaks_future_public,
    hidden=leaks_future_hidden,
    diagnoses=(
        DiagnosisSpec(
            "output_rows_as_positions", "Output rows read as positions 0, 1, ...",
            "The answer is right on layers that return every position and calls causal layers leaky "
            "when they return only the last positions. Row r of the output is position "
            "length - n_queries + r, not position r: after a change at t, the first t rows include "
            "positions at or after t, which a causal layer may move.",
            "Output row r is position length - n_queries + r. After changing the input at position t, "
            "compare only the rows before t: out[:t - (length - n_queries)] (none when that is 0 or less).",
            "alignment", _causal_cache_called_leaky,
        ),
        DiagnosisSpec(
            "perturbs_only_last_token", "Only the last token is changed",
            "The answer misses a leak from a position other than the last: it changes only the last "
            "token, so a layer whose first returned position can see the next one passes as causal.",
            "Change each position t in turn and compare the output rows before t each time.",
            "causality-test", matches_model(_perturb_last_only),
        ),
        DiagnosisSpec(
            "compares_last_output", "The last output is compared",
            "The answer calls every layer leaky, causal ones included, even a step that returns only its "
            "newest position: the outputs at t and after it may depend on the input at t, so comparing "
            "them (the last one included) after a change at t proves nothing.",
            "After changing the input at position t, compare only the outputs at positions before t. "
            "Those are the ones a causal layer must keep fixed.",
            "causality-test", _whole_output_compared,
        ),
        DiagnosisSpec(
            "perturbations_accumulate", "Each change stays in the input",
            "Causal steps that return three or more positions are called leaky, and every other layer is "
            "right. That is what changing the input itself does (changed = x makes no copy: changed[t] "
            "+= 1 changes x too): the change at t is still there when t + 1 is tried, so the row at t "
            "differs from the untouched output, although nothing later reached it.",
            "Copy before each change: changed = x.copy(); changed[t] += 1; compare layer(changed) with "
            "layer(x) on the rows before t.",
            "causality-test", matches_model(_changes_accumulate),
        ),
        DiagnosisSpec(
            "leak_tolerance_too_loose", "A tolerance that hides a faint leak",
            "Every layer is right but those whose earlier outputs feel a later input faintly (a "
            "thousandth of it), called causal: their outputs move by about 1e-3, and the answer's "
            "tolerance is as large as that. A leak of any size breaks causality; rounding moves "
            "outputs by about 1e-16, so a tolerance only has to be above that.",
            "Compare with np.allclose's defaults, or np.abs(a - b).max() > 1e-9.",
            "causality-test", wrong_only_on("faint", False),
        ),
        DiagnosisSpec(
            "exact_float_equality", "Outputs compared for exact equality",
            "A causal layer whose outputs carry rounding noise is called leaky: its earlier outputs "
            "moved by about 1e-16 when a later input changed, and an exact comparison (== or "
            "np.array_equal) counts that as a leak.",
            "Compare with a tolerance: np.allclose(a, b), or np.abs(a - b).max() > 1e-9. A real leak "
            "moves the outputs by far more than rounding does.",
            "causality-test", matches_model(_compare_exactly),
        ),
        DiagnosisSpec(
            "input_changed_in_place", "No change is ever seen",
            "The answer finds no leak even in a layer with no mask at all, where every output depends on "
            "every input: no change it makes ever reaches a compared output. Three ways to get there: the "
            "perturbed input is the same array as the original and both calls come after the change "
            "(changed = x; changed[t] += 1 also changes x), the change is too small to see, or it is made "
            "only at positions before every returned output.",
            "Make a copy before changing it (changed = x.copy()), change each position t after the first "
            "returned one by a clear amount (+1), and compare the outputs of x and of the copy.",
            "causality-test", _always(False, "leaks", True),
        ),
    ),
    stub_hint="change one input at a time and compare the output rows of earlier positions, with a tolerance",
)


# --- mask_polarity: probe what the numbers of a key-padding mask mean -----------------------------

CONVENTIONS = ("attend", "blocked", "additive")


def _attention_case(polarity: str, scale: float, dtype: str, empty: str) -> Case:
    sharp = scale > 1.0
    text = (f"an attention function in {dtype}, {'sharp' if sharp else 'mild'} scores, rows with no allowed "
            f"key give {empty}")
    return Case("", text, (probe("attention", polarity=polarity, scale=scale, dtype=dtype, empty=empty, keys=True),),
                frozenset({"sharp" if sharp else "mild", polarity}))


def mask_polarity_reference(attention_fn: str) -> str:
    return str(probe_fields(attention_fn)["polarity"])


def mask_polarity_public() -> list[Case]:
    return numbered([
        _attention_case("attend", 1.0, "float64", "nan"),
        _attention_case("blocked", 1.0, "float32", "zeros"),
        _attention_case("additive", 1.0, "float64", "zeros"),
        _attention_case("attend", 60.0, "float64", "uniform"),
        _attention_case("blocked", 1.0, "float16", "uniform"),
        _attention_case("additive", 60.0, "float32", "nan"),
        _attention_case("blocked", 1.0, "float64", "nan"),
    ])


def mask_polarity_hidden(rng: np.random.Generator) -> list[Case]:
    """Three functions of each convention, in an order drawn from the seed.

    Every convention comes with the same precisions and empty-row policies, so neither tells the
    convention; every seed draws the same kinds, and only the third sharpness and the order differ.
    """
    kinds = [(1.0, "float16", "uniform"), (60.0, "float32", "nan"), (None, "float64", "zeros")]
    cases = [
        _attention_case(polarity, float(rng.uniform(30.0, 80.0)) if scale is None else scale, dtype, empty)
        for polarity in CONVENTIONS for scale, dtype, empty in kinds
    ]
    return [cases[i] for i in rng.permutation(len(cases))]


def _empty_row_reading(probe_value: float, nan_only: bool, three_way: bool):
    """A reading from one row whose keys all carry ``probe_value``: NaN or zeros taken as 'no key allowed'.

    Libraries differ on such a row (NaN, zeros, or uniform weights from a large finite fill), so the
    reading is wrong on every function that gives it uniform weights.
    """

    def read(attention_fn: str) -> str:
        fn = build_probe(attention_fn)
        value = np.array([[[1.0], [2.0]]])  # (1, 2, 1): uniform weights give 1.5

        def empty(number: float) -> bool:
            out = np.asarray(fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), value, np.full((1, 2), number)), dtype=float)
            return bool(np.isnan(out).any() or (not nan_only and np.allclose(out, 0.0)))

        if three_way:
            if empty(0.0):
                return "attend"
            return "blocked" if empty(1.0) else "additive"
        if probe_value == 0.0:
            return "attend" if empty(0.0) else "blocked"
        return "blocked" if empty(1.0) else "attend"

    return read


def _ones_row_then_probe(nan_only: bool):
    """"blocked" when a row of ones comes back empty (NaN, or zeros), else a probe of 0 and 1.0:
    "additive" when both keys keep weight, "attend" when only the key marked 1.0 does."""

    def read(attention_fn: str) -> str:
        fn = build_probe(attention_fn)

        def weights(mask: list[float]) -> np.ndarray:
            out = fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None], np.array([mask]))
            return np.asarray(out, dtype=float)[0, 0]  # (2,): one query's weights

        row = weights([1.0, 1.0])
        if np.isnan(row).any() or (not nan_only and np.allclose(row, 0.0)):
            return "blocked"
        w = np.nan_to_num(weights([0.0, 1.0]))
        return "additive" if (w > 1e-6).all() else "attend"

    return read


EMPTY_ROW_READINGS = tuple(
    _empty_row_reading(v, nan_only, three_way)
    for v, three_way in ((0.0, False), (1.0, False), (0.0, True)) for nan_only in (False, True)
) + tuple(_ones_row_then_probe(nan_only) for nan_only in (False, True))


def _sharp_only(records: Sequence[Record]) -> list[str]:
    """Right on every function with mild scores, wrong on some with sharp ones."""
    mild = [r for r in records if "mild" in r.case.tags]
    if not mild or not all(r.passed for r in mild):
        return []
    return [r.case.id for r in records if "sharp" in r.case.tags and not r.passed and r.got is not None]


def _boolean_inverted(records: Sequence[Record]) -> list[str]:
    """"attend" and "blocked" swapped on every boolean mask, the additive ones right."""
    opposite = {"attend": "blocked", "blocked": "attend"}
    boolean = [r for r in records if r.expected in opposite]
    if len(boolean) < 2 or any(r.got != opposite[r.expected] for r in boolean):
        return []
    if not all(r.passed for r in records if r.expected == "additive"):
        return []
    return [r.case.id for r in boolean]


def _additive_blocked_alike(records: Sequence[Record]) -> list[str]:
    """One word for every additive and every "nonzero blocks" mask, and "attend" right."""
    if not all(r.passed for r in records if r.expected == "attend"):
        return []
    alike = [r for r in records if r.expected in ("additive", "blocked")]
    words = {r.got for r in alike}
    if len(words) != 1 or not words <= {"additive", "blocked"}:
        return []
    return [r.case.id for r in alike if not r.passed]


def _additive_called_attend(records: Sequence[Record]) -> list[str]:
    """Right on every boolean mask, "attend" for every additive one."""
    if not all(r.passed for r in records if r.expected != "additive"):
        return []
    additive = [r for r in records if r.expected == "additive"]
    if not additive or any(r.got != "attend" for r in additive):
        return []
    return [r.case.id for r in additive]


MASK_POLARITY = Exercise(
    name="mask_polarity",
    notebook=NOTEBOOK,
    signature='mask_polarity(attention_fn) -> "attend", "blocked" or "additive"',
    points=2,
    reference=mask_polarity_reference,
    output=ChoiceOutput(CONVENTIONS),
    public=mask_polarity_public,
    hidden=mask_polarity_hidden,
    diagnoses=(
        DiagnosisSpec(
            "polarity_from_random_inputs", "Read from random queries and keys",
            "The answer is right when the scores are mild and wrong when the function sharpens them: "
            "with random queries and keys, an allowed key can get a weight near zero from its score "
            "alone, and then it looks blocked.",
            "Make the scores tell nothing: a query and keys of zeros give every allowed key the same "
            "score, so only the mask changes the weights. With value = np.eye(S) (one per batch "
            "element) the output rows are the weights.",
            "probe", _sharp_only,
        ),
        DiagnosisSpec(
            "polarity_from_empty_rows", "Read from a row where every key is masked",
            "The answer is wrong on the functions that give a row with no allowed key uniform weights, "
            "and its answers are what a reading of such a row gives: a mask of all zeros (or all ones) "
            "taken to block every key when the output is NaN or zero. Libraries differ on that row: "
            "NaN, zeros, or uniform weights from a large finite fill. Uniform weights look like "
            "'every key allowed', so the reading fails exactly there.",
            "Keep at least one key on each side: a row with one key marked 0 and one marked 1.0 "
            "(and value = np.eye(S)) shows which of the two gets weight, whatever the function does "
            "with empty rows.",
            "probe", matches_model(*EMPTY_ROW_READINGS),
        ),
        DiagnosisSpec(
            "polarity_read_inverted", "The reading is inverted",
            "Every boolean answer is the opposite of the function's convention: the answer says "
            "'attend' exactly when a nonzero number blocks a key.",
            "If the keys with a nonzero number get weight and the keys with 0 get none, nonzero means "
            "'attend'; if the keys with a nonzero number get none, it means 'blocked'.",
            "probe", _boolean_inverted,
        ),
        DiagnosisSpec(
            "additive_blocked_alike", "Additive and 'nonzero blocks' not told apart",
            "The answer gives one word for additive masks and for masks where a nonzero number blocks "
            "a key. A probe of 0 and -inf cannot separate them: added to the scores, 0 keeps a key and "
            "-inf removes it, exactly what 0 and 'nonzero' do in a blocking mask.",
            "Put a finite nonzero number such as 1.0 in the probe mask. Added to a score it shifts "
            "that key's weight (e : 1 against a key with 0) but leaves it above zero; read as "
            "'nonzero blocks' it removes the key.",
            "probe", _additive_blocked_alike,
        ),
        DiagnosisSpec(
            "additive_called_attend", "A shifted weight read as 'allowed'",
            "Additive masks are called 'attend': the key with a positive number got most of the "
            "weight, but the key with 0 kept some. A boolean mask gives a blocked key exactly 0; an "
            "added number only shifts the weights.",
            "Look for exact zeros, not for the larger weight: a key that a boolean mask blocks gets 0 "
            "(below 1e-3, say). If the keys with 0 and with 1.0 both keep weight, the mask was added "
            "to the scores.",
            "probe", _additive_called_attend,
        ),
    ),
    stub_hint="call attention_fn on a tiny case with a key mask of a few numbers and read which keys get weight",
)
