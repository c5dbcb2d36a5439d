"""Explorer for notebook 02: where the mask is applied, and what the fill and the dtype do to it.

The right order excludes disallowed keys *before* normalising:

    w_ij = exp(s_ij - m_i) / sum_{j' allowed} exp(s_ij' - m_i)    for allowed j, else 0

Two wrong orders start from softmax over every key and remove the disallowed ones afterwards:

    zero after softmax        w_ij = softmax(s_i)_j * allowed_ij        (rows sum to less than one)
    zero, then renormalise    w_ij = that / sum_j' (that)               (0/0 = NaN once it underflows)

"Exclude before softmax" here writes a fill into the disallowed scores, as ``masked_fill`` does,
then takes the softmax in the chosen dtype. A fill of -inf excludes exactly but turns a row with
no allowed key into NaN; a finite fill turns that row into a uniform average over keys that were
meant to be excluded; -1e9 does not exist in float16 and becomes -inf there.
:func:`lessonlib.masked_softmax` is the reference every setting is compared with.

The helpers :func:`fill_then_softmax` and :func:`softmax_then_zero` are teaching tools that
reproduce these behaviours on purpose; the engine never uses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib._checks import (
    array_bytes,
    as_allowed_mask,
    as_dtype,
    as_float_array,
    broadcast_shape,
    check_choice,
    check_flag,
    check_instance,
    check_ndim,
    check_positive_int,
    check_real,
    refuse_oversized,
)
from lessonlib.attention import masked_softmax, softmax
from lessonlib.masks import causal_mask, combine_masks, padding_mask
from lessonlib.plots import BarPanel, HeatmapPanel, PartialRedraw, new_figure, pin_layout

ORDERS = {
    "before": "exclude before softmax",
    "after": "zero after softmax",
    "renormalise": "zero after softmax, then renormalise",
}
DTYPES = ("float16", "float32", "float64")
FILLS = {"-inf": -np.inf, "-1e4": -1e4, "-1e9": -1e9, "finfo.min": None}  # None: the dtype's own minimum
PRESETS = ("causal", "padding", "both", "none")

GRID_SIZE = 4
PADDED_LENGTH = 2  # the "padding" preset: keys 0 and 1 are real tokens, the rest are padding
# Every query scores the keys the same way, so only the mask makes rows differ. Key 2's score of
# 100 plays the role of the fixture's disallowed score: wherever it is allowed it takes almost all
# the weight, and wherever it is not, a softmax taken before masking has already given it almost all.
DEFAULT_SCORES = ((1.0, 2.0, 100.0, 3.0),) * GRID_SIZE

BoolGrid = tuple[tuple[bool, ...], ...]


def preset(name: str, size: int = GRID_SIZE, length: int = PADDED_LENGTH) -> BoolGrid:
    """The (size, size) allowed grid of a preset, True = the query may see the key.

    "causal": key <= query; "padding": key < ``length`` (a sequence of ``length`` real tokens);
    "both": causal AND padding; "none": every key allowed (no mask).
    """
    check_choice(name, "name", PRESETS)
    size = check_positive_int(size, "size")
    if not 0 <= check_positive_int(length, "length", minimum=0) <= size:
        raise ValueError(f"length must lie in 0..size={size} (the real tokens of the padded sequence), got {length}")
    refuse_oversized(array_bytes((size, size), np.int64, 2), f"preset({name!r}, size={size})",
                     "Choose a smaller size: the explorer's grid is 4 x 4.")
    if name == "causal":
        grid = causal_mask(size)  # (L, S)
    elif name == "padding":
        grid = np.broadcast_to(combine_masks(key_padding=padding_mask([length], size))[0], (size, size))
    elif name == "both":
        grid = combine_masks(causal_mask(size), padding_mask([length], size))[0]  # (L, S)
    else:  # "none"
        grid = np.ones((size, size), bool)
    return tuple(tuple(bool(v) for v in row) for row in grid)


def fill_value(fill: str, dtype: str | np.dtype) -> np.floating:
    """The fill as the chosen dtype stores it (-1e9 overflows to -inf in float16)."""
    check_choice(fill, "fill", tuple(FILLS))
    dtype = as_dtype(dtype, kinds="f")
    value = FILLS[fill]
    if value is None:
        return np.finfo(dtype).min
    with np.errstate(over="ignore"):
        return np.asarray(value).astype(dtype)[()]


def fill_then_softmax(scores: np.ndarray, allowed: np.ndarray, fill: float) -> np.ndarray:
    """Replace disallowed scores by ``fill``, then softmax, all in the scores' dtype.

    scores (..., S) floating; allowed boolean, broadcastable, True = may be attended to.
    With fill -inf a row with no allowed key is NaN (exp(-inf - (-inf))); with a finite fill it
    is uniform over keys that were all meant to be excluded.
    """
    scores = as_float_array(scores, "scores")
    check_ndim(scores, "scores", 1, "(..., S)")
    allowed = as_allowed_mask(allowed, "allowed")
    broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    if check_real(fill, "fill", allow_inf=True) == np.inf:
        raise ValueError("fill must be a finite number or -inf: it stands in for an excluded score")
    filled = np.where(allowed, scores, np.asarray(fill, dtype=scores.dtype))  # (..., S)
    with np.errstate(invalid="ignore", over="ignore"):
        return softmax(filled)


def softmax_then_zero(scores: np.ndarray, allowed: np.ndarray, *, renormalise: bool = False) -> np.ndarray:
    """The wrong order: softmax over every key, then zero the disallowed weights.

    scores (..., S) floating; allowed boolean, broadcastable, True = may be attended to.
    Without ``renormalise`` each row sums to the weight its allowed keys happened to get. With
    it the row is divided by that sum: exact in real arithmetic, but when the allowed weights have
    underflowed (to zero in float16) the row becomes 0/0 = NaN.
    """
    scores = as_float_array(scores, "scores")
    check_ndim(scores, "scores", 1, "(..., S)")
    allowed = as_allowed_mask(allowed, "allowed")
    broadcast_shape(scores.shape, allowed.shape, "scores and allowed mask")
    renormalise = check_flag(renormalise, "renormalise")
    weights = np.where(allowed, softmax(scores), np.zeros((), dtype=scores.dtype))  # (..., S)
    if renormalise:
        with np.errstate(invalid="ignore", divide="ignore"):
            weights = weights / np.sum(weights, axis=-1, keepdims=True)  # (..., S)
    return weights


# --- The explorer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    allowed: BoolGrid = preset("causal")  # (L, S), True = query i may see key j
    order: str = "before"  # a key of ORDERS
    dtype: str = "float32"
    fill: str = "-inf"  # a key of FILLS; used by the "before" order only
    scores: tuple[tuple[float, ...], ...] = DEFAULT_SCORES  # (L, S)

    def __post_init__(self) -> None:
        check_choice(self.order, "order", tuple(ORDERS))
        check_choice(self.dtype, "dtype", DTYPES)
        check_choice(self.fill, "fill", tuple(FILLS))
        allowed = as_allowed_mask(self.allowed, "allowed")
        scores = as_float_array(self.scores, "scores")
        if allowed.ndim != 2 or allowed.shape != scores.shape:
            raise ValueError(
                f"the allowed grid has shape {allowed.shape} but the scores have shape {scores.shape}; "
                "both must be (L, S)"
            )


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting."""

    settings: Settings
    allowed: np.ndarray  # (L, S) bool
    scores: np.ndarray  # (L, S) float64, as given
    weights: np.ndarray  # (L, S) computed in the chosen dtype, shown as float64
    reference: np.ndarray  # (L, S) lessonlib.masked_softmax in float64, empty rows all zero
    row_sums: np.ndarray  # (L,) NaN for a NaN row
    blocked_weight: np.ndarray  # (L,) weight that landed on disallowed keys
    stored_fill: float  # the fill as the dtype holds it
    nan_rows: tuple[int, ...]  # rows holding a NaN
    empty_rows: tuple[int, ...]  # rows with no allowed key
    max_gap: float  # largest |weights - reference|; NaN when any weight is NaN


