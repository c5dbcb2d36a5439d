"""Run one answer on one case's inputs and describe what came back as plain data.

This is the only part of the exercises package that touches learner code. It imports nothing
but NumPy and the standard library, so an isolated worker process can use it on its own:

    outcome = run_case(answer, case.args, call=case.call, trace_memory=case.trace_memory)

The outcome holds arrays, numbers and strings only (no learner objects), so it can cross a
process boundary as JSON plus ``.npy`` files and be judged elsewhere by :func:`judge`.
"""

from __future__ import annotations

import copy
import json
import math
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
# Given by check(), which runs cases in the learner's kernel with a time limit (a grader has its own).
TIMED_OUT = "timed_out"  # the answer had not returned when the case's time was up
NOT_RUN = "not_run"  # an earlier case timed out, so this one was not started

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
    answer is still a placeholder such as None), "raised", or from ``check()`` "timed_out" and
    "not_run". error: the exception's type and message, with the line of the answer where it was
    raised when known; for a returned value, which of its inputs the answer changed in place, if
    any (read it with :func:`changed_arguments`). peak_bytes: peak traced
    memory during the call, when the case asked for it. error_types and errno: see
    :func:`error_types`; a status is decided from these, never from the message.
    """

    status: str
    value: Value | None = None
    error: str | None = None
    peak_bytes: int | None = None
    error_types: tuple[str, ...] = ()
    errno: int | None = None


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


MAX_TEXT_BYTES = 200  # a returned str is kept as at most this many UTF-8 bytes


def text_of(value: Value | None) -> str | None:
    """The text of a returned ``str`` (see :func:`describe_value`), else None."""
    if value is None or value.type_name != "str" or not isinstance(value.data, np.ndarray):
        return None
    if value.data.dtype != np.uint8 or value.data.ndim != 1:
        return None
    return value.data.tobytes().decode("utf-8", errors="replace")


def describe_value(obj: object, depth: int = 0) -> Value:
    """Reduce a returned object to a :class:`Value` (arrays copied, no learner objects kept).

    A ``str`` is kept as its UTF-8 bytes, a uint8 array of at most 200 entries, so that it
    crosses a process boundary as plain data like every other value (read it with :func:`text_of`).
    """
    name = _type_name(obj)
    if isinstance(obj, str):
        raw = obj.encode("utf-8", errors="replace")[:MAX_TEXT_BYTES]
        return Value("str", np.frombuffer(raw, dtype=np.uint8).copy())
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


def error_types(exc: BaseException) -> tuple[str, ...]:
    """The exception's class and the classes it derives from, most specific first, as "module.Name"
    ("Name" for built-in ones; BaseException and object left out): ``("BlockingIOError", "OSError",
    "Exception")``. A class that learner code defines is named after its module (``__main__``), so
    text that only looks like a system error names no built-in class. Never raises."""
    try:
        names = []
        for cls in type(exc).__mro__[:18]:
            module = type.__dict__["__module__"].__get__(cls)  # what the class says, never a property of it
            module = module if isinstance(module, str) else "?"
            if cls not in (BaseException, object):
                names.append(cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}")
        return tuple(n[:200] for n in names[:16])
    except Exception:  # noqa: BLE001 - a learner's class may be odd in any way
        return ()


def raised(exc: BaseException, filename: str | None = None, *, where: str = "") -> Outcome:
    """The outcome of an answer that raised ``exc``: its text (see :func:`error_text`), its classes
    and, for an OSError, its errno."""
    errno = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    return Outcome(RAISED, error=error_text(exc, filename, where=where), error_types=error_types(exc),
                   errno=errno if isinstance(errno, int) and not isinstance(errno, bool) else None)


def _raised(exc: BaseException, answer: object) -> Outcome:
    """The outcome of an answer that raised, with the line of the answer cell where it was raised when known."""
    code = getattr(answer, "__code__", None)
    return raised(exc, getattr(code, "co_filename", None), where=" of the answer cell")


def _copy_inputs(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh copies, so an answer that writes into its inputs cannot change what is judged.

    A probe description (a string starting ``probe:``) becomes the function it describes.
    """
    return tuple(build_probe(a) if is_probe(a) else copy.deepcopy(a) for a in args)


CHANGED_PREFIX = "changed its inputs in place: argument "


