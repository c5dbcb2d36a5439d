"""Boolean attention masks. True always means *allowed*: this key may be attended to.

Shapes: a structural mask (causal, window) is (L, S); a padding mask is (B, S) and must
broadcast over queries, so :func:`combine_masks` places it as (B, 1, S) or (B, 1, 1, S).
Offsets are always key position - query position (as in lessonlib.position): negative means
the key is in the query's past, so causal keeps offset <= 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from lessonlib._checks import (
    array_bytes,
    as_allowed_mask,
    as_int_array,
    broadcast_shape,
    check_choice,
    check_flag,
    check_positive_int,
    refuse_oversized,
)

# Where a block of L queries sits among S keys when L != S: query 0 at key position 0
# ("top-left", torch is_causal and JAX) or the queries as the last L positions ("bottom-right").
Align = Literal["top-left", "bottom-right"]
ALIGNMENTS: tuple[str, ...] = get_args(Align)


def padding_mask(lengths: np.ndarray | list[int], max_length: int) -> np.ndarray:
    """(batch, max_length) boolean, True for real tokens: position j < lengths[b]."""
    max_length = check_positive_int(max_length, "max_length")
    lengths = as_int_array(lengths, "lengths", what="integers, one length per sequence")
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D, one length per sequence, got shape {lengths.shape}")
    outside = (lengths < 0) | (lengths > max_length)  # (B,)
    if np.any(outside):
        raise ValueError(f"every length must lie in 0..{max_length}, got {lengths[outside][:8].tolist()}"
                         f"{' and more' if np.count_nonzero(outside) > 8 else ''} among the lengths")
    refuse_oversized(array_bytes((lengths.size, max_length), bool) + array_bytes((max_length,), np.int64),
                     f"padding_mask of {lengths.size} lengths with max_length={max_length}",
                     "Use a smaller batch or a shorter max_length.")
    return np.arange(max_length)[None, :] < lengths[:, None]  # (B, max_length)


def query_start(n_queries: int, n_keys: int, align: Align | None, what: str = "mask") -> int:
    """Position among the keys of query 0: 0 for "top-left", S - L for "bottom-right".

    Equal lengths need no ``align`` (both give 0); different lengths refuse a missing one,
    naming ``what`` the placement is for.
    """
    if align is not None:
        check_choice(align, "align", ALIGNMENTS)
    if n_queries == n_keys:
        return 0
    if align is None:
        raise ValueError(
            f"a {what} for {n_queries} queries and {n_keys} keys needs an explicit align: "
            "'top-left' (query i is position i, as torch is_causal and JAX) or 'bottom-right' "
            f"(the queries are the last {n_queries} positions, as when decoding with a cache)"
        )
    return 0 if align == "top-left" else n_keys - n_queries


def key_offsets(
    n_queries: int, n_keys: int | None = None, *, align: Align | None = None, what: str = "mask"
) -> np.ndarray:
    """(L, S) integer offsets: key position - query position (negative = the key is in the past).

    Query i sits at position i + :func:`query_start` (n_queries, n_keys, align); key j at j.
    """
    return _offsets(n_queries, n_keys, align, what, bytes_per_pair=8)


def _offsets(n_queries: object, n_keys: object, align: object, what: object, *, bytes_per_pair: int,
             way_out: str = "Use shorter sequences.", holds: str = "") -> np.ndarray:
    """:func:`key_offsets`, refused before it allocates when ``bytes_per_pair`` per (query, key) would not fit.

    ``bytes_per_pair`` counts what the caller holds at once per pair: 8 for the offsets themselves,
    plus what it builds from them; ``holds`` says what that is, for the message.
    """
    n_queries = check_positive_int(n_queries, "n_queries")
    n_keys = n_queries if n_keys is None else check_positive_int(n_keys, "n_keys")
    if not isinstance(what, str):
        raise TypeError(f"what must be a string naming the mask, got {type(what).__name__}")
    start = query_start(n_queries, n_keys, align, what)
    refuse_oversized(n_queries * n_keys * bytes_per_pair,
                     f"the {what} for n_queries={n_queries} and n_keys={n_keys} ({holds or 'its integer offsets'}, "
                     f"{bytes_per_pair} bytes per query and key)", way_out)
    query_pos = np.arange(n_queries) + start  # (L,)
    return np.arange(n_keys)[None, :] - query_pos[:, None]  # (L, S)


# The way out of a mask too large to build: attention that applies it without holding it.
_TILED_CAUSAL = ("Use lessonlib.tiled_attention(query, key, value, causal=True), which applies the causal mask "
                 "block by block without building it, or shorter sequences.")


def causal_mask(n_queries: int, n_keys: int | None = None, *, align: Align | None = None) -> np.ndarray:
    """(L, S) boolean, True where the key is not in the query's future: offset = k - q <= 0.

    Square when ``n_keys`` is omitted or equal. When the lengths differ, ``align`` must be
    "top-left" (query i sees keys 0..i) or "bottom-right" (query i sees keys 0..i + S - L).
    """
    return _offsets(n_queries, n_keys, align, "causal mask", bytes_per_pair=9, way_out=_TILED_CAUSAL,
                    holds="offsets and the mask") <= 0


def sliding_window_mask(
    n_queries: int,
    n_keys: int | None = None,
    *,
    window: int,
    causal: bool = True,
    align: Align | None = None,
) -> np.ndarray:
    """(L, S) boolean: keys at distance below ``window`` from the query position.

    With offset = k - q: causal allows -window < offset <= 0 (the query itself and the
    window - 1 keys before it); not causal allows |offset| < window. Alignment as in :func:`causal_mask`.
    """
    window = check_positive_int(window, "window")
    causal = check_flag(causal, "causal")
    offset = _offsets(n_queries, n_keys, align, "sliding-window mask", bytes_per_pair=17, holds="offsets and masks",
                      way_out="Build it for a block of queries at a time, or use shorter sequences.")  # (L, S)
    if causal:
        return (offset <= 0) & (offset > -window)
    return np.abs(offset) < window


def combine_masks(
    structure: np.ndarray | None = None,
    key_padding: np.ndarray | None = None,
    *,
    heads: bool = False,
) -> np.ndarray:
    """AND a structural mask with a key-padding mask, each on its own axes.

    structure (L, S) (causal, window; or (B, L, S) already per example); key_padding (B, S),
    True for real keys. The padding mask is placed as (B, 1, S) so it broadcasts over queries,
    never over keys; with ``heads`` a head axis is added: (B, 1, 1, S) and result (B, 1, L, S).
    Result (B, L, S), or the structure alone when no padding is given.
    """
    heads = check_flag(heads, "heads")
    if structure is None and key_padding is None:
        raise ValueError("combine_masks needs at least one of structure or key_padding")
    parts = []
    if key_padding is not None:
        key_padding = as_allowed_mask(key_padding, "key_padding")
        if key_padding.ndim != 2:
            raise ValueError(f"key_padding must be (batch, S), got shape {key_padding.shape}")
        parts.append(key_padding[:, None, :])  # (B, 1, S): same keys allowed for every query
    if structure is not None:
        structure = as_allowed_mask(structure, "structure")
        if structure.ndim not in (2, 3):
            raise ValueError(f"structure must be (L, S) or (B, L, S), got shape {structure.shape}")
        if key_padding is not None and structure.shape[-1] != key_padding.shape[-1]:
            raise ValueError(
                f"structure has S={structure.shape[-1]} keys (shape {structure.shape}) but "
                f"key_padding has S={key_padding.shape[-1]} (shape {key_padding.shape})"
            )
        parts.append(structure)
    shape = broadcast_shape(parts[0].shape, parts[-1].shape, "key_padding placed as (B, 1, S) and structure")
    refuse_oversized(array_bytes(shape, bool), f"combine_masks with a result of shape {shape}",
                     "Use a smaller batch or shorter sequences.")
    combined = parts[0] if len(parts) == 1 else np.logical_and(*parts)  # (B, L, S) or (L, S)
    if heads:
        combined = np.expand_dims(combined, axis=-3)  # (B, 1, L, S) or (1, L, S)
    return combined


# --- Library conventions -------------------------------------------------------------------------
# What real attention APIs do with a mask. Every row is a claim that the cross-check tests
# re-derive on the real library with lessonlib.probe_mask_semantics (q = k = 0, value = identity,
# so the output rows are the weight rows); ``measured_on`` names the version on which that probe
# last agreed. The words are the probe's own (lessonlib.probe.TRUE_MEANS and its siblings).


@dataclass(frozen=True)
class MaskConvention:
    """How one library API reads an attention mask."""

    library: str  # "torch", "jax", "flax", "keras", "transformers", "lessonlib"
    api: str  # the call, e.g. "F.scaled_dot_product_attention"
    argument: str  # the mask argument the row is about
    true_means: str  # a boolean True: "attend", "blocked", "added (True = +1)", "refused"
    float_mask: str  # "added to scores", "read as boolean (nonzero = ...)", "refused"
    causal_alignment: str  # its own causal switch for L != S: "top-left", "bottom-right", "refused"
    fully_masked_row: str  # what a row with no allowed key gives: "zeros", "uniform", "nan"
    measured_on: str  # "library version" on which the probe agreed, e.g. "torch 2.13.0+cpu"


MASK_CONVENTIONS: tuple[MaskConvention, ...] = (
    MaskConvention("lessonlib", "scaled_dot_product_attention", "mask", "attend", "refused",
                   "refused", "zeros", "lessonlib 0.1.0"),
    MaskConvention("torch", "F.scaled_dot_product_attention", "attn_mask", "attend",
                   "added to scores", "top-left", "zeros", "torch 2.13.0+cpu"),
    MaskConvention("torch", "nn.MultiheadAttention", "attn_mask", "blocked", "added to scores",
                   "refused", "nan", "torch 2.13.0+cpu"),
    MaskConvention("torch", "nn.MultiheadAttention", "key_padding_mask", "blocked",
                   "added to scores", "refused", "nan", "torch 2.13.0+cpu"),
    MaskConvention("torch", "nn.MultiheadAttention(need_weights=False)", "key_padding_mask", "blocked",
                   "added to scores", "refused", "zeros", "torch 2.13.0+cpu"),
    MaskConvention("jax", "jax.nn.dot_product_attention", "mask", "attend", "refused",
                   "top-left", "uniform", "jax 0.10.2"),
    MaskConvention("jax", "jax.nn.dot_product_attention", "bias", "added (True = +1)",
                   "added to scores", "top-left", "nan", "jax 0.10.2"),
    MaskConvention("flax", "linen.MultiHeadDotProductAttention", "mask", "attend",
                   "read as boolean (nonzero = attend)", "not built in", "uniform", "flax 0.12.8"),
    MaskConvention("keras", "layers.MultiHeadAttention", "attention_mask", "attend",
                   "read as boolean (nonzero = attend)", "top-left", "uniform", "keras 3.15.1"),
    MaskConvention("keras", "layers.MultiHeadAttention(return_attention_scores=True)", "attention_mask",
                   "attend", "read as boolean (nonzero = attend)", "top-left", "zeros", "keras 3.15.1"),
    MaskConvention("transformers", "BertModel (eager attention)", "attention_mask", "attend",
                   "read as boolean (nonzero = attend)", "not built in", "uniform", "transformers 5.24.0"),
)


# --- Precision facts -----------------------------------------------------------------------------
# Numbers that depend on the floating-point dtype, as real libraries computed them. The
# cross-check tests re-measure each one in every library its ``measured_on`` names.


@dataclass(frozen=True)
class FillFact:
    """What large negative fills become when stored in ``dtype``, and softmax of a row of them."""

    dtype: str
    minus_1e9: float  # -1e9 stored in dtype
    finfo_min: float  # the most negative finite value of dtype
    finfo_min_doubled: float  # finfo.min + finfo.min, computed in dtype
    row_of_minus_1e9: str  # softmax of a row filled with -1e9: "uniform" or "nan"
    row_of_finfo_min: str  # softmax of a row filled with finfo.min
    measured_on: tuple[str, ...]  # "library version" of each library that gave these numbers


@dataclass(frozen=True)
class RenormalisedFact:
    """Masking *after* softmax, in ``dtype``: softmax over all scores, zero the disallowed
    weights, then divide by what is left (the scores and mask are in :class:`PrecisionFacts`)."""

    dtype: str
    row_sum_after_zeroing: float  # what is left to divide by
    renormalised: tuple[float, ...]  # rounded to 6 places; NaN where 0 / 0
    measured_on: tuple[str, ...]


@dataclass(frozen=True)
class LeakFact:
    """An additive fill too small for the scores: softmax(scores + added) in ``dtype``."""

    dtype: str
    scores: tuple[float, ...]
    added: tuple[float, ...]
    weights: tuple[float, ...]  # rounded to 6 places
    measured_on: tuple[str, ...]


@dataclass(frozen=True)
class PrecisionFacts:
    """The dtype-dependent facts the lesson states, each measured on real libraries."""

    fills: tuple[FillFact, ...]
    renormalised_scores: tuple[float, ...]  # (S,) scores of the renormalisation facts
    renormalised_allowed: tuple[bool, ...]  # (S,) True = kept; the others are zeroed after softmax
    renormalised: tuple[RenormalisedFact, ...]
    leak: LeakFact


_BOTH = ("torch 2.13.0+cpu", "jax 0.10.2")
_NAN = float("nan")
_NEG_INF = float("-inf")

PRECISION_FACTS = PrecisionFacts(
    fills=(
        FillFact("float16", _NEG_INF, -65504.0, _NEG_INF, "nan", "uniform", _BOTH),
        FillFact("bfloat16", -998244352.0, -3.3895313892515355e38, _NEG_INF, "uniform", "uniform", _BOTH),
        FillFact("float32", -1e9, -3.4028234663852886e38, _NEG_INF, "uniform", "uniform", _BOTH),
        FillFact("float64", -1e9, -1.7976931348623157e308, _NEG_INF, "uniform", "uniform", _BOTH),
    ),
    renormalised_scores=(1.0, 2.0, 100.0),
    renormalised_allowed=(True, True, False),
    renormalised=(
        RenormalisedFact("float64", 3.760007e-43, (0.268941, 0.731059, 0.0), _BOTH),
        # exp(-99) is below float32's smallest normal number: torch keeps it as a subnormal,
        # JAX on CPU flushes it to zero, so the same dtype gives a number in one and NaN in the other.
        RenormalisedFact("float32", 3.75548e-43, (0.268657, 0.731343, 0.0), ("torch 2.13.0+cpu",)),
        RenormalisedFact("float32", 0.0, (_NAN, _NAN, _NAN), ("jax 0.10.2",)),
        RenormalisedFact("bfloat16", 0.0, (_NAN, _NAN, _NAN), _BOTH),
        RenormalisedFact("float16", 0.0, (_NAN, _NAN, _NAN), _BOTH),
    ),
    leak=LeakFact("float16", (1.0, 20000.0), (0.0, -1e4), (0.0, 1.0), _BOTH),
)
