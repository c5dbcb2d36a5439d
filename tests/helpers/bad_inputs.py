"""Hypothesis strategies for the bad-input tests: valid arguments for every public function, and
ways to spoil one of them.

A :class:`Spec` holds a strategy of valid keyword arguments (consistent with each other, and
large enough that running the function would allocate far more than a refusal may) and, for each
argument, a function from those valid arguments to a strategy of bad values for it. The bad values
are the kinds a learner passes: None, strings, complex, object, string and boolean arrays, NaN and
infinities, empty arrays, wrong shapes, numbers out of range and sizes no machine holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

Kwargs = dict[str, Any]
BadValues = Callable[[Kwargs], st.SearchStrategy]

HUGE = 10**12  # a size no machine holds


@dataclass
class Spec:
    """How to call one public function with valid arguments, and how to spoil each of them."""

    call: Callable[..., Any]
    valid: st.SearchStrategy  # of keyword-argument dicts
    bad: dict[str, BadValues]
    labels: dict[str, str] = field(default_factory=dict)  # the word the message must hold, when not the name

    def label(self, name: str) -> str:
        return self.labels.get(name, name)


# --- valid values ----------------------------------------------------------------------------------


def floats(*shape: st.SearchStrategy | int) -> st.SearchStrategy:
    """Float64 arrays in [-2, 2] of a drawn shape, filled from a drawn seed (fast at any size)."""
    sizes = [s if isinstance(s, st.SearchStrategy) else st.just(s) for s in shape]
    return st.builds(lambda seed, *dims: np.random.default_rng(seed).uniform(-2.0, 2.0, dims),
                     st.integers(0, 2**16), *sizes)


def kwargs(**parts: st.SearchStrategy | Any) -> st.SearchStrategy:
    """A dict strategy from per-argument strategies or plain values."""
    return st.fixed_dictionaries({k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in parts.items()})


def length(low: int = 200, high: int = 400) -> st.SearchStrategy:
    return st.integers(low, high)


# --- bad values ------------------------------------------------------------------------------------


def one_of(*values: Any) -> BadValues:
    """The same bad values whatever the valid arguments."""
    return lambda _kw: st.sampled_from(values)


def spoilers(*make: Callable[[Kwargs], Any]) -> BadValues:
    """Bad values made from the valid arguments, each only when drawn (some copy large arrays)."""
    return lambda kw: st.sampled_from(make).map(lambda f: f(kw))


def _with_entry(a: np.ndarray, value: float) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out.reshape(-1)[out.size // 2] = value
    return out


def bad_array(name: str, *, finite: bool = True, bools: bool = False, none_ok: bool = False, fewer_axes: bool = True,
              neg_inf_ok: bool = False, extra: tuple = ()) -> BadValues:
    """Spoil the valid array ``kw[name]``: not an array, the wrong dtype, empty, non-finite, too few axes.

    ``finite``: NaN and +inf (and -inf unless ``neg_inf_ok``) must be refused. ``bools``: a boolean
    array is fine (the function moves entries), so it is not offered; nor None with ``none_ok``.
    ``fewer_axes``: a 0-d array must be refused. ``extra``: more bad values, or functions of kw giving one.
    """
    make: list[Callable[[Kwargs], Any]] = [
        lambda kw: "text", lambda kw: np.asarray(kw[name]) + 1j, lambda kw: np.asarray(kw[name]).astype(object),
        lambda kw: np.full(np.shape(kw[name]), "x"), lambda kw: np.asarray(kw[name])[..., :0],
        lambda kw: np.asarray(kw[name])[:0],
    ]
    if not none_ok:
        make.append(lambda kw: None)
    if not bools:
        make.append(lambda kw: np.asarray(kw[name]) > 0)
    if finite:
        make += [lambda kw: _with_entry(kw[name], np.nan), lambda kw: _with_entry(kw[name], np.inf)]
        if not neg_inf_ok:
            make.append(lambda kw: _with_entry(kw[name], -np.inf))
    if fewer_axes:
        make.append(lambda kw: np.asarray(kw[name]).reshape(-1)[0])  # a 0-d array
    make += [e if callable(e) else (lambda kw, e=e: e) for e in extra]
    return spoilers(*make)


def bad_ints(minimum: int = 1, *, huge: bool = False, none_ok: bool = False, extra: tuple = ()) -> BadValues:
    """Not an integer (None, a float, a string, a bool), below ``minimum``; with ``huge``, a size no machine holds."""
    values = [2.5, "4", True, minimum - 1, minimum - 7, *extra]
    return one_of(*values, *([] if none_ok else [None]), *([HUGE] if huge else []))


def bad_real(*, positive: bool = False, minimum: float | None = None, none_ok: bool = False,
             extra: tuple = ()) -> BadValues:
    """Not a finite real number (NaN, infinities, a string, a complex number, a bool), or out of range."""
    values: list[Any] = [float("nan"), float("inf"), -float("inf"), "1.0", 1j, True, *extra]
    if not none_ok:
        values.append(None)
    if positive:
        values += [0.0, -1.0]
    if minimum is not None:
        values.append(minimum - 1.0)
    return one_of(*values)


BAD_FLAG = one_of(None, "False", 0.5)
BAD_CALLABLE = one_of(None, 3, "f")
BAD_OPTIONAL_CALLABLE = one_of(3, "f")


def bad_choice(*extra: Any, none_ok: bool = False) -> BadValues:
    return one_of("nonsense", 3, *extra, *([] if none_ok else [None]))


def bad_mask(name: str) -> BadValues:
    """Spoil a boolean mask: a float or 0/1 mask, a string, empty, a shape that does not fit, complex."""
    return spoilers(lambda kw: kw[name].astype(float), lambda kw: kw[name].astype(int), lambda kw: "mask",
                    lambda kw: kw[name][..., :0], lambda kw: np.ones((3, 1), bool),
                    lambda kw: np.ones(kw[name].shape[-1] + 1, bool), lambda kw: kw[name].astype(complex))
