"""Read an attention function's mask conventions off its weights, not off its documentation.

With query = key = 0 every score is 0, so the mask alone decides the softmax; with value = the
(S, S) identity, output row i *is* weight row i. Four tiny cases then say what a library does:

- boolean mask [[T, T, F], [T, F, F]]: True = attend gives rows [1/2, 1/2, 0] and [1, 0, 0];
  True = blocked gives [0, 0, 1] and [0, 1/2, 1/2]; a mask added as numbers (True = +1) gives
  softmax([1, 1, 0]);
- float mask [[0, 0, ln 3], [0, ln 3, 0]]: added to the scores it gives [0.2, 0.2, 0.6]; read as
  boolean it gives [0, 0, 1] (nonzero = attend) or [1/2, 1/2, 0] (nonzero = blocked);
- the library's own causal switch with L = 2 queries and S = 4 keys: top-left lets query i see
  keys 0..i, bottom-right keys 0..i + S - L;
- a row with no allowed key (built with the polarity found above): zeros, uniform 1/S, or NaN.

The probe knows no library: it calls any function of the form :class:`AttentionFn`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lessonlib._checks import check_callable, check_flag, check_real
from lessonlib.attention import softmax

# The words the probe reports; every row of lessonlib.masks.MASK_CONVENTIONS uses them.
TRUE_MEANS = ("attend", "blocked", "added (True = +1)", "ignored", "refused", "unclear")
FLOAT_MASK = (
    "added to scores",
    "read as boolean (nonzero = attend)",
    "read as boolean (nonzero = blocked)",
    "ignored",
    "refused",
    "unclear",
)
CAUSAL_ALIGNMENT = ("top-left", "bottom-right", "ignored", "refused", "not built in", "unclear")
FULLY_MASKED_ROW = ("zeros", "uniform", "nan", "unclear", "not measured")
CONVENTION_FIELDS = ("true_means", "float_mask", "causal_alignment", "fully_masked_row")

_LN3 = math.log(3.0)
_BOOL_MASK = np.array([[True, True, False], [True, False, False]])  # (L, S) = (2, 3)
_FLOAT_MASK = np.array([[0.0, 0.0, _LN3], [0.0, _LN3, 0.0]])  # (2, 3)
_CAUSAL_SHAPE = (2, 4)  # (L, S) with L < S, so the two alignments differ


class AttentionFn(Protocol):
    """Any attention in NumPy form: query (L, E), key (S, E), value (S, D) -> output (L, D).

    ``mask`` is None, or an array of shape (L, S) (or (S,) for a key-padding argument), boolean
    or float64, handed to the library's mask argument unchanged in meaning. ``causal`` turns on
    the library's own causal switch; an adapter for an API that has none raises
    NotImplementedError.
    """

    def __call__(
        self,
        query: np.ndarray,
        key: np.ndarray,
        value: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        causal: bool = False,
    ) -> np.ndarray: ...


@dataclass(frozen=True)
class MaskSemantics:
    """What one attention function did with each probe case.

    ``evidence`` maps each case ("boolean", "float", "causal", "fully masked") to the weight
    rows it produced, (L, S), or to the error it raised.
    """

    true_means: str  # one of TRUE_MEANS
    float_mask: str  # one of FLOAT_MASK
    causal_alignment: str  # one of CAUSAL_ALIGNMENT
    fully_masked_row: str  # one of FULLY_MASKED_ROW
    evidence: dict[str, np.ndarray | str] = field(default_factory=dict, compare=False, repr=False)

    def differences(self, convention: object) -> dict[str, tuple[str, str]]:
        """Fields where a table row (anything with the four fields) disagrees: name -> (row, probed)."""
        return {
            name: (getattr(convention, name), getattr(self, name))
            for name in CONVENTION_FIELDS
            if getattr(convention, name) != getattr(self, name)
        }


def _uniform_over(allowed: np.ndarray) -> np.ndarray:
    """(L, S) weights spread evenly over the allowed keys of each row (every row has one)."""
    allowed = allowed.astype(np.float64)  # (L, S)
    return allowed / allowed.sum(axis=-1, keepdims=True)


def _run(fn: AttentionFn, shape: tuple[int, int], mask: np.ndarray | None, causal: bool) -> np.ndarray:
    """Weights (L, S) of ``fn`` with query = key = 0 and value = identity."""
    n_queries, n_keys = shape
    query = np.zeros((n_queries, n_keys))  # (L, E) with E = S: some APIs want d_v == d_k
    key = np.zeros((n_keys, n_keys))  # (S, E)
    value = np.eye(n_keys)  # (S, S): output row i = weight row i
    return np.asarray(fn(query, key, value, mask=mask, causal=causal), dtype=np.float64)


def _classify(weights: np.ndarray, candidates: dict[str, np.ndarray], atol: float) -> str:
    """Name of the first candidate the weights match (NaN matches NaN), else "unclear"."""
    for name, expected in candidates.items():
        if np.allclose(weights, expected, rtol=0.0, atol=atol, equal_nan=True):
            return name
    return "unclear"


def _case(
    evidence: dict[str, np.ndarray | str],
    name: str,
    fn: AttentionFn,
    shape: tuple[int, int],
    candidates: dict[str, np.ndarray],
    atol: float,
    *,
    mask: np.ndarray | None = None,
    causal: bool = False,
) -> str:
    """Run one case, store what it gave in ``evidence``, and name the behaviour."""
    try:
        weights = _run(fn, shape, mask, causal)
    except NotImplementedError as exc:
        evidence[name] = f"NotImplementedError: {exc}"
        return "not built in"
    except Exception as exc:  # the library refused the input; that is a finding, not a failure
        evidence[name] = f"{type(exc).__name__}: {exc}"
        return "refused"
    if weights.shape != shape:  # a broken adapter, not a finding about the library
        raise ValueError(f"the attention function returned shape {weights.shape} in the {name!r} "
                         f"case, expected (L, S) = {shape}")
    evidence[name] = weights
    return _classify(weights, candidates, atol)


def _for_argument(mask: np.ndarray, key_only: bool) -> np.ndarray:
    """The (L, S) probe mask, or its first row (S,) for a key-padding argument."""
    return mask[0] if key_only else mask


def _seen_by_queries(mask: np.ndarray, key_only: bool) -> np.ndarray:
    """(L, S): what each query sees; with a key-padding argument every query sees the first row."""
    return np.broadcast_to(_for_argument(mask, key_only), mask.shape)


def probe_mask_semantics(attention_fn: AttentionFn, *, key_only: bool = False, atol: float = 1e-3) -> MaskSemantics:
    """Run the four probe cases through ``attention_fn`` and report its conventions as data.

    ``key_only``: the mask argument holds one entry per key, shape (S,), as a key-padding mask
    does; the probe then uses the first row of each (L, S) case for every query.
    ``atol``: how close weights must be to a candidate pattern (loose enough for float16).
    """
    check_callable(attention_fn, "attention_fn")
    key_only = check_flag(key_only, "key_only")
    atol = check_real(atol, "atol", positive=True)
    evidence: dict[str, np.ndarray | str] = {}
    shape = _BOOL_MASK.shape
    as_rows = _seen_by_queries(_BOOL_MASK, key_only)  # (L, S)
    true_means = _case(evidence, "boolean", attention_fn, shape, {
        "attend": _uniform_over(as_rows),
        "blocked": _uniform_over(~as_rows),
        "added (True = +1)": softmax(as_rows.astype(np.float64)),
        "ignored": _uniform_over(np.ones(shape, bool)),
    }, atol, mask=_for_argument(_BOOL_MASK, key_only))

    floats = _seen_by_queries(_FLOAT_MASK, key_only)  # (L, S)
    float_mask = _case(evidence, "float", attention_fn, shape, {
        "added to scores": softmax(floats),
        "read as boolean (nonzero = attend)": _uniform_over(floats != 0),
        "read as boolean (nonzero = blocked)": _uniform_over(floats == 0),
        "ignored": _uniform_over(np.ones(shape, bool)),
    }, atol, mask=_for_argument(_FLOAT_MASK, key_only))

    n_q, n_k = _CAUSAL_SHAPE
    ones = np.ones(_CAUSAL_SHAPE, bool)
    causal_alignment = _case(evidence, "causal", attention_fn, _CAUSAL_SHAPE, {
        "top-left": _uniform_over(np.tril(ones)),  # query i sees keys 0..i
        "bottom-right": _uniform_over(np.tril(ones, k=n_k - n_q)),  # query i sees keys 0..i + S - L
        "ignored": _uniform_over(ones),
    }, atol, causal=True)

    fully_masked_row = _probe_fully_masked(evidence, attention_fn, true_means, float_mask, key_only, atol)
    return MaskSemantics(true_means, float_mask, causal_alignment, fully_masked_row, evidence)


def _probe_fully_masked(
    evidence: dict[str, np.ndarray | str],
    fn: AttentionFn,
    true_means: str,
    float_mask: str,
    key_only: bool,
    atol: float,
) -> str:
    """Row 0 has no allowed key; row 1 allows key 0 only (with ``key_only`` every row is empty).

    The mask is built in the polarity the boolean case found; failing that, as an additive
    float mask with -inf, if floats are added; otherwise the case is "not measured".
    """
    shape = _BOOL_MASK.shape
    allowed = np.zeros(shape, bool)  # (L, S)
    if not key_only:
        allowed[1, 0] = True
    if true_means in ("attend", "blocked"):
        mask = allowed if true_means == "attend" else ~allowed
    elif float_mask == "added to scores":
        mask = np.where(allowed, 0.0, -np.inf)
    else:
        evidence["fully masked"] = "not measured: no mask form whose meaning the probe found"
        return "not measured"
    n_keys = shape[1]

    def pattern(row0: np.ndarray) -> np.ndarray:
        """(L, S) weights expected: ``row0`` for every empty row, [1, 0, ...] for row 1 if it is not."""
        rows = np.tile(row0, (shape[0], 1))  # (L, S)
        if not key_only:
            rows[1] = np.eye(n_keys)[0]
        return rows

    return _case(evidence, "fully masked", fn, shape, {
        "zeros": pattern(np.zeros(n_keys)),
        "uniform": pattern(np.full(n_keys, 1.0 / n_keys)),
        "nan": pattern(np.full(n_keys, np.nan)),
    }, atol, mask=_for_argument(mask, key_only))
