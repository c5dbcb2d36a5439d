"""Input checks shared by every public function of lessonlib.

Each public function checks every argument here before any work, so that a bad one is refused
with a ValueError or TypeError raised by lessonlib (never from inside NumPy) whose message names
the argument, what was expected and what came:

- values: integers (:func:`check_positive_int`), real parameters such as ``scale``, ``base``
  or ``temperature`` (:func:`check_real`, finite only), flags, choices, callables, generators;
- arrays: real numbers only (complex, object, string and boolean arrays are refused), no empty
  ones, NaN and infinities refused unless the function documents what it does with them;
- masks: boolean ``allowed`` masks, and a 2-D mask that batched scores could read two ways;
- size before allocation: :func:`refuse_oversized` compares what a call would hold at once with
  the memory this machine has available, and names the way out.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

FullyMasked = Literal["zeros", "nan", "raise"]  # what a row with no allowed key becomes
FULLY_MASKED_POLICIES: tuple[str, ...] = get_args(FullyMasked)


# --- what came ---------------------------------------------------------------------------------------


def shown(value: object) -> str:
    """What came, for an error message: "None", "str 'abc'", "float nan", "an array of shape (2, 3) and dtype ..."."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# --- single values -----------------------------------------------------------------------------------


def _is_integer(value: object) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, refusing non-integers (bools, floats, strings, None) and values below ``minimum``."""
    if not _is_integer(value):
        raise TypeError(f"{name} must be an integer, got {shown(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def check_index(value: object, name: str, size: int) -> int:
    """Return ``value`` as an int in 0..size-1 (a key, a query, a head); refuse anything else."""
    if not _is_integer(value):
        raise TypeError(f"{name} must be an integer, got {shown(value)}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must lie in 0..{size - 1}, got {value}")
    return int(value)


def check_real(value: object, name: str, *, positive: bool = False, minimum: float | None = None,
               allow_inf: bool = False) -> float:
    """Return ``value`` as a finite float; refuse NaN, infinities, complex numbers, strings, bools and None.

    ``positive`` refuses values <= 0; ``minimum`` refuses values below it; ``allow_inf`` lets
    infinities through (never NaN).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {shown(value)}")
    number = float(value)
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {number}")
    if positive and number <= 0:
        raise ValueError(f"{name} must be positive, got {number:g}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be at least {minimum:g}, got {number:g}")
    return number


def check_scale(scale: object) -> float | None:
    """None (the default 1/sqrt(d_k)) or a finite real ``scale`` that multiplies every score."""
    return None if scale is None else check_real(scale, "scale")


def check_flag(value: object, name: str) -> bool:
    """Return ``value`` as a bool; refuse anything else (a string such as "False" would read as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {shown(value)}")
    return bool(value)


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``; refuse anything else, listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {shown(value)}")
    return value


def check_callable(value: object, name: str) -> Callable:
    """Return ``value`` if it can be called."""
    if not callable(value):
        raise TypeError(f"{name} must be a function, got {shown(value)}")
    return value


def check_instance(value: object, cls: type, name: str) -> object:
    """Return ``value`` if it is a ``cls``; refuse anything else, naming both."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {shown(value)}")
    return value