def _changed(args: tuple[Any, ...], inputs: tuple[Any, ...]) -> tuple[int, ...]:
    """Positions of the array arguments whose copy the answer wrote into (NaN equal to NaN)."""
    changed = []
    for i, (given, seen) in enumerate(zip(args, inputs)):
        if not isinstance(given, np.ndarray):
            continue
        same = seen.shape == given.shape and seen.dtype == given.dtype
        if same:
            nan = given.dtype.kind in "fc"
            same = bool(np.array_equal(seen, given, equal_nan=nan))
        if not same:
            changed.append(i)
    return tuple(changed)


def changed_arguments(outcome: Outcome) -> tuple[int, ...]:
    """The positions (from 0) of the arguments a returned answer changed in place; () for none."""
    error = outcome.error or ""
    if outcome.status != RETURNED or not error.startswith(CHANGED_PREFIX):
        return ()
    try:
        return tuple(int(i) for i in error[len(CHANGED_PREFIX):].split(", argument "))
    except ValueError:
        return ()


def run_case(
    answer: object, args: tuple[Any, ...], *, call: bool = True, trace_memory: bool = False
) -> Outcome:
    """Call ``answer(*args)`` (or take ``answer`` itself when ``call`` is False) and describe the result.

    Never raises for anything the answer does (KeyboardInterrupt aside). With ``trace_memory``
    the peak memory traced by tracemalloc during the call is recorded in ``peak_bytes``. The
    answer gets copies of the inputs; a copy it wrote into is reported in ``error``.
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
        return _raised(exc, answer)
    finally:
        if started:
            tracemalloc.stop()
    changed = _changed(args, inputs)
    error = CHANGED_PREFIX + ", argument ".join(map(str, changed)) if changed else None
    return Outcome(RETURNED, describe_value(result), error=error, peak_bytes=peak)


# --- probes: functions handed to an answer, described as plain data -----------------------------
#
# Some exercises take a function as input (a layer to test for causality, an attention function
# whose mask polarity is unknown). A case describes it as a string, "probe:" + JSON, so that it
# crosses to a worker process like any other input; the function is rebuilt here from the
# description, with weights drawn from its seed (same description, same function).

PROBE_PREFIX = "probe:"
# In the grader a probe crosses to the learner's process as a handle only, "probe-handle:KIND:TOKEN":
# the function it stands for runs in another process (the worker's keeper), which is asked through
# ``REMOTE_CALL`` (set by the worker). Nothing in the learner's process tells which layer it is.
HANDLE_PREFIX = "probe-handle:"
REMOTE_CALL: Any = None  # (handle, arrays) -> ndarray, installed by the grading worker
LAYER_MASKS = ("none", "causal", "causal-rounding", "inverted", "next", "last", "early", "faint")
LAYER_POSITIONS = ("none", "sinusoidal", "learned", "rope", "rowwise", "distance", "faint")
DISTANCE_SLOPE = 0.5  # the "distance" layer's penalty per step of |i - j|
FAINT = 1e-3  # the "faint" layers: slope of their distance bias, and how much of the next input leaks
EMPTY_ROW_POLICIES = ("nan", "zeros", "uniform")
MASK_POLARITIES = ("attend", "blocked", "additive")


def is_probe(arg: object) -> bool:
    return isinstance(arg, str) and arg.startswith((PROBE_PREFIX, HANDLE_PREFIX))


def probe(kind: str, **fields: Any) -> str:
    """The description of a probe function: ``probe("layer", d=4, seed=1, mask="causal")``."""
    return PROBE_PREFIX + json.dumps({"kind": kind, **fields}, sort_keys=True)


def probe_fields(description: str) -> dict[str, Any]:
    """The fields of a probe description (the inverse of :func:`probe`)."""
    if not is_probe(description):
        raise ValueError(f"not a probe description: {description[:40]!r}")
    return json.loads(description[len(PROBE_PREFIX):])


def probe_handle(kind: str, token: str) -> str:
    """What the learner's process gets in place of a probe description in the grader."""
    return f"{HANDLE_PREFIX}{kind}:{token}"


def build_probe(description: str) -> Any:
    """The function a probe description (or, in the grader, a handle) stands for.

    A plain function of the probe's signature, so that an answer has to test it from the outside.
    From a description the layer runs in this process (a learner's own check: readable, and worth
    no points); from a handle every call goes to ``REMOTE_CALL``, so the mask or polarity is in no
    attribute, closure or frame of this process.
    """
    if description.startswith(HANDLE_PREFIX):
        kind = description[len(HANDLE_PREFIX):].split(":", 1)[0]
        return _probe_function(kind, _remote(description))
    fields = probe_fields(description)
    kind = fields.pop("kind")
    if kind == "layer":
        return _probe_function(kind, ProbeLayer(**fields))
    if kind == "attention":
        return _probe_function(kind, ProbeAttention(**fields))
    raise ValueError(f"unknown probe kind {kind!r}")


