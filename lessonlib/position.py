"""Where order enters attention: position embeddings, score biases and query/key rotations.

- sinusoidal and learned embeddings are added to the token representation;
- ALiBi and T5-style relative biases are added to the scores;
- RoPE rotates queries and keys, so their dot product sees only the offset.

An offset is always key position - query position (as in lessonlib.masks): negative means the
key comes before the query.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np

from lessonlib._checks import (
    array_bytes,
    as_float_array,
    as_int_array,
    as_numeric_array,
    check_axis,
    check_choice,
    check_flag,
    check_ndim,
    check_positive_int,
    check_real,
    check_rng,
    refuse_oversized,
)
from lessonlib.masks import Align, _offsets

# Which coordinates RoPE rotates together: (2i, 2i+1) or (i, i + d/2).
Pairing = Literal["interleaved", "half"]
PAIRINGS: tuple[str, ...] = get_args(Pairing)


def sinusoidal_positions(n_positions: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """(n_positions, d_model): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d))."""
    n_positions = check_positive_int(n_positions, "n_positions")
    d_model = check_positive_int(d_model, "d_model")
    base = check_real(base, "base", positive=True)
    refuse_oversized(array_bytes((n_positions, d_model), np.float64, 2),
                     f"sinusoidal_positions(n_positions={n_positions}, d_model={d_model}) (the table and its angles)",
                     "Build the rows for the positions you need: fewer positions, or a narrower d_model.")
    i = np.arange((d_model + 1) // 2)  # (ceil(d/2),)
    angle = np.arange(n_positions)[:, None] / base ** (2 * i / d_model)  # (n, ceil(d/2))
    pe = np.empty((n_positions, d_model))  # (n, d)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe


class BeyondTableError(IndexError, ValueError):
    """A position past the rows a learned table has: an IndexError (no such row), and a ValueError."""


class LearnedPositions:
    """A trainable table of one vector per absolute position, 0 .. max_positions - 1.

    It has no row for a position past its size: unlike a formula, it cannot extrapolate.
    """

    def __init__(
        self, max_positions: int, d_model: int, *, rng: np.random.Generator | None = None, std: float = 0.02
    ) -> None:
        self.max_positions = check_positive_int(max_positions, "max_positions")
        self.d_model = check_positive_int(d_model, "d_model")
        rng = np.random.default_rng(0) if rng is None else check_rng(rng)
        std = check_real(std, "std", minimum=0.0)
        refuse_oversized(array_bytes((self.max_positions, self.d_model), np.float64),
                         f"LearnedPositions(max_positions={self.max_positions}, d_model={self.d_model}) (its table)",
                         "Choose fewer positions or a narrower d_model.")
        self.table = rng.normal(0.0, std, size=(self.max_positions, self.d_model))  # (P, d)

    def __call__(self, positions: np.ndarray | list[int]) -> np.ndarray:
        """Rows of the table for integer ``positions`` (...,) -> (..., d_model)."""
        positions = as_int_array(positions, "positions")
        if positions.min() < 0 or positions.max() >= self.max_positions:
            worst = int(positions.max()) if positions.max() >= self.max_positions else int(positions.min())
            raise BeyondTableError(
                f"position {worst} is outside this learned table, which has {self.max_positions} "
                f"rows (positions 0..{self.max_positions - 1}); a learned table has no vector "
                "for positions it was not built with"
            )
        return self.table[positions]


def _rope_angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    """(..., d/2) rotation angles pos * base^(-2i/d)."""
    inv_freq = base ** (-2.0 * np.arange(d // 2) / d)  # (d/2,)
    return positions[..., None] * inv_freq  # (..., d/2)


def rope(
    x: np.ndarray, positions: np.ndarray | list[int], *, base: float = 10000.0, pairing: Pairing = "interleaved"
) -> np.ndarray:
    """Rotary position embedding of queries or keys.

    x (..., n, d) with d even; positions broadcastable to (..., n). Each pair of coordinates is
    rotated by angle pos * base^(-2i/d): pairs (2i, 2i+1) with ``pairing="interleaved"`` (RoFormer,
    Meta's reference LLaMA code), (i, i + d/2) with ``pairing="half"`` (GPT-NeoX, the Hugging Face
    LLaMA port). Then
    rope(q, m) . rope(k, n) depends only on the offset n - m (key position - query position).
    """
    pairing = check_choice(pairing, "pairing", PAIRINGS)
    base = check_real(base, "base", positive=True)
    x = as_float_array(x, "x")
    check_ndim(x, "x", 2, "(..., n, d)")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x: RoPE rotates coordinates in pairs, so the width must be even, got {d}")
    positions = as_float_array(positions, "positions")
    try:
        shape = np.broadcast_shapes(positions.shape, x.shape[:-1])
    except ValueError:
        raise ValueError(
            f"positions of shape {positions.shape} do not broadcast to the sequence shape "
            f"{x.shape[:-1]} of x (one position per vector)"
        ) from None
    refuse_oversized(array_bytes(shape + (d,), x.dtype, 3) + array_bytes(shape + (d,), np.float64, 2),
                     f"rope of x {x.shape} at positions {positions.shape}", "Rotate fewer vectors at a time.")
    angles = _rope_angles(positions, d, base)  # (..., n, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    if pairing == "interleaved":
        first, second = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each
    else:
        first, second = x[..., : d // 2], x[..., d // 2 :]
    rot_first = first * cos - second * sin  # (..., n, d/2)
    rot_second = first * sin + second * cos  # (..., n, d/2)
    out = np.empty(np.broadcast_shapes(x.shape, rot_first.shape[:-1] + (d,)), dtype=x.dtype)
    if pairing == "interleaved":
        out[..., 0::2], out[..., 1::2] = rot_first, rot_second
    else:
        out[..., : d // 2], out[..., d // 2 :] = rot_first, rot_second
    return out


def alibi_slopes(n_heads: int) -> np.ndarray:
    """(n_heads,) ALiBi slopes: 2^(-8i/n) for i = 1..n when n is a power of two.

    Otherwise the slopes of the nearest lower power of two, then every other slope of the
    next power of two, as in the ALiBi paper.
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    refuse_oversized(array_bytes((n_heads,), np.float64, 3), f"alibi_slopes(n_heads={n_heads})",
                     "Use fewer heads.")
    low = 1 << (n_heads.bit_length() - 1)  # the largest power of two <= n_heads
    first = 2.0 ** (-8.0 * np.arange(1, low + 1) / low)  # (low,) the slopes of low heads
    odd = np.arange(1, 2 * (n_heads - low), 2)  # (n_heads - low,) every other step of 2 * low heads
    return np.concatenate([first, 2.0 ** (-8.0 * odd / (2 * low))])  # (n_heads,)