def check_rng(rng: object, name: str = "rng") -> np.random.Generator:
    """Return ``rng`` if it is a NumPy Generator (np.random.default_rng(seed))."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a NumPy Generator such as np.random.default_rng(0), got {shown(rng)}")
    return rng


def check_policy(fully_masked: object) -> None:
    """Refuse an unknown policy for rows with no allowed key."""
    check_choice(fully_masked, "fully_masked", FULLY_MASKED_POLICIES)


def check_axis(axis: object, ndim: int, name: str = "axis") -> int:
    """Return ``axis`` as a non-negative index into ``ndim`` axes; refuse non-integers and axes out of range."""
    if not _is_integer(axis):
        raise TypeError(f"{name} must be an integer, got {shown(axis)}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array with {ndim} axes (from {-ndim} to {ndim - 1})")
    return operator.index(axis) % ndim


def as_dtype(dtype: object, name: str = "dtype", *, kinds: str = "biufc") -> np.dtype:
    """``np.dtype(dtype)`` for a dtype of one of ``kinds`` (NumPy's letters: f float, i int, ...).

    None is refused (NumPy would read it as float64), as are names NumPy does not know.
    """
    if dtype is None:
        raise TypeError(f"{name} must be a dtype such as 'float32' or np.float64, got None")
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: unknown dtype {shown(dtype)}; use a NumPy dtype name or type such as "
                        "'float32'") from None
    if dt.kind not in kinds:
        raise TypeError(f"{name} must be a numeric dtype, got {dt}")
    return dt


# --- arrays ------------------------------------------------------------------------------------------


def as_array(x: object, name: str) -> np.ndarray:
    """``np.asarray(x)``, refusing None and ragged nested lists with an error that names ``name``."""
    if x is None:
        raise TypeError(f"{name} must be an array, got None")
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} cannot be read as an array ({err})") from None


def check_nonempty(arr: np.ndarray, name: str) -> None:
    """Refuse an array with no entries (an axis of length 0)."""
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}): every axis needs at least one entry")


def check_ndim(arr: np.ndarray, name: str, minimum: int, shape: str) -> None:
    """Refuse an array with fewer than ``minimum`` axes; ``shape`` says what is wanted, e.g. "(..., n, d)"."""
    if arr.ndim < minimum:
        raise ValueError(f"{name} must have shape {shape}, got shape {arr.shape}")


def as_float_array(x: object, name: str, *, finite: bool = True) -> np.ndarray:
    """Return ``x`` as a floating array of real numbers with at least one entry.

    Integer arrays become float64. Complex, boolean, string and object arrays are refused, and
    so, unless ``finite=False``, are NaN and infinite entries.
    """
    arr = as_array(x, name)
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must hold real numbers, got complex dtype {arr.dtype}; attention is defined "
                        f"on real numbers (pass {name}.real if the imaginary part is meant to go)")
    if kind == "b":
        raise TypeError(f"{name} must hold numbers, got a boolean array (a mask belongs in a mask argument)")
    if kind not in "fiu":  # strings, objects, dates: not numbers to attend with
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    check_nonempty(arr, name)
    if kind != "f":
        arr = arr.astype(np.float64)
    if finite:
        refuse_nonfinite(arr, name)
    return arr


def refuse_nonfinite(arr: np.ndarray, name: str) -> None:
    """Refuse NaN or infinite entries in the floating ``arr``, naming how many.

    One sum finds them without a boolean array the size of ``arr``: it is finite exactly when
    every entry is (unless finite entries overflow, when the entries are counted to be sure).
    """
    if not math.isfinite(float(np.sum(arr, dtype=np.float64))):
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        if bad:
            raise ValueError(nonfinite_message(name, bad))


def as_numeric_array(x: object, name: str) -> np.ndarray:
    """Return ``x`` as an array of real numbers or booleans with at least one entry, its dtype kept.

    For functions that move entries without computing with them (reshaping, permuting): NaN and
    infinities move like any other number. Complex, string and object arrays are refused.
    """
    arr = as_array(x, name)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers or booleans, got dtype {arr.dtype}")
    check_nonempty(arr, name)
    return arr


def as_int_array(x: object, name: str, *, what: str = "integers") -> np.ndarray:
    """Return ``x`` as an integer array with at least one entry; refuse floats (even whole ones), bools and the rest."""
    arr = as_array(x, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be {what}, got dtype {arr.dtype}")
    check_nonempty(arr, name)
    return arr


def nonfinite_message(name: str, bad: int) -> str:
    """The error for ``bad`` NaN or infinite entries found in the array called ``name``."""
    return (
        f"{name} has {bad} NaN or infinite entr{'y' if bad == 1 else 'ies'}; attention "
        "needs finite inputs (exclude keys with a boolean mask, not with -inf in the data)"
    )


def overflow_message(bad: int, dtype: np.dtype) -> str:
    """The error for ``bad`` scores that overflowed ``dtype`` although the inputs were finite."""
    return (f"{nonfinite_message('scores', bad)}: query @ key^T * scale overflowed {np.dtype(dtype)}; "
            "use smaller entries or float64")


def as_allowed_mask(mask: object, name: str = "mask") -> np.ndarray:
    """Return a boolean ``allowed`` mask; refuse float or 0/1 integer masks with a word on polarity."""
    arr = as_array(mask, name)
    if arr.dtype != bool:
        raise TypeError(
            f"{name} must be a boolean array where True means 'this key may be attended to', "
            f"got dtype {arr.dtype}. Float and 0/1 masks mean different things in different "
            "libraries (added to scores, or read with True = blocked); convert explicitly, "
            "e.g. allowed = (m == 0) for an additive 0/-inf mask or allowed = m.astype(bool) "
            "for a 1 = keep mask"
        )
    check_nonempty(arr, name)
    return arr


def broadcast_shape(shape_a: tuple[int, ...], shape_b: tuple[int, ...], what: str) -> tuple[int, ...]:
    """Broadcast two shapes, or raise naming both of them."""
    try:
        return np.broadcast_shapes(shape_a, shape_b)
    except ValueError:
        raise ValueError(f"{what}: shapes {shape_a} and {shape_b} do not broadcast") from None


def check_mask_reading(mask_shape: tuple[int, ...], scores_shape: tuple[int, ...], name: str = "mask") -> None:
    """Refuse a 2-D mask that batched scores (..., L, S) could read two ways.

    NumPy puts a mask (X, S) on the last two axes, so X counts queries. When X is also the size of
    the leading axis, the batch of (B, L, S) and (B, H, L, S) scores, the mask may have been a
    (B, S) key-padding mask, which would then be applied per query instead of per example,
    silently. Either reading must be written out. A heads axis of L entries is no such doubt: a
    (B, S) mask is never meant per head.
    """
    if len(mask_shape) != 2 or len(scores_shape) < 3:
        return
    rows, n_keys = mask_shape
    if rows < 2 or rows != scores_shape[-2] or rows != scores_shape[0]:
        return
    batch_first = (rows,) + (1,) * (len(scores_shape) - 2) + (n_keys,)
    helper = {3: "combine_masks(key_padding=mask)", 4: "combine_masks(key_padding=mask, heads=True)"}
    padding = helper.get(len(scores_shape), f"mask.reshape({batch_first})")
    raise ValueError(
        f"{name} of shape {mask_shape} could be read two ways against scores of shape {scores_shape}: its "
        f"{rows} rows could be the {rows} queries (an (L, S) mask such as causal_mask, the same for every "
        f"example) or a batch of {rows} (a (B, S) key-padding mask). Say which: {name}[None], shape "
        f"{(1, rows, n_keys)}, for the first; {padding}, shape {batch_first}, for the second"
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


def check_widths(query: np.ndarray, key: np.ndarray) -> None:
    """Refuse a query (..., L, d_q) and key (..., S, d_k) whose widths differ."""
    d_q, d_k = query.shape[-1], key.shape[-1]
    if d_q != d_k:
        raise ValueError(
            f"query width d_q={d_q} does not match key width d_k={d_k}: a score is a dot "
            "product of a query with a key, so their widths must agree (the value width is free)"
        )


# --- size before allocation --------------------------------------------------------------------------

# Below this many bytes a call is not compared with the available memory (reading it takes a few
# microseconds, and every machine that runs the course has this much to spare).
ALWAYS_FITS = 64 << 20
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n_bytes: float) -> str:
    """A byte count in binary units with one decimal: 1536 -> '1.5 KiB', 2**30 -> '1.0 GiB'."""
    value, unit = check_real(n_bytes, "n_bytes", minimum=0.0), 0
    while value >= 1024 and unit < len(BYTE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.1f} {BYTE_UNITS[unit]}"


def array_bytes(shape: Sequence[int], dtype: np.dtype | type | str, copies: int = 1) -> int:
    """Bytes of ``copies`` arrays of ``shape`` and ``dtype``, in exact integer arithmetic (no overflow)."""
    return math.prod(int(n) for n in shape) * np.dtype(dtype).itemsize * copies


def refuse_oversized(n_bytes: int, what: str, way_out: str) -> None:
    """Refuse a call that would hold ``n_bytes`` at once when the machine has less memory available.

    ``what`` names the call and its arguments ("causal_mask(n_queries=1000000, n_keys=1000000)")
    and what it holds; ``way_out`` says what to do instead. Raised before anything is allocated.
    """
    if n_bytes < ALWAYS_FITS:
        return
    from lessonlib._machine import available_memory  # here: _machine itself uses these checks

    available = available_memory()
    if n_bytes > available:
        raise ValueError(f"{what} would hold {format_bytes(n_bytes)} at once, more than the "
                         f"{format_bytes(available)} this machine has available. {way_out}")


# What to use instead of dense attention that does not fit.
DENSE_WAY_OUT = ("Use lessonlib.tiled_attention (the same output without any (L, S) array) or "
                 "lessonlib.fast.scaled_dot_product_attention(..., need_weights=False), or shorter "
                 "sequences or a smaller batch.")


def refuse_dense_scores(function: str, query_shape: tuple[int, ...], key_shape: tuple[int, ...],
                        scores_shape: tuple[int, ...], dtype: np.dtype, copies: int,
                        names: tuple[str, str] = ("query", "key")) -> None:
    """Refuse dense attention whose ``copies`` arrays of ``scores_shape`` (..., L, S) would not fit.

    ``function`` is named in the message with the shapes of the arguments ``names`` that set L and
    S. The message is only written when the size is worth comparing with the memory (every call
    pays for this check, so it stays a few multiplications).
    """
    n_bytes = array_bytes(scores_shape, dtype, copies)
    if n_bytes >= ALWAYS_FITS:
        refuse_oversized(n_bytes, f"{function} of {names[0]} {query_shape} with {names[1]} {key_shape} ({copies} "
                                  f"arrays of shape {scores_shape}, {np.dtype(dtype)})", DENSE_WAY_OUT)


# --- attention inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionInputs:
    """Query, key and value as float arrays in the general shapes, and how to undo that.

    query (..., L, d_k), key (..., S, d_k), value (..., S, d_v); ``one_query`` when the caller
    gave a single query (d_k,), ``scalar_values`` when the value held one number per key (..., S).
    ``batch`` is the broadcast of the three batch shapes.
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    one_query: bool
    scalar_values: bool
    batch: tuple[int, ...]

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

    Refused: anything but real numbers, empty arrays (L, S, d_k or d_v of 0), a key without a
    sequence axis, widths or key/value lengths that disagree, batch axes that do not broadcast.
    ``finite=False`` leaves NaN and inf to the caller, which must then refuse them itself.
    """
    query = as_float_array(query, "query", finite=finite)
    key = as_float_array(key, "key", finite=finite)
    value = as_float_array(value, "value", finite=finite)
    check_ndim(query, "query", 1, "(..., L, d_k) or (d_k,)")
    check_ndim(key, "key", 2, "(..., S, d_k)")
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
    return AttentionInputs(query, key, value, one_query, scalar_values, attention_batch(query, key, value))


def attention_batch(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> tuple[int, ...]:
    """The broadcast of the batch axes (all but the last two) of query, key and value, or an error naming them."""
    if query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:  # the usual case, without NumPy's general rule
        return key.shape[:-2]
    try:
        return np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch axes of query {query.shape[:-2]}, key {key.shape[:-2]} and value {value.shape[:-2]} "
            "(all axes before the last two) do not broadcast: give each the same batch and head axes, "
            "or 1 where one array is shared"
        ) from None