def compute(settings: Settings) -> Result:
    """The weights for one mask, order, dtype and fill, with row sums and the gap to masked_softmax."""
    check_instance(settings, Settings, "settings")
    allowed = np.array(settings.allowed, dtype=bool)  # (L, S)
    scores = np.array(settings.scores, dtype=np.float64)  # (L, S)
    stored_fill = fill_value(settings.fill, settings.dtype)
    low = scores.astype(settings.dtype)  # (L, S)
    if settings.order == "before":
        weights = fill_then_softmax(low, allowed, stored_fill)
    else:
        weights = softmax_then_zero(low, allowed, renormalise=settings.order == "renormalise")
    weights = weights.astype(np.float64)  # (L, S)
    reference = masked_softmax(scores, allowed)  # (L, S)
    return Result(
        settings=settings,
        allowed=allowed,
        scores=scores,
        weights=weights,
        reference=reference,
        row_sums=weights.sum(axis=-1),
        blocked_weight=np.where(allowed, 0.0, weights).sum(axis=-1),
        stored_fill=float(stored_fill),
        nan_rows=tuple(int(i) for i in np.flatnonzero(np.isnan(weights).any(axis=-1))),
        empty_rows=tuple(int(i) for i in np.flatnonzero(~allowed.any(axis=-1))),
        max_gap=float(np.max(np.abs(weights - reference))),  # NaN propagates
    )


