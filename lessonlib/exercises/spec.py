"""The parts of an exercise definition: cases, expected outputs, diagnoses and requirements.

An :class:`Exercise` holds everything about one exercise function in one place: its points,
its public cases, how to draw hidden cases from a seed, the reference that gives each case's
expected output, how a returned value is compared, and the misconceptions it can recognise.
Diagnoses look only at behaviour: what the answer returned on chosen inputs, compared with
what a known wrong idea would return on the same inputs.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lessonlib.exercises.results import FailedCase
from lessonlib.exercises.runner import Outcome, Value, text_of

RTOL = 1e-5
ATOL = 1e-5  # loose enough for float32 answers; every misconception differs by far more


@dataclass(frozen=True, eq=False)
class Case:
    """One call of an answer: positional inputs (arrays, ints, floats) and what they probe.

    id: stable within an exercise ("public-1", "hidden-3"). tags: which behaviours the inputs
    expose (e.g. "empty-row", "large-scores"), used by diagnoses. call: False when the answer is
    a value rather than a function. trace_memory: record peak traced memory during the call.
    hidden: drawn from the assignment's seed (:meth:`Exercise.hidden_cases`): a learner is told
    how many such cases passed, never which, nor their description or inputs.
    """

    id: str
    description: str
    args: tuple[Any, ...] = ()
    tags: frozenset[str] = frozenset()
    call: bool = True
    trace_memory: bool = False
    hidden: bool = False


@dataclass(frozen=True)
class Mismatch:
    """Why a returned value is not the expected one, in words a learner can act on."""

    reason: str  # stable code: wrong_type, not_an_array, wrong_shape, wrong_dtype, non_finite, wrong_values
    expected: str
    got: str
    detail: str = ""


@dataclass
class Record:
    """One case after judging: its outcome, the expected output, the usable returned value."""

    case: Case
    outcome: Outcome
    expected: Any
    got: Any  # the returned value in the exercise's output form, or None when unusable
    failure: FailedCase | None

    @property
    def passed(self) -> bool:
        return self.failure is None


# --- formatting ----------------------------------------------------------------------------------


def format_array(a: np.ndarray, limit: int = 12) -> str:
    """Small arrays in full (6 decimals), larger ones by shape and dtype."""
    if a.size <= limit:
        body = np.array2string(a, precision=6, separator=", ", max_line_width=88)
        return f"{body}  (shape {a.shape}, {a.dtype})"
    return f"an array of shape {a.shape}, {a.dtype}"


def _index_text(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _scalar_text(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    x = float(x)
    if np.isnan(x) or np.isinf(x):
        return str(x)
    return f"{x:.6g}"


def describe_returned(value: Value | None) -> str:
    """A one-line description of what came back (type, shape, values when small)."""
    if value is None:
        return "nothing"
    if text_of(value) is not None:
        return f"str {text_of(value)!r}"
    if value.type_name in ("list", "tuple") and value.items is not None:
        if isinstance(value.data, np.ndarray) and not any(i.type_name == "numpy.ndarray" for i in value.items):
            if value.data.size <= 12:
                return f"a {value.type_name}: {format_array(value.data)}"
            return f"a {value.type_name} (as an array: shape {value.data.shape}, {value.data.dtype})"
        inner = ", ".join(_short(item) for item in value.items[:4])
        more = ", ..." if len(value.items) > 4 else ""
        return f"a {value.type_name} of {len(value.items)} item(s): ({inner}{more})"
    if isinstance(value.data, np.ndarray):
        return format_array(value.data)
    if value.data is None:
        if value.type_name == "numpy.ndarray":
            return "a NumPy array of Python objects (dtype object), not of numbers"
        return f"a {value.type_name}"
    return f"{value.type_name} {value.data!r}"


def _short(value: Value) -> str:
    if isinstance(value.data, np.ndarray) and value.type_name == "numpy.ndarray":
        return f"array {value.data.shape}"
    if isinstance(value.data, np.ndarray):
        return f"{value.type_name} of shape {value.data.shape}"
    if value.data is None:
        return value.type_name
    return f"{value.type_name} {value.data!r}"


# --- closeness, used by outputs and by diagnoses -------------------------------------------------


def _as_bool_if_binary(a: np.ndarray) -> np.ndarray | None:
    if a.dtype == bool:
        return a
    if np.issubdtype(a.dtype, np.number) and np.all((a == 0) | (a == 1)):
        return a.astype(bool)
    return None


def close(got: Any, target: Any) -> bool:
    """True when ``got`` equals ``target``: arrays of one shape (NaN = NaN), numbers, tuples, bools, text."""
    if isinstance(target, (bool, np.bool_, str)):
        return type(got) is type(target) and got == target
    if isinstance(target, tuple):
        return (
            isinstance(got, tuple) and len(got) == len(target)
            and all(close(g, t) for g, t in zip(got, target))
        )
    if isinstance(target, np.ndarray):
        if not isinstance(got, np.ndarray) or got.shape != target.shape:
            return False
        if target.dtype == bool or got.dtype == bool:
            g, t = _as_bool_if_binary(got), _as_bool_if_binary(target)
            return g is not None and t is not None and bool(np.array_equal(g, t))
        try:
            return bool(np.allclose(got, target, rtol=RTOL, atol=ATOL, equal_nan=True))
        except TypeError:
            return False
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, float, np.number)):
        return False
    if isinstance(target, int) and isinstance(got, int):
        return got == target
    return bool(np.isclose(float(got), float(target), rtol=RTOL, atol=ATOL))


# --- outputs: how a returned value is compared with the expected one -----------------------------


@dataclass(frozen=True)
class ArrayOutput:
    """A NumPy array of the expected shape; ``kind`` "float" (compared to rtol/atol) or "bool"."""

    kind: str = "float"

    def describe(self, expected: np.ndarray) -> str:
        return format_array(expected)

    def usable(self, value: Value | None) -> np.ndarray | None:
        if value is None or not isinstance(value.data, np.ndarray):
            return None
        return value.data

    def compare(self, value: Value, expected: np.ndarray) -> Mismatch | None:
        want = self.describe(expected)
        what = "boolean array" if self.kind == "bool" else "NumPy array"
        data = value.data
        if value.type_name in ("list", "tuple"):
            detail = ""
            if isinstance(data, np.ndarray) and close(data, expected):
                detail = "Its entries are right: return np.array(...) of them instead."
            return Mismatch(
                "not_an_array", want, describe_returned(value),
                f"Expected a {what} of shape {expected.shape}, not a Python {value.type_name}. {detail}".strip(),
            )
        if not isinstance(data, np.ndarray) or value.type_name != "numpy.ndarray":
            return Mismatch(
                "wrong_type", want, describe_returned(value),
                f"Expected a {what} of shape {expected.shape}, got {value.type_name}.",
            )
        if data.shape != expected.shape:
            detail = f"Expected shape {expected.shape}, got {data.shape}."
            if data.ndim == expected.ndim >= 2 and data.shape[-2:] == expected.shape[-2:][::-1]:
                detail += " The last two axes look swapped."
            return Mismatch("wrong_shape", want, format_array(data), detail)
        if self.kind == "bool":
            return self._compare_bool(data, expected, want)
        return self._compare_float(data, expected, want)

    def _compare_bool(self, data: np.ndarray, expected: np.ndarray, want: str) -> Mismatch | None:
        if data.dtype != bool:
            binary = _as_bool_if_binary(data)
            note = " (its 0/1 pattern is right)" if binary is not None and np.array_equal(binary, expected) else ""
            return Mismatch(
                "wrong_dtype", want, format_array(data),
                f"Expected dtype bool (True = allowed), got {data.dtype}{note}. Build the mask from a "
                "comparison such as j <= i, or convert with .astype(bool).",
            )
        differ = data != expected
        if not differ.any():
            return None
        first = tuple(np.argwhere(differ)[0])
        return Mismatch(
            "wrong_values", want, format_array(data),
            f"{int(differ.sum())} of {differ.size} entries differ; first at {_index_text(first)}: "
            f"expected {bool(expected[first])}, got {bool(data[first])}.",
        )

    def _compare_float(self, data: np.ndarray, expected: np.ndarray, want: str) -> Mismatch | None:
        if data.dtype == bool or not np.issubdtype(data.dtype, np.number) or np.iscomplexobj(data):
            return Mismatch("wrong_dtype", want, format_array(data),
                            f"Expected real numbers, got dtype {data.dtype}.")
        bad = ~np.isfinite(data) & np.isfinite(expected)
        if bad.any():
            first = tuple(np.argwhere(bad)[0])
            return Mismatch(
                "non_finite", want, format_array(data),
                f"{int(bad.sum())} of {bad.size} entries are NaN or infinite where finite numbers were "
                f"expected; first at {_index_text(first)}: expected {_scalar_text(expected[first])}, "
                f"got {_scalar_text(data[first])}.",
            )
        differ = ~np.isclose(data, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
        if not differ.any():
            return None
        first = tuple(np.argwhere(differ)[0])
        largest = float(np.nanmax(np.abs(data - expected)))
        return Mismatch(
            "wrong_values", want, format_array(data),
            f"{int(differ.sum())} of {differ.size} entries differ (largest difference "
            f"{largest:.3g}); first at {_index_text(first)}: expected "
            f"{_scalar_text(expected[first])}, got {_scalar_text(data[first])}.",
        )


@dataclass(frozen=True)
class TupleOutput:
    """A tuple of named arrays, e.g. (output, weights)."""

    names: tuple[str, ...]
    parts: tuple[ArrayOutput, ...]

    def describe(self, expected: tuple[np.ndarray, ...]) -> str:
        return "; ".join(f"{n} {p.describe(e)}" for n, p, e in zip(self.names, self.parts, expected))

    def usable(self, value: Value | None) -> tuple[np.ndarray, ...] | None:
        if value is None or value.items is None or len(value.items) != len(self.parts):
            return None
        got = tuple(p.usable(item) for p, item in zip(self.parts, value.items))
        return None if any(g is None for g in got) else got

    def compare(self, value: Value, expected: tuple[np.ndarray, ...]) -> Mismatch | None:
        want = f"a tuple ({', '.join(self.names)})"
        if value.type_name not in ("tuple", "list") or value.items is None:
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected a tuple ({', '.join(self.names)}), got {value.type_name}.")
        if len(value.items) != len(self.parts):
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected {len(self.parts)} items ({', '.join(self.names)}), "
                            f"got {len(value.items)}.")
        for name, part, item, exp in zip(self.names, self.parts, value.items, expected):
            mismatch = part.compare(item, exp)
            if mismatch is not None:
                return Mismatch(mismatch.reason, f"{name}: {mismatch.expected}", f"{name}: {mismatch.got}",
                                f"In {name}: {mismatch.detail}")
        return None


@dataclass(frozen=True)
class NumberOutput:
    """A single number; ``integer`` requires an int, ``reveal`` False hides the expected value."""

    integer: bool = False
    reveal: bool = True

    def describe(self, expected: float | int) -> str:
        if not self.reveal:
            return "a number (not shown: it is the answer)"
        return f"{'int' if self.integer else 'number'} {expected!r}"

    def usable(self, value: Value | None) -> int | float | None:
        if value is None:
            return None
        data = value.data
        if isinstance(data, np.ndarray) and data.size == 1 and value.type_name == "numpy.ndarray":
            data = data.reshape(()).item()
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            return None
        return data

    def compare(self, value: Value, expected: float | int) -> Mismatch | None:
        want = self.describe(expected)
        got = self.usable(value)
        if got is None:
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected {'an int' if self.integer else 'a number'}, got {value.type_name}.")
        if self.integer and not isinstance(got, int):
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected an int, got {value.type_name} {got!r}: count bytes with "
                            "integer arithmetic (* and //, not /).")
        if not np.isfinite(got):
            return Mismatch("non_finite", want, describe_returned(value), "Expected a finite number.")
        if close(got, expected):
            return None
        shown = f"got {got!r}" if self.reveal else f"{got!r} is not it"
        return Mismatch("wrong_values", want, describe_returned(value), f"Not the expected value: {shown}.")


Output = ArrayOutput | TupleOutput | NumberOutput


# --- diagnoses and requirements ------------------------------------------------------------------

DetectFn = Callable[[Sequence[Record]], list[str]]


@dataclass(frozen=True)
class DiagnosisSpec:
    """A misconception an exercise can recognise.

    name: short and stable (tests and the grader key on it). title: a few words. message: what
    the answer's behaviour shows. hint: what to do. section: key of the section to reread.
    detect: given every judged case, the ids of the failed cases that show this behaviour.
    """

    name: str
    title: str
    message: str
    hint: str
    section: str
    detect: DetectFn


@dataclass(frozen=True)
class Requirement:
    """A property judged across cases (e.g. memory growth), reported as one more case.

    It applies only when the judged cases include one tagged with one of ``tags``. ``weight``:
    the fraction of the points earned on the cases that is lost when the requirement fails.
    """

    id: str
    description: str
    judge: Callable[[Sequence[Record]], FailedCase | None]
    tags: frozenset[str] = frozenset()
    weight: float = 0.5

    def applies(self, cases: Sequence[Case]) -> bool:
        return any(self.tags & c.tags for c in cases)


def _quiet(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a model or predicate with NumPy warnings silenced; None if it raises."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception:
        return None


def _some_finite(x: Any) -> bool:
    if isinstance(x, (str, bool, np.bool_)):
        return True
    if isinstance(x, tuple):
        return all(_some_finite(part) for part in x)
    return bool(np.isfinite(np.asarray(x, dtype=float)).any())


def all_finite(x: Any) -> bool:
    """True when every entry of an array, number or tuple of arrays is finite."""
    if isinstance(x, tuple):
        return all(all_finite(part) for part in x)
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def overflows_only_on(tag: str) -> DetectFn:
    """Detect overflow: non-finite output on cases tagged ``tag`` while another case came out finite."""

    def detect(records: Sequence[Record]) -> list[str]:
        finite_elsewhere = any(
            tag not in r.case.tags and r.got is not None and _quiet(all_finite, r.got) for r in records
        )
        if not finite_elsewhere:
            return []
        return [r.case.id for r in _candidates(records, frozenset({tag})) if not _quiet(all_finite, r.got)]

    return detect


def fails_only_on(tag: str) -> DetectFn:
    """Detect a mistake that shows on the cases tagged ``tag`` alone: every other case passed, and a
    tagged one failed with a usable value (a guard that turned NaN into numbers, say)."""

    def detect(records: Sequence[Record]) -> list[str]:
        others = [r for r in records if tag not in r.case.tags]
        if not others or not all(r.passed for r in others):
            return []
        return [r.case.id for r in _candidates(records, frozenset({tag}))]

    return detect


def wrong_only_on(tag: str, answer: object) -> DetectFn:
    """Detect an answer right on every case but those tagged ``tag``, where it returned ``answer`` on
    every one (a tolerance that hides the faint effect those cases carry, say)."""

    def detect(records: Sequence[Record]) -> list[str]:
        tagged = [r for r in records if tag in r.case.tags]
        if not tagged or any(r.got is not answer for r in tagged):
            return []
        if not all(r.passed for r in records if tag not in r.case.tags):
            return []
        return [r.case.id for r in tagged]

    return detect


def _candidates(records: Sequence[Record], tags: frozenset[str] | None) -> list[Record]:
    return [
        r for r in records
        if not r.passed and r.got is not None and (tags is None or tags & r.case.tags)
    ]


def matches_model(*models: Callable[..., Any], tags: Sequence[str] | None = None) -> DetectFn:
    """Detect a misconception by re-enacting it: the answer returned what ``model(*args)`` returns.

    A model is claimed only when the answer returned what the model returns on every case the model
    speaks to (it may return None for a case it cannot tell apart): where the model goes wrong, the
    answer went wrong the same way, and where the model is right, so was the answer. One case where
    the answer did something else contradicts the model, and then it names nothing. The cases named
    are those where the model's output differs from the expected one. Several models may describe
    variants of one mistake.
    """
    wanted = frozenset(tags) if tags is not None else None

    def detect(records: Sequence[Record]) -> list[str]:
        hits: list[str] = []
        for model in models:
            found, contradicted = [], False
            for r in records:
                if wanted is not None and not wanted & r.case.tags:
                    continue
                predicted = _quiet(model, *r.case.args)
                if predicted is None:
                    continue  # the model cannot speak to this case
                wrong = not close(predicted, r.expected)
                if wrong and not _some_finite(predicted):
                    continue  # a model that gives only NaN here cannot be told from other failures
                if r.got is None or not close(r.got, predicted):
                    contradicted = True
                    break
                if wrong:
                    found.append(r.case.id)
            if not contradicted:
                hits += [h for h in found if h not in hits]
        order = {r.case.id: i for i, r in enumerate(records)}
        return sorted(hits, key=order.get)

    return detect


def shows(predicate: Callable[[Case, Any, Any], bool], tags: Sequence[str] | None = None) -> DetectFn:
    """Detect a misconception by a property of the failed output: ``predicate(case, got, expected)``."""
    wanted = frozenset(tags) if tags is not None else None

    def detect(records: Sequence[Record]) -> list[str]:
        return [r.case.id for r in _candidates(records, wanted) if _quiet(predicate, r.case, r.got, r.expected)]

    return detect


def shows_on_every(predicate: Callable[[Case, Any, Any], bool], tags: Sequence[str] | None = None) -> DetectFn:
    """Like :func:`shows`, but only when every failed case with a usable value (among ``tags``) has the
    property: one failed case without it contradicts the claim, and then nothing is named."""
    wanted = frozenset(tags) if tags is not None else None

    def detect(records: Sequence[Record]) -> list[str]:
        failed = _candidates(records, wanted)
        if not failed or not all(_quiet(predicate, r.case, r.got, r.expected) for r in failed):
            return []
        return [r.case.id for r in failed]

    return detect


def any_of(*detectors: DetectFn) -> DetectFn:
    """Detect with several detectors; a case shown by any of them counts once."""

    def detect(records: Sequence[Record]) -> list[str]:
        hits: list[str] = []
        for d in detectors:
            hits += [h for h in d(records) if h not in hits]
        return hits

    return detect


# --- the exercise ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exercise:
    """One exercise: its contract, points, cases, reference, output comparison and diagnoses."""

    name: str
    notebook: str  # the exercise notebook's file name, e.g. "02_masking.ipynb"
    signature: str
    points: float
    reference: Callable[..., Any]
    output: Output
    public: Callable[[], list[Case]]
    hidden: Callable[[np.random.Generator], list[Case]] | None
    diagnoses: tuple[DiagnosisSpec, ...]
    stub_hint: str
    requirements: tuple[Requirement, ...] = ()
    kind: str = "function"  # or "value": the answer is a number, not a function
    may_change: frozenset[int] = frozenset()  # arguments the answer may write into (by position)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The answer's parameter names, read from ``signature``."""
        inside = self.signature.partition("(")[2].partition(")")[0]
        return tuple(name.strip() for name in inside.split(",") if name.strip())

    def public_cases(self) -> list[Case]:
        """The cases a learner's check runs (deterministic)."""
        return self.public()

    def hidden_cases(self, seed: int) -> list[Case]:
        """Cases the learner has not seen, drawn from ``seed`` (same seed, same cases)."""
        if self.hidden is None:
            return []
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(self.name.encode())])
        return [replace(c, hidden=True) for c in numbered(self.hidden(rng), prefix="hidden")]

    def expected(self, case: Case) -> Any:
        """The reference output for ``case``."""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return self.reference(*case.args)


def numbered(cases: Sequence[Case], prefix: str = "public") -> list[Case]:
    """Give cases the ids prefix-1, prefix-2, ... in order."""
    return [replace(c, id=f"{prefix}-{i}") for i, c in enumerate(cases, start=1)]