def _probe_function(kind: str, impl: Any) -> Any:
    if kind == "layer":

        def layer(x: np.ndarray) -> np.ndarray:
            """(length, d_model) -> the outputs of its positions, or of its last ones, (n, d_model);
            (batch, length, d_model) -> (batch, length, d_model) for a batch-first layer."""
            return impl(x)

        return layer
    if kind == "attention":

        def attention_fn(query: Any, key: Any, value: Any, mask: Any) -> np.ndarray:
            """query (..., L, d), key (..., S, d), value (..., S, d_v), a mask -> output (..., L, d_v)."""
            return impl(query, key, value, mask)

        return attention_fn
    raise ValueError(f"unknown probe kind {kind!r}")


def _remote(handle: str) -> Any:
    """A callable that sends its arguments, as arrays, to the process holding the probe."""

    def call(*args: Any) -> np.ndarray:
        arrays = []
        for a in args:
            arr = np.asarray(a)
            if arr.dtype == object:
                raise TypeError("the probe takes arrays of numbers or booleans, got an object array")
            arrays.append(arr)
        if REMOTE_CALL is None:
            raise RuntimeError("this probe can only be called while grading")
        return REMOTE_CALL(handle, arrays)

    return call


def call_probe(description: str, arrays: list[np.ndarray]) -> np.ndarray:
    """Run the probe ``description`` on ``arrays`` (the keeper's side of a remote call), refusing
    inputs far larger than any exercise needs, so that one call stays cheap."""
    for a in arrays:
        if a.size > MAX_PROBE_ELEMENTS:
            raise ValueError(f"the probe takes inputs of at most {MAX_PROBE_ELEMENTS:,} numbers while grading, "
                             f"got an array of shape {a.shape}")
    kind = probe_fields(description)["kind"]
    if kind == "layer" and arrays and arrays[0].ndim >= 1 and arrays[0].shape[-2 if arrays[0].ndim >= 2 else 0] \
            > MAX_PROBE_LENGTH:
        raise ValueError(f"the layer takes at most {MAX_PROBE_LENGTH} positions while grading")
    if kind == "attention" and len(arrays) == 4 and min(arrays[0].ndim, arrays[1].ndim) >= 2 \
            and math.prod(arrays[0].shape[:-1]) * arrays[1].shape[-2] > MAX_PROBE_ELEMENTS * 16:
        raise ValueError(f"the attention function takes at most {MAX_PROBE_ELEMENTS * 16:,} scores while grading")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(build_probe(description)(*arrays))