def _number(x: float) -> str:
    """Three significant digits, 'nan' for NaN: 1, 0.335, 3.76e-43."""
    return "nan" if np.isnan(x) else f"{x:.3g}"


def describe(result: Result) -> str:
    """The readout under the controls: the numbers the figure illustrates."""
    s = check_instance(result, Result, "result").settings
    fill = f"fill {s.fill} (stored {_number(result.stored_fill)})" if s.order == "before" else "fill unused"
    sums = ", ".join(_number(x) for x in result.row_sums)
    leaked = ", ".join(_number(x) for x in result.blocked_weight)
    return (
        f"{ORDERS[s.order]}, {s.dtype}, {fill}: row sums [{sums}]; "
        f"weight on blocked keys [{leaked}]; rows with no allowed key {list(result.empty_rows)}; "
        f"NaN rows {list(result.nan_rows)}; largest gap from masked_softmax {_number(result.max_gap)}"
    )


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    n_rows, n_cols = result.weights.shape
    n_blocked = int(np.count_nonzero(~result.allowed))
    leaking = int(np.count_nonzero(~result.allowed & (np.nan_to_num(result.weights, nan=0.0) != 0.0)))
    below = int(np.count_nonzero(result.row_sums < 1.0 - 1e-3))
    return (
        f"left, the {n_rows}x{n_cols} weights with {n_blocked} blocked cells hatched, "
        f"{leaking} of them carrying weight; right, the row sums: {below} below one, "
        f"{len(result.nan_rows)} NaN"
    )


class Figure:
    """The weights heatmap (left) and the row sums (right), built once and updated in place.

    Only what a new setting changes is redrawn (the image, hatches, cell labels, bars and titles);
    frames, tick labels and axis labels are rasterised once.
    """

    def __init__(self, shape: tuple[int, int] = (GRID_SIZE, GRID_SIZE)) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        self.weights = HeatmapPanel(left, shape, show_leaks=True)
        self.sums = BarPanel(right, shape[0], ylabel="row sum", xlabel="query", ylim=(0.0, 1.15))
        right.axhline(1.0, color="0.3", lw=0.8, ls="--")
        for ax in (left, right):
            pin_layout(ax)
        right.set_yticks([0.0, 0.5, 1.0])
        cells = [artist for row in self.weights.hatches for artist in row]
        cells += [text for row in (self.weights.texts or []) for text in row]
        dynamic = [self.weights.image, *cells, *self.sums.rects, left.title, right.title,
                   *right.lines, *left.spines.values(), *right.spines.values()]
        self.redraw = PartialRedraw(self.fig, dynamic)

    def draw(self, result: Result) -> PartialRedraw:
        """Show ``result``; returns the figure's renderer (``figure_png`` turns it into an image)."""
        s = result.settings
        self.weights.update(result.weights, allowed=result.allowed, title=f"weights ({s.dtype})")
        nan_note = f"; NaN rows {', '.join(map(str, result.nan_rows))}" if result.nan_rows else ""
        self.sums.update(np.nan_to_num(result.row_sums, nan=0.0), title=f"row sums{nan_note}")
        return self.redraw


