"""Matplotlib figures shared by the notebooks and the explorers.

Colour maps are viridis/cividis (readable with colour-vision deficiencies); masked cells are
hatched and labelled, never marked by colour alone. Figures are built with the object API
(matplotlib.figure.Figure), so explorers can redraw one figure without pyplot's global state.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

SEQUENTIAL_CMAP = "viridis"
BAR_COLOUR = "#3b528b"  # a viridis blue
SECOND_COLOUR = "#5ec962"  # a viridis green, paired with hatching where both appear


def _with_blank_nan(name: str) -> Colormap:
    """The colour map ``name`` with NaN cells (disallowed keys) drawn white."""
    return colormaps[name].with_extremes(bad="white")


def new_figure(width: float = 6.0, height: float = 2.5, *, dpi: int = 80, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    """A small figure with ``ncols`` side-by-side axes, sized for fast redraws.

    Margins are fixed rather than computed by a layout engine, which would double each redraw.
    """
    fig = Figure(figsize=(width, height), dpi=dpi)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.18, top=0.88, wspace=0.35)
    return fig, list(axes)


def figure_png(fig: Figure) -> bytes:
    """Render ``fig`` to PNG bytes (what an explorer's Image widget shows).

    A :class:`PartialRedraw` (anything with a ``png()`` method) renders itself.
    """
    if callable(getattr(fig, "png", None)):
        return fig.png()
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
    """An (L, S) heatmap drawn once and updated in place; disallowed cells hatched and marked 'x'.

    The one heatmap renderer: explorers keep a panel and update it, notebooks call
    :func:`heatmap` for a single picture. With ``show_leaks``, for weights computed the wrong way
    (zeroed after softmax, a finite fill), a disallowed cell that received weight keeps its colour
    and number, so weight leaking onto an excluded key is visible; one that received exactly zero
    is blank (the hatch marks it). NaN cells are blank and read 'nan'. ``maskable=False`` makes no
    hatch artists, for a matrix that will never be shown with a mask.
    """

    def __init__(self, ax: Axes, shape: tuple[int, int], *, vmin: float = 0.0, vmax: float = 1.0,
                 xlabel: str = "key", ylabel: str = "query", cmap: str = SEQUENTIAL_CMAP,
                 annotate: bool = True, show_leaks: bool = False, maskable: bool = True) -> None:
        self.ax = ax
        self.show_leaks = show_leaks
        n_rows, n_cols = shape
        self.image = ax.imshow(np.zeros(shape), cmap=_with_blank_nan(cmap), vmin=vmin, vmax=vmax, aspect="auto")
        self.midpoint = (vmin + vmax) / 2
        self.hatches = [[ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                                edgecolor="0.45", lw=0, visible=False))
                         for j in range(n_cols)] for i in range(n_rows)] if maskable else []
        self.texts = ([[ax.text(j, i, "", ha="center", va="center", fontsize=6) for j in range(n_cols)]
                       for i in range(n_rows)] if annotate else None)
        ax.set_xticks(range(n_cols))
        ax.set_yticks(range(n_rows))
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)

    def update(self, matrix: np.ndarray, *, allowed: np.ndarray | None = None, title: str = "") -> None:
        """Show ``matrix`` (L, S); hatch the cells where ``allowed`` is False."""
        matrix = np.asarray(matrix, dtype=float)  # (L, S)
        blocked = np.zeros(matrix.shape, bool) if allowed is None else ~np.broadcast_to(allowed, matrix.shape)
        if blocked.any() and not self.hatches:
            raise ValueError("this HeatmapPanel was made with maskable=False, so it cannot show a mask")
        blank = blocked & (matrix == 0.0) if self.show_leaks else blocked  # (L, S): no colour, no number
        self.image.set_data(np.where(blank, np.nan, matrix))
        for i, row in enumerate(self.hatches):
            for j, patch in enumerate(row):
                patch.set_visible(bool(blocked[i, j]))
        if self.texts is None:
            self.ax.set_title(title, fontsize=9)
            return
        for i, row in enumerate(self.texts):
            for j, text in enumerate(row):
                value = matrix[i, j]
                if blank[i, j]:
                    text.set_text("" if self.show_leaks else "x")
                    text.set_color("0.2")
                elif np.isnan(value):
                    text.set_text("nan")
                    text.set_color("0.2")
                else:
                    text.set_text(f"{value:.2f}")
                    text.set_color("white" if value < self.midpoint else "black")
        self.ax.set_title(title, fontsize=9)


def heatmap(ax: Axes, matrix: np.ndarray, *, allowed: np.ndarray | None = None, title: str = "",
            xlabel: str = "key", ylabel: str = "query", vmin: float | None = None, vmax: float | None = None,
            annotate: bool = True, cmap: str = SEQUENTIAL_CMAP) -> None:
    """One picture of an (L, S) matrix: a :class:`HeatmapPanel` drawn once on a cleared ``ax``.

    Cells where ``allowed`` is False are blank, hatched and marked 'x'. The colour range defaults
    to the allowed cells' range; values are written in the cells when there are at most 64.
    """
    ax.clear()
    matrix = np.asarray(matrix, dtype=float)  # (L, S)
    seen = matrix if allowed is None else matrix[np.broadcast_to(allowed, matrix.shape)]
    seen = seen[np.isfinite(seen)]
    vmin = (float(seen.min()) if seen.size else 0.0) if vmin is None else vmin
    vmax = (float(seen.max()) if seen.size else 1.0) if vmax is None else vmax
    panel = HeatmapPanel(ax, matrix.shape, vmin=vmin, vmax=vmax, xlabel=xlabel, ylabel=ylabel, cmap=cmap,
                         annotate=annotate and matrix.size <= 64, maskable=allowed is not None)
    panel.update(matrix, allowed=allowed, title=title)


def pin_layout(ax: Axes, *, max_yticks: int | None = 4) -> None:
    """Fix the title and axis-label positions of ``ax`` so a redraw does not measure tick labels.

    By default matplotlib moves the title and the axis labels clear of the tick labels on every
    draw, which lays out every tick label twice; pinning them roughly halves an explorer's redraw.
    ``max_yticks`` caps the number of y ticks (each one is a text to render); None leaves them.
    """
    from matplotlib.ticker import MaxNLocator

    ax.set_title(ax.get_title(), fontsize=9, y=1.0)  # an explicit y turns the automatic placement off
    ax.xaxis.set_label_coords(0.5, -0.14)
    ax.yaxis.set_label_coords(-0.13, 0.5)
    if max_yticks is not None:
        ax.yaxis.set_major_locator(MaxNLocator(max_yticks))


class LogBarPanel:
    """Bars on a logarithmic y axis (bytes, seconds), drawn once and updated in place.

    Bars listed in ``hatched`` are hatched and drawn in a second colour, so they stand apart
    without relying on colour. Every bar starts at ``floor`` (a log axis has no zero).
    """

    def __init__(self, ax: Axes, labels: Sequence[str], *, ylabel: str = "", hatched: Sequence[int] = (),
                 floor: float = 1.0) -> None:
        self.ax = ax
        self.floor = floor
        ax.set_yscale("log")
        positions = np.arange(len(labels))
        self.rects = ax.bar(positions, np.ones(len(labels)), bottom=floor, color=BAR_COLOUR)
        for i in hatched:
            self.rects[i].set_facecolor(SECOND_COLOUR)
            self.rects[i].set_hatch("///")
        ax.set_xticks(positions, labels)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)

    def update(self, values: Sequence[float], *, title: str = "") -> None:
        """Set bar tops to ``values`` (all > floor) and fit the y range to whole decades around them."""
        values = np.asarray(values, dtype=float)
        for rect, v in zip(self.rects, values):
            rect.set_height(max(v - self.floor, 0.0))
        low = 10.0 ** (np.floor(np.log10(values.min())) - 1)
        high = 10.0 ** (np.ceil(np.log10(values.max())) + 0.3)
        self.ax.set_ylim(max(low, self.floor), high)
        self.ax.set_title(title, fontsize=9)


class LogLinesPanel:
    """Several (x, y) series on log-log axes, drawn once and updated in place.

    ``styles`` gives each series' plot keywords; give every series its own marker or line style
    (and a label for the legend) so the series can be told apart without colour.
    """

    def __init__(self, ax: Axes, styles: Sequence[dict], *, xlabel: str = "", ylabel: str = "") -> None:
        self.ax = ax
        self.lines = [ax.plot([], [], **style)[0] for style in styles]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        if any("label" in style for style in styles):
            ax.legend(fontsize=6, loc="upper left", frameon=False)

    def update(self, series: Sequence[tuple[Sequence[float], Sequence[float]]], *, title: str = "",
               xlim: tuple[float, float] | None = None) -> None:
        """Replace each series' points (an empty series hides it) and fit the axes to the positive data."""
        ys = []
        for line, (x, y) in zip(self.lines, series):
            line.set_data(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
            ys.extend(v for v in y if v > 0)
        xs = [v for x, _ in series for v in x if v > 0]
        if xlim is not None:
            self.ax.set_xlim(*xlim)
        elif xs:
            self.ax.set_xlim(min(xs) / 1.5, max(xs) * 1.5)
        if ys:
            self.ax.set_ylim(min(ys) / 3.0, max(ys) * 3.0)
        self.ax.set_title(title, fontsize=9)


class PartialRedraw:
    """Render a figure by redrawing only the artists an update can change.

    The static rest (frames, fixed tick labels, axis labels) is rasterised once into a background;
    each :meth:`png` restores that background and draws the ``dynamic`` artists on top, in z-order.
    List everything an update touches: bars, images, texts, titles, and the Axis of any axis whose
    range moves (its tick labels change). Call :meth:`refresh` after changing anything static.
    :func:`figure_png` uses :meth:`png` when given one of these instead of a Figure.
    """

    def __init__(self, fig: Figure, dynamic: Sequence[Artist]) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        self.fig = fig
        self.canvas = FigureCanvasAgg(fig)
        self.dynamic = sorted(dynamic, key=lambda artist: artist.get_zorder())
        for artist in self.dynamic:
            artist.set_animated(True)  # a full draw (the background) skips animated artists
        self.background = None

    def refresh(self) -> None:
        """Re-rasterise the static background (after a change to something not in ``dynamic``)."""
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)

    def png(self) -> bytes:
        """The figure as PNG bytes: background, then the dynamic artists (fast zlib level)."""
        from PIL import Image

        if self.background is None:
            self.refresh()
        self.canvas.restore_region(self.background)
        renderer = self.canvas.get_renderer()
        for artist in self.dynamic:
            artist.draw(renderer)
        width, height = self.canvas.get_width_height()
        image = Image.frombuffer("RGBA", (width, height), self.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        image.save(buffer, format="png", compress_level=1)
        return buffer.getvalue()