MAX_PROBE_ELEMENTS = 1 << 16  # numbers in one input of a probe call while grading
MAX_PROBE_LENGTH = 512  # positions of a layer probe's input while grading


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; -inf scores get weight 0 (a row of -inf gives NaN)."""
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - top)
    return e / e.sum(axis=-1, keepdims=True)


class ProbeLayer:
    """A one-head self-attention layer ``(n, d) -> (n, d)`` with a chosen mask and position scheme.

    mask: "none", "causal" (key j <= query i), "causal-rounding" (causal, but every output is
    shifted by the sum of all inputs and back, so later inputs move earlier outputs by rounding
    only), "inverted" (j >= i), "next" (j <= i + 1, one step of the future), "last" (causal, and
    every query also sees the last position), "early" (causal, and the first returned position
    also sees the one after it), "faint" (causal, and every output but the last moves by FAINT
    times the next position's input: a leak far above rounding and far below a loose tolerance).
    position: "none", "sinusoidal" or "learned" (added to the input), "rope" (queries and keys
    rotated), "distance" (the bias -|i - j| / 2 added to the scores, the same for both directions),
    "faint" (the bias -FAINT |i - j|), or "rowwise" (no attention at all: tanh(x W) row by row).
    batch_first: the shape libraries use instead, ``(batch, n, d) -> (batch, n, d)``, each sequence
    on its own, with two heads of width d/2 and an output projection W_o (d a multiple of 4).
    queries: return the outputs of the last ``queries`` positions only, ``(queries, d)`` (a step
    that decodes with a cache); None returns every position.
    """

    def __init__(self, d: int, seed: int, mask: str = "none", position: str = "none",
                 batch_first: bool = False, queries: int | None = None) -> None:
        if mask not in LAYER_MASKS or position not in LAYER_POSITIONS or int(d) % (4 if batch_first else 2):
            raise ValueError(f"unknown layer mask {mask!r} or position {position!r}, or width {d} not "
                             f"a multiple of {4 if batch_first else 2}")
        self.d, self.mask, self.position, self.batch_first = int(d), mask, position, bool(batch_first)
        self.queries = None if queries is None else int(queries)
        rng = np.random.default_rng(int(seed))
        self._w = rng.normal(size=(3, self.d, self.d)) / math.sqrt(self.d)  # (3, d, d): W_q, W_k, W_v
        self._table = rng.normal(size=(64, self.d))  # (64, d) learned positions
        self._w_o = rng.normal(size=(self.d, self.d)) / math.sqrt(self.d) if batch_first else None  # (d, d)

    def __repr__(self) -> str:
        if self.batch_first:
            return f"<layer: (batch, n, {self.d}) -> (batch, n, {self.d})>"
        return f"<layer: (n, {self.d}) -> (n, {self.d})>"

    def _first(self, n: int) -> int:
        """The first position whose output is returned."""
        return 0 if self.queries is None else n - self.queries

    def _allowed(self, n: int) -> np.ndarray:
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]  # (n, 1), (1, n)
        first = self._first(n)
        rules = {
            "none": np.ones((n, n), dtype=bool), "causal": j <= i, "causal-rounding": j <= i, "faint": j <= i,
            "inverted": j >= i, "next": j <= i + 1, "last": (j <= i) | (j == n - 1),
            "early": (j <= i) | ((i == first) & (j == first + 1)),
        }
        return np.broadcast_to(rules[self.mask], (n, n))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.batch_first:
            if x.ndim != 3 or x.shape[2] != self.d:
                raise ValueError(f"this layer takes x of shape (batch, length, {self.d}), got {x.shape}")
            return np.stack([self._sequence(seq) for seq in x])  # (batch, n, d), each sequence on its own
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"this layer takes x of shape (length, {self.d}), got {x.shape}")
        return self._sequence(x)

    def _heads(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(n, d) queries, keys, values -> (n, d): one head, or two of width d/2 joined and projected."""
        if not self.batch_first:
            return self._attend(q, k, v)
        half = self.d // 2
        heads = [self._attend(q[:, s], k[:, s], v[:, s]) for s in (slice(0, half), slice(half, None))]
        return np.concatenate(heads, axis=1) @ self._w_o  # (n, d)

    def _attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """One head: (n, d_h) each -> (n, d_h)."""
        n, d_h = q.shape
        if self.position == "rope":
            q, k = _rotate(q), _rotate(k)
        out = np.zeros((n, v.shape[1]))
        allowed = self._allowed(n)
        for i in range(n):  # one query at a time: row i reads only the keys it may see
            keys = np.flatnonzero(allowed[i])
            scores = k[keys] @ q[i] / math.sqrt(d_h)  # (n_allowed,)
            if self.position in ("distance", "faint"):
                slope = DISTANCE_SLOPE if self.position == "distance" else FAINT
                scores = scores - slope * np.abs(keys - i)  # symmetric: blind to the direction
            w = _softmax_rows(scores)  # (n_allowed,)
            out[i] = w @ v[keys]
        return out

    def _sequence(self, x: np.ndarray) -> np.ndarray:
        """One sequence (n, d) -> (n, d), or its last ``queries`` rows."""
        n = x.shape[0]
        if self.queries is not None and not 1 <= self.queries <= n:
            raise ValueError(f"this layer returns the last {self.queries} positions: x needs at least "
                             f"{self.queries} rows, got {n}")
        if self.position == "rowwise":
            return np.tanh(np.stack([row @ self._w[0] for row in x]))[self._first(n):]  # each row on its own
        h = x
        if self.position == "sinusoidal":
            pos = np.arange(n)[:, None] / 10000.0 ** (np.arange(0, self.d, 2) / self.d)  # (n, d/2)
            table = np.zeros((n, self.d))
            table[:, 0::2], table[:, 1::2] = np.sin(pos), np.cos(pos)
            h = x + table
        elif self.position == "learned":
            if n > len(self._table):
                raise ValueError(f"this layer has learned positions for at most {len(self._table)} tokens")
            h = x + self._table[:n]
        q, k, v = h @ self._w[0], h @ self._w[1], h @ self._w[2]  # (n, d) each
        out = self._heads(q, k, v)  # (n, d)
        if self.mask == "causal-rounding":
            total = float(x.sum())  # depends on every position, the future included
            out = (out + total) - total
        elif self.mask == "faint":
            out[:-1] += FAINT * x[1:]  # (n - 1, d): each position feels the next input, faintly
        return out[self._first(n):]  # (queries, d): the returned positions only


def _rotate(x: np.ndarray) -> np.ndarray:
    """Interleaved RoPE at positions 0 .. n-1 (base 10000)."""
    n, d = x.shape
    angle = np.arange(n)[:, None] * 10000.0 ** (-2.0 * np.arange(d // 2) / d)  # (n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * cos - x[:, 1::2] * sin
    out[:, 1::2] = x[:, 0::2] * sin + x[:, 1::2] * cos
    return out


class ProbeAttention:
    """``attention_fn(query, key, value, mask) -> output``: attention with a mask of one convention.

    query (..., L, d), key (..., S, d), value (..., S, d_v). polarity "attend" (True, or a nonzero
    number, = may attend), "blocked" (True or nonzero = blocked) or "additive" (the number is added
    to the scores; only with ``keys``). keys False: mask boolean, broadcastable to (..., L, S).
    keys True: mask holds one number per key, shape (..., S), as a key-padding mask.
    scale multiplies the usual 1/sqrt(d). dtype: the precision it computes and returns in. empty:
    what a row with no allowed key gets: "nan", "zeros", or "uniform" (a large finite fill).
    """

    def __init__(self, polarity: str, scale: float = 1.0, dtype: str = "float64", empty: str = "nan",
                 keys: bool = False) -> None:
        if polarity not in MASK_POLARITIES or empty not in EMPTY_ROW_POLICIES or (polarity == "additive" and not keys):
            raise ValueError(f"unknown polarity {polarity!r} or empty-row policy {empty!r}")
        self.polarity, self.scale, self.dtype, self.empty = polarity, float(scale), np.dtype(dtype), empty
        self.keys = bool(keys)

    def __repr__(self) -> str:
        return "<attention_fn(query, key, value, mask) -> output>"

    def _key_mask(self, mask: np.ndarray, k: np.ndarray) -> np.ndarray:
        """(..., 1, S) in this function's dtype, from a key mask of shape (..., S)."""
        if mask.dtype.kind not in "biuf" or mask.shape != k.shape[:-1]:
            raise ValueError(f"the mask holds one number per key: shape {k.shape[:-1]} (batch, S) for keys of "
                             f"shape {k.shape}, got {mask.dtype} of shape {mask.shape}")
        return mask.astype(self.dtype)[..., None, :]

    def __call__(self, query: Any, key: Any, value: Any, mask: Any) -> np.ndarray:
        mask = np.asarray(mask)
        if mask.dtype != bool and not self.keys:
            raise TypeError(f"mask must be a boolean array, got dtype {mask.dtype}")
        q, k, v = (np.asarray(a, dtype=self.dtype) for a in (query, key, value))
        if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
            raise ValueError("query, key and value need shapes (..., L, d), (..., S, d) and (..., S, d_v)")
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"query width {q.shape[-1]} differs from key width {k.shape[-1]}")
        scores = q @ np.swapaxes(k, -1, -2) * self.dtype.type(self.scale / math.sqrt(q.shape[-1]))  # (..., L, S)
        if self.keys:
            mask = self._key_mask(mask, k)  # (..., 1, S)
        try:
            mask = np.broadcast_to(mask, scores.shape)
        except ValueError:
            raise ValueError(
                f"a mask of shape {mask.shape} does not broadcast to the scores' shape {scores.shape}"
            ) from None
        with np.errstate(invalid="ignore", over="ignore"):
            if self.polarity == "additive":
                scores = scores + mask  # 0 keeps a key as it is, -inf removes it
                allowed = scores > -np.inf
            else:
                allowed = (mask != 0) if self.polarity == "attend" else (mask == 0)
            if self.empty == "uniform":
                fill = self.dtype.type(np.finfo(self.dtype).min)
            else:
                fill = self.dtype.type(-np.inf)
            weights = _softmax_rows(np.where(allowed, scores, fill))  # (..., L, S)
        if self.empty == "zeros":
            weights = np.where(allowed.any(axis=-1, keepdims=True), weights, self.dtype.type(0))
        return (weights @ v).astype(self.dtype)  # (..., L, d_v)
