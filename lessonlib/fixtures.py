"""The lesson's two fixtures as data, each with a plain-Python reference calculation.

The expected lines are the lesson's printed output, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import exp, sqrt

from lessonlib._checks import check_real


@dataclass(frozen=True)
class ScalingFixture:
    """One query, two keys, scalar values: every stage of attention can be checked by hand."""

    query: tuple[float, ...] = (1.0, 0.0)
    keys: tuple[tuple[float, ...], ...] = ((1.0, 0.0), (0.0, 1.0))
    values: tuple[float, ...] = (2.0, 8.0)
    expected_weights: tuple[float, ...] = (0.669762, 0.330238)
    expected_context: float = 3.981431
    expected_output: str = "[0.669762, 0.330238]\ncontext=3.981431"


@dataclass(frozen=True)
class MaskingFixture:
    """Three scores, the third disallowed although it is by far the largest."""

    scores: tuple[float, ...] = (1.0, 2.0, 100.0)
    allowed: tuple[bool, ...] = (True, True, False)
    expected_weights: tuple[float, ...] = (0.268941, 0.731059, 0.0)
    expected_masked_weight: float = 0.0
    expected_output: str = "[0.268941, 0.731059, 0.0]\nmasked weight 0.0"


SCALING = ScalingFixture()
MASKING = MaskingFixture()
ROUNDING = 1e-12  # differences below this between two computations of the same numbers are rounding


def scaling_reference(fixture: ScalingFixture = SCALING) -> tuple[list[float], float]:
    """Weights and context of the first fixture, computed with the standard library only."""
    d_k = len(fixture.query)
    scores = [sum(q * k for q, k in zip(fixture.query, key)) / sqrt(d_k) for key in fixture.keys]
    top = max(scores)
    exps = [exp(s - top) for s in scores]
    weights = [e / sum(exps) for e in exps]
    context = sum(w * v for w, v in zip(weights, fixture.values))
    return weights, context


def masking_reference(fixture: MaskingFixture = MASKING) -> list[float]:
    """Weights of the second fixture: disallowed scores are dropped before normalising."""
    top = max(s for s, ok in zip(fixture.scores, fixture.allowed) if ok)
    exps = [exp(s - top) if ok else 0.0 for s, ok in zip(fixture.scores, fixture.allowed)]
    return [e / sum(exps) for e in exps]


def format_scaling(weights: list[float], context: float) -> str:
    """The first fixture's two printed lines: rounded weights, then the context to 6 places."""
    return f"{[round(float(w), 6) for w in weights]}\ncontext={float(context):.6f}"


def format_masking(weights: list[float], masked_index: int = 2) -> str:
    """The second fixture's two printed lines: rounded weights, then the masked key's weight."""
    return f"{[round(float(w), 6) for w in weights]}\nmasked weight {float(weights[masked_index])}"


def format_difference(gap: float) -> str:
    """The largest difference between two computations of the same numbers, printed the same on
    every machine: below ``ROUNDING`` it is rounding, whose size (0 or a few times 1e-17) depends
    on the CPU and the NumPy version, so it is named, not shown; a larger one to 3 digits."""
    gap = check_real(gap, "gap", minimum=0.0)
    return f"below {ROUNDING:.0e}, rounding only" if gap < ROUNDING else f"{gap:.3g}"
