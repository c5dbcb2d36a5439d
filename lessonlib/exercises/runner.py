"""Run one answer on one case's inputs and describe what came back as plain data.

This is the only part of the exercises package that touches learner code. It imports nothing
but NumPy and the standard library, so an isolated worker process can use it on its own:

    outcome = run_case(answer, case.args, call=case.call, trace_memory=case.trace_memory)

The outcome holds arrays, numbers and strings only (no learner objects), so it can cross a
process boundary as JSON plus ``.npy`` files and be judged elsewhere by :func:`judge`.
"""

from __future__ import annotations

import copy
import traceback
import tracemalloc
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

# What an outcome's status can be.
RETURNED = "returned"
NOT_IMPLEMENTED = "not_implemented"
RAISED = "raised"

# Answers that mean "nothing written yet" for an exercise whose answer is a value.
_PLACEHOLDERS = (None, Ellipsis, NotImplemented)


@dataclass
class Value:
    """A returned object reduced to plain data.

    type_name: the Python type the answer returned ("numpy.ndarray", "list", "tuple", "int",
    "numpy.float64", ...). data: an ndarray, a Python number or bool, or None when the object
    is not numeric (a list of numbers is converted, so its values can still be shown). items:
    for a returned tuple or list, each element reduced the same way.
    """

    type_name: str
    data: np.ndarray | int | float | bool | complex | None = None
    items: tuple[Value, ...] | None = None


@dataclass
class Outcome:
    """What happened when an answer ran on one case.

    status: "returned", "not_implemented" (the answer raised NotImplementedError, or a value
    answer is still a placeholder such as None) or "raised". error: the exception's type and
    message, with the line of the answer where it was raised when known. peak_bytes: peak traced
    memory during the call, when the case asked for it.
    """

    status: str
    value: Value | None = None
    error: str | None = None
    peak_bytes: int | None = None


def _type_name(obj: object) -> str:
    cls = type(obj)
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    return f"{module.split('.')[0]}.{cls.__name__}"


def _as_numeric_array(obj: object) -> np.ndarray | None:
    """np.asarray(obj) when that gives a bool or numeric array; None for ragged or object data."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(obj)
    except Exception:
        return None
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.number):
        return np.array(arr, copy=True)
    return None


def describe_value(obj: object, depth: int = 0) -> Value:
    """Reduce a returned object to a :class:`Value` (arrays copied, no learner objects kept)."""
    name = _type_name(obj)
    if isinstance(obj, np.ndarray):
        return Value(name, _as_numeric_array(obj))
    if isinstance(obj, np.generic):
        data = obj.item() if isinstance(obj, (np.number, np.bool_)) else None
        return Value(name, data)
    if isinstance(obj, (bool, int, float, complex)):
        return Value(name, obj)
    if isinstance(obj, (list, tuple)):
        items = tuple(describe_value(item, depth + 1) for item in obj) if depth < 1 else None
        return Value(name, _as_numeric_array(obj), items)
    return Value(name, None)


MAX_ERROR_TEXT = 2000


def error_text(exc: BaseException, filename: str | None = None, *, where: str = "") -> str:
    """'ValueError: message (line 7 of the answer cell)': the exception, and the last line of
    ``filename`` its traceback passed through (``where`` follows the line number).

    Never raises: an exception whose message itself raises is named without it. At most
    MAX_ERROR_TEXT characters. The grading worker uses this too (it loads this file by path).
    """
    try:
        text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    except BaseException:  # noqa: BLE001 - a learner's __str__ may raise anything
        text = f"{type(exc).__name__} (its message could not be shown)"
    if filename is not None:
        line = None
        try:
            for frame in traceback.extract_tb(exc.__traceback__):
                if frame.filename == filename:
                    line = frame.lineno
        except Exception:  # noqa: BLE001 - a traceback that cannot be read names no line
            line = None
        if line is not None:
            text += f" (line {line}{where})"
    return text[:MAX_ERROR_TEXT]


def _error_text(exc: BaseException, answer: object) -> str:
    """The error of an answer, with the line of the answer cell where it was raised when known."""
    code = getattr(answer, "__code__", None)
    return error_text(exc, getattr(code, "co_filename", None), where=" of the answer cell")


def _copy_inputs(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh copies, so an answer that writes into its inputs cannot change what is judged."""
    return tuple(copy.deepcopy(a) for a in args)


def run_case(
    answer: object, args: tuple[Any, ...], *, call: bool = True, trace_memory: bool = False
) -> Outcome:
    """Call ``answer(*args)`` (or take ``answer`` itself when ``call`` is False) and describe the result.

    Never raises for anything the answer does (KeyboardInterrupt aside). With ``trace_memory``
    the peak memory traced by tracemalloc during the call is recorded in ``peak_bytes``.
    """
    if not call:
        if any(answer is p for p in _PLACEHOLDERS):
            return Outcome(NOT_IMPLEMENTED)
        return Outcome(RETURNED, describe_value(answer))
    if answer is None:
        return Outcome(NOT_IMPLEMENTED)
    if not callable(answer):
        return Outcome(RAISED, error=f"expected a function, got {_type_name(answer)}")
    inputs = _copy_inputs(args)
    peak = None
    started = False
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if trace_memory:  # the peak is measured from here, so earlier garbage does not count
                started = not tracemalloc.is_tracing()
                if started:
                    tracemalloc.start()
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
            result = answer(*inputs)
            if trace_memory:
                peak = max(tracemalloc.get_traced_memory()[1] - base, 0)
    except NotImplementedError:
        return Outcome(NOT_IMPLEMENTED)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a learner's SystemExit must not end the check
        return Outcome(RAISED, error=_error_text(exc, answer))
    finally:
        if started:
            tracemalloc.stop()
    return Outcome(RETURNED, describe_value(result), peak_bytes=peak)
