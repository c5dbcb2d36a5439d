"""Explorer for notebook 01: how the key width d_k and the 1/sqrt(d_k) scaling shape the weights.

Queries and keys with independent entries of standard deviation sigma give raw scores q . k with
standard deviation sigma^2 sqrt(d_k); dividing by sqrt(d_k) brings it back to sigma^2, so the
softmax stops saturating as d_k grows. Scaling does not fix the other cause of saturation:
with sigma = 2 or 3 the scaled scores still spread over many units and one key takes almost all
the weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib._checks import (
    array_bytes,
    check_flag,
    check_instance,
    check_positive_int,
    check_real,
    refuse_oversized,
)
from lessonlib.attention import attention_entropy, attention_scores, softmax
from lessonlib.plots import BarPanel, PartialRedraw, new_figure, pin_layout

D_K_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
ENTRY_STD_CHOICES = (0.5, 1.0, 2.0, 3.0)


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    d_k: int = 64
    scaled: bool = True
    entry_std: float = 1.0  # standard deviation of every query and key entry
    n_keys: int = 8
    n_samples: int = 256  # queries drawn to estimate the score spread
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_k", "n_keys", "n_samples"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.seed, "seed", minimum=0)
        check_flag(self.scaled, "scaled")
        check_real(self.entry_std, "entry_std", positive=True)
        refuse_oversized(array_bytes((self.n_samples, max(self.d_k, self.n_keys)), np.float64, 4),
                         f"the scaling explorer with n_samples={self.n_samples}, d_k={self.d_k} and "
                         f"n_keys={self.n_keys}", "Use fewer samples, keys or a smaller d_k.")


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting."""

    settings: Settings
    scores: np.ndarray  # (n_keys,) scores of the first query
    weights: np.ndarray  # (n_keys,) its softmax weights
    score_std: float  # spread of the scores over all sampled queries and keys
    predicted_std: float  # sigma^2 sqrt(d_k) unscaled, sigma^2 scaled
    entropy: float  # of the first query's weights, in nats
    mean_entropy: float  # averaged over the sampled queries, in nats
    max_entropy: float  # log(n_keys): uniform weights
    mean_max_weight: float  # largest weight per query, averaged over the samples


def compute(settings: Settings) -> Result:
    """Scores, weights and their spread for random queries and keys with the chosen entry std."""
    check_instance(settings, Settings, "settings")
    rng = np.random.default_rng(settings.seed)
    sigma = settings.entry_std
    queries = sigma * rng.standard_normal((settings.n_samples, settings.d_k))  # (N, d_k)
    keys = sigma * rng.standard_normal((settings.n_keys, settings.d_k))  # (S, d_k)
    scale = 1.0 / math.sqrt(settings.d_k) if settings.scaled else 1.0
    scores = attention_scores(queries, keys, scale=scale)  # (N, S)
    weights = softmax(scores)  # (N, S)
    entropies = attention_entropy(weights)  # (N,)
    return Result(
        settings=settings,
        scores=scores[0],
        weights=weights[0],
        score_std=float(scores.std()),
        predicted_std=sigma**2 * math.sqrt(settings.d_k) * scale,
        entropy=float(entropies[0]),
        mean_entropy=float(entropies.mean()),
        max_entropy=math.log(settings.n_keys),
        mean_max_weight=float(weights.max(axis=-1).mean()),
    )


def describe(result: Result) -> str:
    """The readout under the controls: the numbers the figure illustrates."""
    s = check_instance(result, Result, "result").settings
    return (
        f"d_k={s.d_k}, scaling {'on' if s.scaled else 'off'}, entry std {s.entry_std:g}: "
        f"score std {result.score_std:.2f} (predicted {result.predicted_std:.2f}); "
        f"entropy {result.mean_entropy:.2f} of {result.max_entropy:.2f} nats on average; "
        f"mean largest weight {result.mean_max_weight:.2f}"
    )


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    top = int(np.argmax(result.weights))
    return (
        f"left, the first query's scores for {result.scores.size} keys, from "
        f"{result.scores.min():.2f} to {result.scores.max():.2f}; right, its weights, "
        f"largest {result.weights[top]:.2f} on key {top}, entropy {result.entropy:.2f} nats"
    )


class Figure:
    """The explorer's figure: the first query's scores (left) and weights (right), updated in place.

    Only what a new setting changes is redrawn: the bars, the weights' title, the zero lines and the
    score axis (its range follows the scores). Frames, key labels, the score title and label and the
    fixed weight axis are rasterised once (text is most of the cost of a redraw).
    """

    SCORES_TITLE = "scores (first query)"

    def __init__(self, n_keys: int) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        self.scores = BarPanel(left, n_keys)
        self.weights = BarPanel(right, n_keys, ylabel="weight", ylim=(0.0, 1.05))
        for ax in (left, right):
            pin_layout(ax)
        left.set_title(self.SCORES_TITLE, fontsize=9)
        # the score axis is redrawn with its moving ticks; its label is a separate, static text
        left.text(-0.2, 0.5, "score", transform=left.transAxes, rotation=90, ha="center", va="center",
                  fontsize=8)
        dynamic = [*self.scores.rects, *self.weights.rects, right.title, left.yaxis,
                   *left.lines, *right.lines, *left.spines.values(), *right.spines.values()]
        self.redraw = PartialRedraw(self.fig, dynamic)

    def draw(self, result: Result) -> PartialRedraw:
        """Show ``result``; returns the figure's renderer (``figure_png`` turns it into an image)."""
        self.scores.update(result.scores, title=self.SCORES_TITLE)
        self.weights.update(result.weights, title=f"weights, entropy {result.entropy:.2f} nats")
        return self.redraw


def show(settings: Settings = Settings()) -> Any:
    """The widget: a d_k drop-down, a scaling switch and an entry-size drop-down wired to compute() and draw().

    Drop-downs rather than sliders: a screen reader names a drop-down by its label, while
    ipywidgets' slider handles carry no accessible name.
    """
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    figure = Figure(settings.n_keys)
    wide = {"description_width": "initial"}
    controls = {
        "d_k": widgets.Dropdown(options=D_K_CHOICES, value=settings.d_k, description="d_k"),
        "scaled": widgets.Checkbox(value=settings.scaled, description="divide scores by sqrt(d_k)",
                                   style=wide),
        "entry_std": widgets.Dropdown(options=ENTRY_STD_CHOICES, value=settings.entry_std,
                                      description="entry std of q and k", style=wide),
    }

    return build_explorer(controls, settings, compute=compute, describe=describe,
                          draw=figure.draw, alt_text=alt_text, title="Scaling explorer: d_k and 1/sqrt(d_k)")
