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

from lessonlib._checks import as_float_array, check_positive_int
from lessonlib.masks import Align, key_offsets

# Which coordinates RoPE rotates together: (2i, 2i+1) or (i, i + d/2).
Pairing = Literal["interleaved", "half"]
PAIRINGS: tuple[str, ...] = get_args(Pairing)


def sinusoidal_positions(n_positions: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """(n_positions, d_model): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d))."""
    n_positions = check_positive_int(n_positions, "n_positions")
    d_model = check_positive_int(d_model, "d_model")
    i = np.arange((d_model + 1) // 2)  # (ceil(d/2),)
    angle = np.arange(n_positions)[:, None] / base ** (2 * i / d_model)  # (n, ceil(d/2))
    pe = np.empty((n_positions, d_model))  # (n, d)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe


class LearnedPositions:
    """A trainable table of one vector per absolute position, 0 .. max_positions - 1.

    It has no row for a position past its size: unlike a formula, it cannot extrapolate.
    """

    def __init__(
        self, max_positions: int, d_model: int, *, rng: np.random.Generator | None = None, std: float = 0.02
    ) -> None:
        self.max_positions = check_positive_int(max_positions, "max_positions")
        self.d_model = check_positive_int(d_model, "d_model")
        rng = np.random.default_rng(0) if rng is None else rng
        self.table = rng.normal(0.0, std, size=(self.max_positions, self.d_model))  # (P, d)

    def __call__(self, positions: np.ndarray | list[int]) -> np.ndarray:
        """Rows of the table for integer ``positions`` (...,) -> (..., d_model)."""
        positions = np.asarray(positions)
        if not np.issubdtype(positions.dtype, np.integer):
            raise TypeError(f"positions must be integers, got dtype {positions.dtype}")
        if positions.size and (positions.min() < 0 or positions.max() >= self.max_positions):
            worst = int(positions.max()) if positions.max() >= self.max_positions else int(positions.min())
            raise IndexError(
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
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    x = as_float_array(x, "x")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE rotates coordinates in pairs, so the width must be even, got {d}")
    positions = np.asarray(positions, dtype=float)
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d), got {x.shape}")
    try:
        np.broadcast_shapes(positions.shape, x.shape[:-1])
    except ValueError:
        raise ValueError(
            f"positions of shape {positions.shape} do not broadcast to the sequence shape "
            f"{x.shape[:-1]} of x (one position per vector)"
        ) from None
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

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    low = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(low) + geometric(2 * low)[0::2][: n_heads - low]
    return np.array(slopes)


def alibi_bias(n_queries: int, n_keys: int, n_heads: int, *, align: Align | None = None) -> np.ndarray:
    """(H, L, S) ALiBi bias -m_h * |k - q|, the distance between key and query positions.

    On the keys a causal query may see (offset k - q <= 0) this is m_h * (k - q), which gives the
    same softmax as +m_h * k (a per-row constant cancels). When L != S, ``align`` places the
    queries among the keys as in :func:`lessonlib.masks.causal_mask`: "bottom-right" puts a query
    block at the end of the keys, as when decoding with a cache.
    """
    offsets = key_offsets(n_queries, n_keys, align=align, what="ALiBi bias")  # (L, S), k - q
    return -alibi_slopes(n_heads)[:, None, None] * np.abs(offsets)[None, :, :]  # (H, L, S)


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
    n_buckets = check_positive_int(n_buckets, "n_buckets", minimum=2)
    max_distance = check_positive_int(max_distance, "max_distance")
    relative_position = np.asarray(relative_position)
    if not np.issubdtype(relative_position.dtype, np.integer):
        raise TypeError(
            f"relative positions must be integers (key position - query position), got dtype {relative_position.dtype}"
        )
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
    offsets = key_offsets(n_queries, n_keys, align=align, what="relative position bias")  # (L, S), k - q
    buckets = relative_position_bucket(
        offsets, bidirectional=bidirectional, n_buckets=bucket_bias.shape[0], max_distance=max_distance
    )  # (L, S)
    return np.moveaxis(bucket_bias[buckets], -1, 0)  # (H, L, S)


def check_permutation(perm: np.ndarray | list[int], n: int | None = None) -> np.ndarray:
    """Return ``perm`` as an int array after checking it reorders 0..n-1 exactly once each."""
    perm = np.asarray(perm)
    n = perm.size if n is None else n
    if perm.ndim != 1 or perm.size != n or not np.array_equal(np.sort(perm), np.arange(n)):
        raise ValueError(f"expected a permutation of 0..{n - 1}, got {perm.tolist()}")
    return perm


def permute(x: np.ndarray, perm: np.ndarray | list[int], *, axis: int = -2) -> np.ndarray:
    """Reorder positions: out[..., i, :] = x[..., perm[i], :] along ``axis`` (default the sequence axis)."""
    x = np.asarray(x)
    perm = check_permutation(perm, x.shape[axis])
    return np.take(x, perm, axis=axis)


def inverse_permutation(perm: np.ndarray | list[int]) -> np.ndarray:
    """The permutation that undoes ``perm``: permute(permute(x, p), inverse_permutation(p)) == x."""
    perm = check_permutation(perm)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.size)
    return inverse
