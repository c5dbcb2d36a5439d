"""Explorer for notebook 01: how the key width d_k and the 1/sqrt(d_k) scaling shape the weights.

Random queries and keys with unit-variance entries give raw scores with variance d_k; dividing
by sqrt(d_k) brings it back to about one, so the softmax does not saturate as d_k grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib.attention import attention_scores, softmax
from lessonlib.plots import BarPanel, new_figure

D_K_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Settings:
    """What the learner controls."""

    d_k: int = 64
    scaled: bool = True
    n_keys: int = 8
    n_samples: int = 256  # queries drawn to estimate the score spread
    seed: int = 0


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting."""

    settings: Settings
    scores: np.ndarray  # (n_keys,) scores of the first query
    weights: np.ndarray  # (n_keys,) its softmax weights
    score_std: float  # spread of scores over all sampled queries and keys
    entropy: float  # of the first query's weights, in nats
    max_entropy: float  # log(n_keys): uniform weights
    mean_max_weight: float  # largest weight per query, averaged over the samples


def entropy(weights: np.ndarray) -> np.ndarray:
    """-sum w log w over the last axis, in nats (0 log 0 taken as 0)."""
    w = np.asarray(weights, dtype=float)
    logs = np.log(np.where(w > 0, w, 1.0))
    return -np.sum(w * logs, axis=-1)


def compute(settings: Settings) -> Result:
    """Scores, weights and their spread for random unit-variance queries and keys."""
    if settings.d_k < 1 or settings.n_keys < 1 or settings.n_samples < 1:
        raise ValueError(f"d_k, n_keys and n_samples must be positive, got {settings}")
    rng = np.random.default_rng(settings.seed)
    queries = rng.standard_normal((settings.n_samples, settings.d_k))  # (N, d_k)
    keys = rng.standard_normal((settings.n_keys, settings.d_k))  # (S, d_k)
    scale = 1.0 / math.sqrt(settings.d_k) if settings.scaled else 1.0
    scores = attention_scores(queries, keys, scale=scale)  # (N, S)
    weights = softmax(scores)  # (N, S)
    return Result(
        settings=settings,
        scores=scores[0],
        weights=weights[0],
        score_std=float(scores.std()),
        entropy=float(entropy(weights[0])),
        max_entropy=math.log(settings.n_keys),
        mean_max_weight=float(weights.max(axis=-1).mean()),
    )


def describe(result: Result) -> str:
    """The readout under the controls: the numbers the figure illustrates."""
    s = result.settings
    return (
        f"d_k={s.d_k}, scaling {'on' if s.scaled else 'off'}: score std {result.score_std:.2f}; "
        f"entropy {result.entropy:.2f} of {result.max_entropy:.2f} nats; "
        f"mean largest weight {result.mean_max_weight:.2f}"
    )


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    top = int(np.argmax(result.weights))
    return (
        f"left, the first query's scores for {result.scores.size} keys; right, its weights, "
        f"largest {result.weights[top]:.2f} on key {top}"
    )


class Figure:
    """The explorer's figure: the first query's scores (left) and weights (right), updated in place."""

    def __init__(self, n_keys: int) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        self.scores = BarPanel(left, n_keys, ylabel="score")
        self.weights = BarPanel(right, n_keys, ylabel="weight", ylim=(0.0, 1.1))

    def draw(self, result: Result) -> Any:
        """Show ``result`` and return the matplotlib figure."""
        self.scores.update(result.scores, title="scores (first query)")
        self.weights.update(result.weights, title=f"weights, entropy {result.entropy:.2f} nats")
        return self.fig


def show(settings: Settings = Settings()) -> Any:
    """The widget: a d_k slider and a scaling switch wired to compute() and draw()."""
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    figure = Figure(settings.n_keys)
    controls = {
        "d_k": widgets.SelectionSlider(options=D_K_CHOICES, value=settings.d_k, description="d_k"),
        "scaled": widgets.Checkbox(value=settings.scaled, description="divide scores by sqrt(d_k)"),
    }

    def settings_from(values: dict[str, Any]) -> Settings:
        return Settings(d_k=values["d_k"], scaled=values["scaled"], n_keys=settings.n_keys,
                        n_samples=settings.n_samples, seed=settings.seed)

    def render(s: Settings) -> tuple[str, Any, str]:
        result = compute(s)
        return describe(result), figure.draw(result), alt_text(result)

    return build_explorer(controls, settings_from, render, title="Scaling explorer: d_k and 1/sqrt(d_k)")
