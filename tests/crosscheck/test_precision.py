"""PRECISION_FACTS re-measured in every library each fact names (torch, JAX)."""

from __future__ import annotations

import math
import warnings
from types import ModuleType

import numpy as np
import pytest

from lessonlib.crosscheck import installed_version
from lessonlib.masks import PRECISION_FACTS

FACTS = PRECISION_FACTS


def _cases(facts):
    """One test case per (fact, library it names)."""
    return [
        pytest.param(fact, entry, id=f"{fact.dtype}-{entry.split()[0]}-{i}")
        for i, fact in enumerate(facts)
        for entry in fact.measured_on
    ]


def _library(request: pytest.FixtureRequest, entry: str) -> tuple[str, ModuleType]:
    """The library named by a measured_on entry such as "torch 2.13.0+cpu", checked for its version."""
    name = entry.split()[0]
    module = request.getfixturevalue(name)
    assert installed_version(name) == entry, f"a fact says {entry!r} but this run uses {installed_version(name)!r}"
    return name, module


def _row_outcome(weights: np.ndarray) -> str:
    """How softmax treated a row of identical fills: "uniform", "nan", or the weights themselves."""
    weights = np.asarray(weights, dtype=np.float64)
    if np.all(np.isnan(weights)):
        return "nan"
    if np.allclose(weights, 1.0 / weights.size, atol=1e-3):
        return "uniform"
    return str(weights)


def _rounded(values) -> tuple[float, ...]:
    return tuple(round(float(v), 6) for v in np.asarray(values, dtype=np.float64))


def _same(measured: tuple[float, ...], stated: tuple[float, ...]) -> bool:
    """Equal, counting NaN as equal to NaN."""
    return len(measured) == len(stated) and all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(measured, stated)
    )


def _torch_fill(torch: ModuleType, dtype: str) -> dict[str, object]:
    t = getattr(torch, dtype)
    minimum = torch.tensor(torch.finfo(t).min, dtype=t)
    return {
        "minus_1e9": torch.tensor(-1e9, dtype=t).item(),
        "finfo_min": minimum.item(),
        "finfo_min_doubled": (minimum + minimum).item(),
        # torch.tensor casts -1e9 to -inf in float16; torch.full and masked_fill refuse to (overflow error)
        "row_of_minus_1e9": _row_outcome(torch.softmax(torch.tensor([-1e9] * 3, dtype=t), -1).float()),
        "row_of_finfo_min": _row_outcome(torch.softmax(minimum.repeat(3), -1).float()),
    }


def _jax_fill(jax: ModuleType, dtype: str) -> dict[str, object]:
    jnp = jax.numpy
    with jax.enable_x64(dtype == "float64"):
        minimum = jnp.asarray(jnp.finfo(dtype).min, dtype)
        assert minimum.dtype == dtype
        softmax_of = lambda fill: _row_outcome(jax.nn.softmax(jnp.full((3,), fill, dtype)).astype("float32"))  # noqa: E731
        return {
            "minus_1e9": float(jnp.asarray(-1e9, dtype)),
            "finfo_min": float(minimum),
            "finfo_min_doubled": float(minimum + minimum),
            "row_of_minus_1e9": softmax_of(-1e9),
            "row_of_finfo_min": softmax_of(jnp.finfo(dtype).min),
        }


@pytest.mark.parametrize("fact, entry", _cases(FACTS.fills))
def test_fill_by_dtype(request, fact, entry):
    name, module = _library(request, entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow in cast is the point of the float16 row
        measured = _torch_fill(module, fact.dtype) if name == "torch" else _jax_fill(module, fact.dtype)
    stated = {key: getattr(fact, key) for key in measured}
    assert measured == stated, f"{entry}, {fact.dtype}"


def _torch_renormalised(torch: ModuleType, dtype: str) -> tuple[float, tuple[float, ...]]:
    t = getattr(torch, dtype)
    weights = torch.softmax(torch.tensor(FACTS.renormalised_scores, dtype=t), -1)  # (S,)
    weights = weights * torch.tensor(FACTS.renormalised_allowed, dtype=t)  # zeroed after softmax
    total = weights.sum()
    return total.item(), _rounded((weights / total).float())


def _jax_renormalised(jax: ModuleType, dtype: str) -> tuple[float, tuple[float, ...]]:
    jnp = jax.numpy
    with jax.enable_x64(dtype == "float64"):
        weights = jax.nn.softmax(jnp.asarray(FACTS.renormalised_scores, dtype))  # (S,)
        assert weights.dtype == dtype
        weights = weights * jnp.asarray(FACTS.renormalised_allowed, dtype)  # zeroed after softmax
        total = weights.sum()
        return float(total), _rounded((weights / total).astype("float64" if dtype == "float64" else "float32"))


@pytest.mark.parametrize("fact, entry", _cases(FACTS.renormalised))
def test_renormalising_after_softmax_by_dtype(request, fact, entry):
    name, module = _library(request, entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 0 / 0 is the point of the NaN rows
        measure = _torch_renormalised if name == "torch" else _jax_renormalised
        total, renormalised = measure(module, fact.dtype)
    assert total == pytest.approx(fact.row_sum_after_zeroing, rel=1e-6, abs=0.0), f"{entry}, {fact.dtype}"
    assert _same(renormalised, fact.renormalised), f"{entry}, {fact.dtype}: {renormalised}"


@pytest.mark.parametrize("entry", FACTS.leak.measured_on)
def test_a_too_small_fill_leaks(request, entry):
    name, module = _library(request, entry)
    leak = FACTS.leak
    if name == "torch":
        t = getattr(module, leak.dtype)
        scores = module.tensor(leak.scores, dtype=t) + module.tensor(leak.added, dtype=t)  # (S,)
        weights = module.softmax(scores, -1).float()
    else:
        jnp = module.numpy
        scores = jnp.asarray(leak.scores, leak.dtype) + jnp.asarray(leak.added, leak.dtype)  # (S,)
        weights = module.nn.softmax(scores).astype("float32")
    assert _rounded(weights) == leak.weights, entry
