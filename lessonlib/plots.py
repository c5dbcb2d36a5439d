"""Matplotlib figures shared by the notebooks and the explorers.

Colour maps are viridis/cividis (readable with colour-vision deficiencies); masked cells are
hatched and labelled, never marked by colour alone. Figures are built with the object API
(matplotlib.figure.Figure), so explorers can redraw one figure without pyplot's global state.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "cividis"
BAR_COLOUR = "#3b528b"  # a viridis blue
SECOND_COLOUR = "#5ec962"  # a viridis green, paired with hatching where both appear


def new_figure(width: float = 6.0, height: float = 2.5, *, dpi: int = 80, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    """A small figure with ``ncols`` side-by-side axes, sized for fast redraws.

    Margins are fixed rather than computed by a layout engine, which would double each redraw.
    """
    fig = Figure(figsize=(width, height), dpi=dpi)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.18, top=0.88, wspace=0.35)
    return fig, list(axes)


def figure_png(fig: Figure) -> bytes:
    """Render ``fig`` to PNG bytes (what an explorer's Image widget shows)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi)
    return buffer.getvalue()


def bars(ax: Axes, values: Sequence[float], *, labels: Sequence[str] | None = None,
         title: str = "", ylabel: str = "", ylim: tuple[float, float] | None = None) -> None:
    """Bar chart of ``values`` with each bar's value written above it."""
    ax.clear()
    values = np.asarray(values, dtype=float)
    positions = np.arange(values.size)
    ax.bar(positions, values, color=BAR_COLOUR)
    ax.set_xticks(positions, labels if labels is not None else [str(i) for i in positions])
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    if values.size <= 12:
        for x, v in zip(positions, values):
            ax.annotate(f"{v:.2f}", (x, v), ha="center", va="bottom", fontsize=6)


def heatmap(ax: Axes, matrix: np.ndarray, *, allowed: np.ndarray | None = None, title: str = "",
            xlabel: str = "key", ylabel: str = "query", vmin: float | None = None, vmax: float | None = None,
            annotate: bool = True, cmap: str = SEQUENTIAL_CMAP) -> None:
    """Heatmap of an (L, S) matrix; cells where ``allowed`` is False are hatched and marked 'x'."""
    ax.clear()
    matrix = np.asarray(matrix, dtype=float)  # (L, S)
    shown = matrix if allowed is None else np.where(allowed, matrix, np.nan)
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    image.cmap.set_bad("white")
    n_rows, n_cols = matrix.shape
    if allowed is not None:
        for i, j in zip(*np.nonzero(~np.broadcast_to(allowed, matrix.shape))):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.45", lw=0))
            ax.text(j, i, "x", ha="center", va="center", fontsize=7, color="0.2")
    if annotate and n_rows * n_cols <= 64:
        cut = np.nanmean(shown) if np.isfinite(shown).any() else 0.0
        for i in range(n_rows):
            for j in range(n_cols):
                if np.isfinite(shown[i, j]):
                    colour = "white" if shown[i, j] < cut else "black"
                    ax.text(j, i, f"{shown[i, j]:.2f}", ha="center", va="center", fontsize=6, color=colour)
    ax.set_xticks(range(n_cols))
    ax.set_yticks(range(n_rows))
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=7)


class BarPanel:
    """Bars drawn once and updated in place: an explorer redraw changes heights and labels only.

    Clearing and rebuilding an axes costs about as much as rendering it; updating artists
    keeps a redraw of a small figure near the cost of rasterising it.
    """

    def __init__(self, ax: Axes, n_bars: int, *, ylabel: str = "", xlabel: str = "key",
                 ylim: tuple[float, float] | None = None, labels: Sequence[str] | None = None,
                 annotate: bool = False) -> None:
        self.ax = ax
        self.fixed_ylim = ylim
        positions = np.arange(n_bars)
        self.rects = ax.bar(positions, np.zeros(n_bars), color=BAR_COLOUR)
        # value labels cost a text layout each per redraw; the explorers print the numbers instead
        self.values_text = ([ax.text(x, 0.0, "", ha="center", va="bottom", fontsize=6) for x in positions]
                            if annotate else [])
        ax.set_xticks(positions, labels if labels is not None else [str(i) for i in positions])
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.axhline(0.0, color="0.3", lw=0.6)

    def update(self, values: Sequence[float], *, title: str = "") -> None:
        """Set bar heights, their value labels, the title, and the y range."""
        values = np.asarray(values, dtype=float)
        for rect, v in zip(self.rects, values):
            rect.set_height(v)
        for rect, text, v in zip(self.rects, self.values_text, values):
            text.set_position((rect.get_x() + rect.get_width() / 2, max(v, 0.0)))
            text.set_text(f"{v:.2f}")
        if self.fixed_ylim is not None:
            self.ax.set_ylim(*self.fixed_ylim)
        else:
            low, high = min(0.0, float(values.min())), max(0.0, float(values.max()))
            pad = 0.12 * (high - low or 1.0)
            self.ax.set_ylim(low - (pad if low < 0 else 0.0), high + pad)
        self.ax.set_title(title, fontsize=9)


class HeatmapPanel:
    """An (L, S) heatmap drawn once and updated in place; disallowed cells hatched and marked 'x'."""

    def __init__(self, ax: Axes, shape: tuple[int, int], *, vmin: float = 0.0, vmax: float = 1.0,
                 xlabel: str = "key", ylabel: str = "query", cmap: str = SEQUENTIAL_CMAP,
                 annotate: bool = True) -> None:
        self.ax = ax
        n_rows, n_cols = shape
        self.image = ax.imshow(np.zeros(shape), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        self.image.cmap.set_bad("white")
        self.midpoint = (vmin + vmax) / 2
        self.hatches = [[ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                                edgecolor="0.45", lw=0, visible=False))
                         for j in range(n_cols)] for i in range(n_rows)]
        self.texts = ([[ax.text(j, i, "", ha="center", va="center", fontsize=6) for j in range(n_cols)]
                       for i in range(n_rows)] if annotate else None)
        ax.set_xticks(range(n_cols))
        ax.set_yticks(range(n_rows))
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)

    def update(self, matrix: np.ndarray, *, allowed: np.ndarray | None = None, title: str = "") -> None:
        """Show ``matrix``; cells where ``allowed`` is False are blank, hatched and labelled 'x'."""
        matrix = np.asarray(matrix, dtype=float)  # (L, S)
        blocked = np.zeros(matrix.shape, bool) if allowed is None else ~np.broadcast_to(allowed, matrix.shape)
        self.image.set_data(np.where(blocked, np.nan, matrix))
        for i, row in enumerate(self.hatches):
            for j, patch in enumerate(row):
                patch.set_visible(bool(blocked[i, j]))
                if self.texts is not None:
                    text = self.texts[i][j]
                    if blocked[i, j]:
                        text.set_text("x")
                        text.set_color("0.2")
                    else:
                        value = matrix[i, j]
                        text.set_text("nan" if np.isnan(value) else f"{value:.2f}")
                        text.set_color("white" if not value >= self.midpoint else "black")
        self.ax.set_title(title, fontsize=9)
