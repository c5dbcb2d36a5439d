"""Input checks shared by the core modules: each error names what disagreed."""

from __future__ import annotations

import numpy as np

FULLY_MASKED_POLICIES = ("zeros", "nan", "raise")


def as_float_array(x: object, name: str) -> np.ndarray:
    """Return ``x`` as a floating array; refuse NaN or infinite entries."""
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(
            f"{name} has {bad} NaN or infinite entr{'y' if bad == 1 else 'ies'}; attention "
            "needs finite inputs (exclude keys with a boolean mask, not with -inf in the data)"
        )
    return arr


def as_allowed_mask(mask: object, name: str = "mask") -> np.ndarray:
    """Return a boolean ``allowed`` mask; refuse float or 0/1 integer masks with a word on polarity."""
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise TypeError(
            f"{name} must be a boolean array where True means 'this key may be attended to', "
            f"got dtype {arr.dtype}. Float and 0/1 masks mean different things in different "
            "libraries (added to scores, or read with True = blocked); convert explicitly, "
            "e.g. allowed = (m == 0) for an additive 0/-inf mask or allowed = m.astype(bool) "
            "for a 1 = keep mask"
        )
    return arr


def broadcast_shape(shape_a: tuple[int, ...], shape_b: tuple[int, ...], what: str) -> tuple[int, ...]:
    """Broadcast two shapes, or raise naming both of them."""
    try:
        return np.broadcast_shapes(shape_a, shape_b)
    except ValueError:
        raise ValueError(f"{what}: shapes {shape_a} and {shape_b} do not broadcast") from None


def check_policy(fully_masked: str) -> None:
    """Refuse an unknown policy for rows with no allowed key."""
    if fully_masked not in FULLY_MASKED_POLICIES:
        raise ValueError(
            f"fully_masked must be one of {FULLY_MASKED_POLICIES}, got {fully_masked!r}"
        )


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, refusing non-integers and values below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)