def alibi_bias(n_queries: int, n_keys: int, n_heads: int, *, align: Align | None = None) -> np.ndarray:
    """(H, L, S) ALiBi bias -m_h * |k - q|, the distance between key and query positions.

    On the keys a causal query may see (offset k - q <= 0) this is m_h * (k - q), which gives the
    same softmax as +m_h * k (a per-row constant cancels). When L != S, ``align`` places the
    queries among the keys as in :func:`lessonlib.masks.causal_mask`: "bottom-right" puts a query
    block at the end of the keys, as when decoding with a cache.
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    offsets = _offsets(n_queries, n_keys, align, "ALiBi bias", bytes_per_pair=8 * n_heads + 16, way_out=_PER_BLOCK,
                       holds=f"a bias for each of n_heads={n_heads} and two offsets")  # (L, S), k - q
    return -alibi_slopes(n_heads)[:, None, None] * np.abs(offsets)[None, :, :]  # (H, L, S)


# The way out of a score bias too large to build at once.
_PER_BLOCK = ("Build it for a block of queries at a time (n_queries < n_keys with align='bottom-right' gives the "
              "last ones), or use shorter sequences.")


def _bucket_layout(bidirectional: object, n_buckets: object, max_distance: object) -> tuple[bool, int, int]:
    """Refuse bucket settings T5's layout cannot hold: too few buckets, or max_distance within the exact range."""
    bidirectional = check_flag(bidirectional, "bidirectional")
    fewest = 4 if bidirectional else 2  # per direction: one bucket for exact offsets, one log-spaced
    if check_positive_int(n_buckets, "n_buckets") < fewest:
        raise ValueError(f"n_buckets must be at least {fewest}{' when bidirectional' if bidirectional else ''}: "
                         "half of each direction's buckets hold exact offsets and the rest are log-spaced; "
                         f"got {n_buckets}")
    exact = (n_buckets // 2 if bidirectional else n_buckets) // 2
    if check_positive_int(max_distance, "max_distance") <= exact:
        raise ValueError(f"max_distance must exceed the {exact} offsets that get a bucket each (n_buckets={n_buckets}"
                         f"{', bidirectional' if bidirectional else ''}): the log-spaced buckets cover distances from "
                         f"{exact} to max_distance; got {max_distance}")
    return bidirectional, n_buckets, max_distance


def relative_position_bucket(
    relative_position: np.ndarray, *, bidirectional: bool = True, n_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """T5-style bucket of each offset = key position - query position (negative: the key is earlier).

    With ``bidirectional``, the lower half of the buckets is for keys at or before the query and
    the upper half for keys after it, whose first bucket (a later key at distance 0) never occurs:
    32 buckets give 0 to the query's own position, 1..15 to earlier keys and 17..31 to later ones.
    In each half (the whole range when not ``bidirectional``) the first half of the buckets holds
    exact small distances; the rest cover distances up to ``max_distance`` on a log scale; farther
    offsets share the last bucket.
    """
    bidirectional, n_buckets, max_distance = _bucket_layout(bidirectional, n_buckets, max_distance)
    relative_position = as_int_array(relative_position, "relative_position",
                                     what="integers (key position - query position)")
    refuse_oversized(array_bytes(relative_position.shape, np.float64, 6),
                     f"relative_position_bucket of relative positions {relative_position.shape}",
                     "Bucket fewer offsets at a time.")
    distance = -relative_position  # > 0 for keys before the query
    bucket = np.zeros_like(relative_position)
    if bidirectional:
        n_buckets //= 2
        bucket += (distance < 0) * n_buckets  # keys after the query get the upper half
        distance = np.abs(distance)
    else:
        distance = np.maximum(distance, 0)
    exact = n_buckets // 2
    safe = np.maximum(distance, 1)  # avoid log(0); those entries take the exact branch
    log_bucket = exact + (
        np.log(safe / exact) / math.log(max_distance / exact) * (n_buckets - exact)
    ).astype(relative_position.dtype)
    log_bucket = np.minimum(log_bucket, n_buckets - 1)
    return bucket + np.where(distance < exact, distance, log_bucket)


def relative_position_bias(
    n_queries: int,
    n_keys: int,
    bucket_bias: np.ndarray,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
    align: Align | None = None,
) -> np.ndarray:
    """(H, L, S) bias added to scores, looked up by the bucket of offset = key position - query position.

    bucket_bias (n_buckets, H): one learned number per bucket and head. When L != S, ``align``
    places the queries among the keys as in :func:`lessonlib.masks.causal_mask`.
    """
    bucket_bias = as_float_array(bucket_bias, "bucket_bias")
    if bucket_bias.ndim != 2:
        raise ValueError(f"bucket_bias must be (n_buckets, n_heads), got shape {bucket_bias.shape}")
    _bucket_layout(bidirectional, bucket_bias.shape[0], max_distance)
    offsets = _offsets(n_queries, n_keys, align, "relative position bias", way_out=_PER_BLOCK,
                       bytes_per_pair=8 * bucket_bias.shape[1] + 56,
                       holds=f"a bias for each of the {bucket_bias.shape[1]} heads of bucket_bias, offsets and buckets")
    buckets = relative_position_bucket(
        offsets, bidirectional=bidirectional, n_buckets=bucket_bias.shape[0], max_distance=max_distance
    )  # (L, S)
    return np.moveaxis(bucket_bias[buckets], -1, 0)  # (H, L, S)


def check_permutation(perm: np.ndarray | list[int], n: int | None = None) -> np.ndarray:
    """Return ``perm`` as an int array after checking it reorders 0..n-1 exactly once each."""
    perm = as_int_array(perm, "perm", what="integers (a reordering of 0..n-1)")
    n = perm.size if n is None else n
    if perm.ndim != 1 or perm.size != n or not np.array_equal(np.sort(perm), np.arange(n)):
        shown = perm.tolist() if perm.size <= 16 else f"an array of shape {perm.shape}"
        raise ValueError(f"perm must be a permutation of 0..{n - 1} (each index once): expected a permutation "
                         f"of 0..{n - 1}, got {shown}")
    return perm


def permute(x: np.ndarray, perm: np.ndarray | list[int], *, axis: int = -2) -> np.ndarray:
    """Reorder positions: out[..., i, :] = x[..., perm[i], :] along ``axis`` (default the sequence axis).

    Entries are moved, not computed with: NaN and infinities move like any other number.
    """
    x = as_numeric_array(x, "x")
    axis = check_axis(axis, x.ndim)
    perm = check_permutation(perm, x.shape[axis])
    return np.take(x, perm, axis=axis)


def inverse_permutation(perm: np.ndarray | list[int]) -> np.ndarray:
    """The permutation that undoes ``perm``: permute(permute(x, p), inverse_permutation(p)) == x."""
    perm = check_permutation(perm)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.size)
    return inverse
