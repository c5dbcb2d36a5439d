"""Input checks shared by the core modules (and lessonlib.fast): each error names what disagreed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

FullyMasked = Literal["zeros", "nan", "raise"]  # what a row with no allowed key becomes
FULLY_MASKED_POLICIES: tuple[str, ...] = get_args(FullyMasked)


def as_float_array(x: object, name: str, *, finite: bool = True) -> np.ndarray:
    """Return ``x`` as a floating array; refuse NaN or infinite entries unless ``finite=False``."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiuc":  # bool, strings, objects, dates: not numbers to attend with
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(nonfinite_message(name, int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))))
    return arr


def nonfinite_message(name: str, bad: int) -> str:
    """The error for ``bad`` NaN or infinite entries found in the array called ``name``."""
    return (
        f"{name} has {bad} NaN or infinite entr{'y' if bad == 1 else 'ies'}; attention "
        "needs finite inputs (exclude keys with a boolean mask, not with -inf in the data)"
    )


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


def check_policy(fully_masked: FullyMasked) -> None:
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


def check_widths(query: np.ndarray, key: np.ndarray) -> None:
    """Refuse a query (..., L, d_q) and key (..., S, d_k) whose widths differ."""
    d_q, d_k = query.shape[-1], key.shape[-1]
    if d_q != d_k:
        raise ValueError(
            f"query width d_q={d_q} does not match key width d_k={d_k}: a score is a dot "
            "product of a query with a key, so their widths must agree (the value width is free)"
        )


def refuse_empty_rows(allowed: np.ndarray) -> None:
    """Raise if some row of the boolean ``allowed`` (..., S) has no allowed key."""
    empty = ~np.any(allowed, axis=-1)  # (...)
    if np.any(empty):
        rows = int(np.count_nonzero(empty))
        raise ValueError(
            f"{rows} row(s) have no allowed key, so softmax over them is not a distribution; "
            "choose fully_masked='zeros' or 'nan', or fix the mask"
        )


@dataclass(frozen=True)
class AttentionInputs:
    """Query, key and value as float arrays in the general shapes, and how to undo that.

    query (..., L, d_k), key (..., S, d_k), value (..., S, d_v); ``one_query`` when the caller
    gave a single query (d_k,), ``scalar_values`` when the value held one number per key (..., S).
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    one_query: bool
    scalar_values: bool

    def restore(self, output: np.ndarray, *per_score: np.ndarray | None) -> tuple:
        """Drop the axes added for the caller: output (..., L, d_v) -> (..., L) for scalar values,
        and for a single query output -> (..., d_v) and each (..., L, S) array -> (..., S)."""
        if self.scalar_values:
            output = output[..., 0]  # (..., L)
        if self.one_query:
            output = output[..., 0] if self.scalar_values else output[..., 0, :]  # (...,) or (..., d_v)
            per_score = tuple(None if a is None else a[..., 0, :] for a in per_score)  # (..., S)
        return (output, *per_score)


def attention_inputs(query: object, key: object, value: object, *, finite: bool = True) -> AttentionInputs:
    """Check attention inputs and bring them to query (..., L, d_k), key (..., S, d_k), value (..., S, d_v).

    ``finite=False`` leaves NaN and inf to the caller, which must then refuse them itself.
    """
    query = as_float_array(query, "query", finite=finite)
    key = as_float_array(key, "key", finite=finite)
    value = as_float_array(value, "value", finite=finite)
    if key.ndim < 2:
        raise ValueError(f"key must have shape (..., S, d_k), got {key.shape}")
    check_widths(query, key)
    one_query = query.ndim == 1
    if one_query:
        query = query[None, :]  # (1, d_k)
    scalar_values = value.ndim == key.ndim - 1
    if scalar_values:
        value = value[..., None]  # (..., S, 1)
    if value.ndim < 2 or value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"key has S={key.shape[-2]} positions (shape {key.shape}) but value has shape "
            f"{value.shape}: each key needs exactly one value"
        )
    return AttentionInputs(query, key, value, one_query, scalar_values)
