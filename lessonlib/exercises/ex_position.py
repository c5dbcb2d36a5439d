"""Exercises of 03_position: sinusoidal position table and rotary position embedding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lessonlib.exercises.spec import (
    ArrayOutput,
    Case,
    DiagnosisSpec,
    Exercise,
    any_of,
    matches_model,
    numbered,
    shows,
)
from lessonlib.position import rope as _reference_rope
from lessonlib.position import sinusoidal_positions as _reference_sinusoidal

NOTEBOOK = "03_position.ipynb"
BASE = 10000.0

# Wrong frequency rules learners write, as functions of (pair index i, width d) -> inverse frequency.
_CORRECT_FREQ: Callable[[np.ndarray, int], np.ndarray] = lambda i, d: BASE ** (-2.0 * i / d)  # noqa: E731
_WRONG_FREQS: tuple[Callable[[np.ndarray, int], np.ndarray], ...] = (
    lambda i, d: BASE ** (-1.0 * i / d),  # exponent i/d: the factor 2 forgotten
    lambda i, d: BASE ** (-4.0 * i / d),  # exponent 4i/d: the column index 2i doubled again
    lambda i, d: BASE ** (2.0 * i / d),  # multiplied by base^(2i/d) instead of divided
)


# --- sinusoidal_positions -----------------------------------------------------------------------


def sinusoidal_reference(n_positions: int, d_model: int) -> np.ndarray:
    return _reference_sinusoidal(n_positions, d_model)


def _table(
    n: int, d: int, *, freq=_CORRECT_FREQ, start: int = 0, swap: bool = False, halves: bool = False,
    per_column: bool = False,
) -> np.ndarray:
    """A sinusoidal table built with one chosen mistake (or none)."""
    pos = np.arange(start, start + n, dtype=float)[:, None]  # (n, 1)
    i = np.arange(d // 2)  # (d/2,)
    angle = pos * freq(i, d)  # (n, d/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    if halves:
        return np.concatenate([first(angle), second(angle)], axis=-1)  # (n, d)
    pe = np.empty((n, d))
    pe[:, 0::2] = first(angle)
    if per_column:  # column 2i+1 uses its own index in the exponent: (2i+1)/d
        pe[:, 1::2] = second(pos * BASE ** (-(2.0 * i + 1.0) / d))
    else:
        pe[:, 1::2] = second(angle)
    return pe


def _wrong_frequency_models():
    models = [lambda n, d, f=f: _table(n, d, freq=f) for f in _WRONG_FREQS]
    models.append(lambda n, d: _table(n, d, per_column=True))
    return tuple(models)


def _first_pair_right_rest_wrong(case: Case, got, expected) -> bool:
    """Columns 0 and 1 (frequency 1 in any convention) are right, a later column is not."""
    if got.shape != expected.shape or expected.shape[1] < 4:
        return False
    first_pair = np.allclose(got[:, :2], expected[:, :2], atol=1e-7)
    rest_ok = np.allclose(got[:, 2:], expected[:, 2:], atol=1e-7)
    return bool(first_pair and not rest_ok)


SINUSOIDAL_POSITIONS = Exercise(
    name="sinusoidal_positions",
    notebook=NOTEBOOK,
    signature="sinusoidal_positions(n_positions, d_model) -> (n_positions, d_model)",
    points=2,
    reference=sinusoidal_reference,
    output=ArrayOutput("float"),
    public=lambda: numbered([
        Case("", "4 positions, d_model 6", (4, 6)),
        Case("", "10 positions, d_model 8", (10, 8)),
        Case("", "6 positions, d_model 16", (6, 16)),
    ]),
    hidden=lambda rng: [
        Case("", f"{n} positions, d_model {d}", (int(n), int(d)))
        for n, d in zip(rng.integers(2, 51, size=4), 2 * rng.integers(2, 17, size=4))
    ],
    diagnoses=(
        DiagnosisSpec(
            "sin_cos_swapped", "sin and cos swapped",
            "Even columns hold cosines and odd columns sines: at position 0 the row starts 1, 0, "
            "1, 0 instead of 0, 1, 0, 1.",
            "Column 2i is sin(pos / 10000^(2i/d)), column 2i+1 is cos of the same angle.",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, swap=True)),
        ),
        DiagnosisSpec(
            "halves_concatenated", "Halves concatenated instead of interleaved",
            "All the sines come first and all the cosines after them; the convention interleaves "
            "them, sin and cos of one frequency side by side.",
            "Write sines into pe[:, 0::2] and cosines into pe[:, 1::2].",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, halves=True)),
        ),
        DiagnosisSpec(
            "wrong_frequency_exponent", "Wrong frequency exponent",
            "The first pair of columns is right but later pairs turn at the wrong speed: the "
            "frequencies do not follow 1 / 10000^(2i/d) with i the pair index.",
            "Pair i (columns 2i and 2i+1) shares one angle, pos / 10000^(2i/d); "
            "np.arange(0, d, 2) already gives the 2i.",
            "sinusoidal",
            any_of(matches_model(*_wrong_frequency_models()), shows(_first_pair_right_rest_wrong)),
        ),
        DiagnosisSpec(
            "positions_from_one", "Positions counted from 1",
            "The table starts at position 1: its first row is not sin(0), cos(0) = 0, 1, 0, 1, ...",
            "Positions are 0, 1, ..., n_positions - 1: use np.arange(n_positions).",
            "sinusoidal", matches_model(lambda n, d: _table(n, d, start=1)),
        ),
    ),
    stub_hint="sines in even columns, cosines in odd ones; each pair shares one frequency",
)


# --- apply_rope ---------------------------------------------------------------------------------


def rope_reference(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return _reference_rope(x, positions)


def _rope_with(x: np.ndarray, positions: np.ndarray, freq=_CORRECT_FREQ, sign: float = 1.0) -> np.ndarray:
    """Interleaved RoPE with a chosen frequency rule and rotation sense."""
    d = x.shape[-1]
    angle = sign * np.asarray(positions, dtype=float)[..., None] * freq(np.arange(d // 2), d)  # (..., n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    first, second = x[..., 0::2], x[..., 1::2]
    out = np.empty(np.broadcast_shapes(x.shape, angle.shape[:-1] + (d,)))
    out[..., 0::2] = first * cos - second * sin
    out[..., 1::2] = first * sin + second * cos
    return out


def rope_public() -> list[Case]:
    rng = np.random.default_rng(303)
    return numbered([
        Case("", "4 vectors of width 6 at positions 0..3", (rng.normal(size=(4, 6)), np.arange(4))),
        Case("", "a batch of 2, 5 vectors of width 4 at positions 0..4",
             (rng.normal(size=(2, 5, 4)), np.arange(5))),
        Case("", "3 vectors of width 8 at positions 0, 7 and 100",
             (rng.normal(size=(3, 8)), np.array([0, 7, 100]))),
    ])


def rope_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for _ in range(4):
        batch = tuple(int(b) for b in rng.integers(1, 4, size=int(rng.integers(0, 2))))
        n, d = int(rng.integers(2, 7)), 2 * int(rng.integers(2, 7))
        positions = np.sort(rng.choice(300, size=n, replace=False))
        cases.append(Case("", f"x {batch + (n, d)} at positions {positions.tolist()}",
                          (rng.normal(size=batch + (n, d)), positions)))
    return cases


APPLY_ROPE = Exercise(
    name="apply_rope",
    notebook=NOTEBOOK,
    signature="apply_rope(x, positions) -> array shaped like x",
    points=2,
    reference=rope_reference,
    output=ArrayOutput("float"),
    public=rope_public,
    hidden=rope_hidden,
    diagnoses=(
        DiagnosisSpec(
            "rope_half_pairing", "Pairs taken as (i, i + d/2)",
            "The answer rotates coordinate i with coordinate i + d/2 (the half-split convention of "
            "GPT-NeoX and LLaMA code); this exercise uses interleaved pairs (2i, 2i+1).",
            "Rotate x[..., 0::2] with x[..., 1::2]. Mixing the two conventions between a model's "
            "weights and its code is a classic bug.",
            "rope", matches_model(lambda x, p: _reference_rope(x, p, pairing="half")),
        ),
        DiagnosisSpec(
            "rope_wrong_direction", "Rotation in the wrong direction",
            "Each pair is rotated by -angle instead of +angle: the sin terms have the opposite sign.",
            "(a, b) becomes (a cos t - b sin t, a sin t + b cos t) with t = pos / 10000^(2i/d).",
            "rope", matches_model(lambda x, p: _rope_with(x, p, sign=-1.0)),
        ),
        DiagnosisSpec(
            "rope_wrong_frequency", "Wrong rotation frequencies",
            "The first pair turns at the right speed but later pairs do not: the angles do not "
            "follow pos / 10000^(2i/d).",
            "Pair i turns by pos * 10000^(-2i/d), i = 0 .. d/2 - 1.",
            "rope", matches_model(*(lambda x, p, f=f: _rope_with(x, p, freq=f) for f in _WRONG_FREQS)),
        ),
        DiagnosisSpec(
            "rope_positions_from_one", "Positions shifted by one",
            "Every vector is rotated as if it sat one position later: position 0 must not rotate at all.",
            "Use the positions as given; do not add one.",
            "rope", matches_model(lambda x, p: _rope_with(x, np.asarray(p) + 1)),
        ),
    ),
    stub_hint="rotate each interleaved pair of coordinates by its own angle",
)