def _mask_grid(allowed: BoolGrid) -> Any:
    """A grid of toggle buttons (one per query/key cell) and preset buttons, as one control.

    Its ``value`` is the grid as a tuple of tuples of bools. Setting it (a preset, or code) moves
    every button at once and changes ``value`` once, so the explorer redraws once.
    """
    import ipywidgets as widgets
    import traitlets

    class MaskGrid(widgets.VBox):
        value = traitlets.Tuple()  # Python-side state only: the explorer observes it

    n_rows, n_cols = len(allowed), len(allowed[0])
    cells = [[widgets.ToggleButton(value=allowed[i][j], layout=widgets.Layout(width="40px"))
              for j in range(n_cols)] for i in range(n_rows)]
    grid = MaskGrid(value=tuple(tuple(bool(v) for v in row) for row in allowed))
    syncing = False  # True while the buttons follow a new grid value

    def label(cell: Any, i: int, j: int) -> None:
        cell.description = "✓" if cell.value else "·"
        cell.tooltip = f"query {i}, key {j}: {'allowed' if cell.value else 'blocked'}"

    def cell_changed(i: int, j: int) -> Any:
        def handler(_change: object) -> None:
            label(cells[i][j], i, j)
            if not syncing:
                grid.value = tuple(tuple(c.value for c in row) for row in cells)
        return handler

    def follow_value(change: dict[str, Any]) -> None:
        nonlocal syncing
        syncing = True
        try:
            for i, row in enumerate(change["new"]):
                for j, v in enumerate(row):
                    cells[i][j].value = bool(v)
        finally:
            syncing = False

    def apply(name: str) -> Any:
        def handler(_button: object) -> None:
            grid.value = preset(name, n_rows)
        return handler

    for i in range(n_rows):
        for j in range(n_cols):
            label(cells[i][j], i, j)
            cells[i][j].observe(cell_changed(i, j), names="value")
    grid.observe(follow_value, names="value")
    buttons = []
    for name in PRESETS:
        button = widgets.Button(description="no mask" if name == "none" else name,
                                tooltip=f"set the grid to the {name} preset",
                                layout=widgets.Layout(width="80px"))
        button.on_click(apply(name))
        buttons.append(button)
    header = [widgets.Label("")] + [widgets.Label(f"key {j}") for j in range(n_cols)]
    rows = [[widgets.Label(f"query {i}")] + cells[i] for i in range(n_rows)]
    table = widgets.GridBox([w for row in [header, *rows] for w in row],
                            layout=widgets.Layout(grid_template_columns=f"70px repeat({n_cols}, 44px)"))
    grid.children = [widgets.HBox([widgets.Label("presets:"), *buttons]), table]
    return grid


def show(settings: Settings = Settings()) -> Any:
    """The widget: the allowed grid with presets, the order, the dtype and the fill."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    figure = Figure(np.shape(settings.allowed))
    wide = {"description_width": "initial"}
    controls = {
        "allowed": _mask_grid(settings.allowed),
        "order": widgets.Dropdown(options=[(label, key) for key, label in ORDERS.items()],
                                  value=settings.order, description="where the mask is applied",
                                  style=wide, layout=widgets.Layout(width="420px")),
        "dtype": widgets.ToggleButtons(options=DTYPES, value=settings.dtype, description="dtype"),
        "fill": widgets.ToggleButtons(options=tuple(FILLS), value=settings.fill,
                                      description="fill", tooltips=[
                                          "minus infinity: exact exclusion", "a small finite fill",
                                          "a large finite fill (-inf in float16)",
                                          "the most negative finite number of the dtype"]),
    }

    return build_explorer(controls, settings, compute=compute, describe=describe,
                          draw=figure.draw, alt_text=alt_text,
                          title="Masking explorer: which keys each query may see, and when")
