"""Explorer for notebook 03: where position enters attention, and what content matching cannot see.

Self-attention with no position mechanism is permutation-equivariant: shuffle the tokens and
the outputs come out shuffled the same way, nothing else changes. Each mechanism breaks that
symmetry at a different place:

    none         -> nowhere: only content meets content
    sinusoidal   -> the representation: x_p + PE(p) before the projections
    learned      -> the representation: x_p + table[p] (no row past the table's size)
    relative     -> the score: + b[bucket(k - q)] (T5-style buckets, one learned number each)
    alibi        -> the score: - m_h * |q - k|
    rope         -> the query/key rotation: rope(q, p_q) . rope(k, p_k) sees only p_q - p_k

:func:`self_attention` runs one layer with any of them, so the notebook and the widget use the
same code; :func:`permutation_deviation` and :func:`shift_change` measure the two properties
the explorer reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib._checks import (
    array_bytes,
    as_float_array,
    as_int_array,
    check_choice,
    check_flag,
    check_instance,
    check_positive_int,
    refuse_oversized,
)
from lessonlib.attention import (
    MultiHeadParams,
    attention_scores,
    init_multi_head,
    masked_softmax,
    merge_heads,
    softmax,
    split_heads,
)
from lessonlib.masks import causal_mask
from lessonlib.plots import HeatmapPanel, PartialRedraw, new_figure, pin_layout
from lessonlib.position import (
    LearnedPositions,
    Pairing,
    alibi_bias,
    inverse_permutation,
    permute,
    relative_position_bias,
    rope,
    sinusoidal_positions,
)

MECHANISMS = ("none", "sinusoidal", "learned", "relative", "alibi", "rope")

WHERE_POSITION_ENTERS = {
    "none": "nowhere",
    "sinusoidal": "representation",
    "learned": "representation",
    "relative": "score",
    "alibi": "score",
    "rope": "query/key rotation",
}

# --- One attention layer with a chosen position mechanism ------------------------------------------


@dataclass(frozen=True)
class PositionModel:
    """The weights one layer needs for every mechanism, drawn once from a seed.

    params: the multi-head projections; learned: a table of max_positions rows;
    bucket_bias (n_buckets, H): one number per relative-position bucket and head.
    """

    params: MultiHeadParams
    learned: LearnedPositions
    bucket_bias: np.ndarray  # (n_buckets, H)
    max_distance: int = 128

    def __post_init__(self) -> None:
        check_instance(self.params, MultiHeadParams, "params")
        check_instance(self.learned, LearnedPositions, "learned")
        bucket_bias = as_float_array(self.bucket_bias, "bucket_bias")
        if bucket_bias.shape[1:] != (self.params.n_heads,) or bucket_bias.shape[0] < 4:
            raise ValueError(f"bucket_bias must be (n_buckets, n_heads) = (at least 4, {self.params.n_heads}), "
                             f"got shape {bucket_bias.shape}")
        if self.learned.d_model != self.params.w_q.shape[0]:
            raise ValueError(f"the learned table has width {self.learned.d_model} but the projections take "
                             f"{self.params.w_q.shape[0]}")
        check_positive_int(self.max_distance, "max_distance")


def make_model(
    d_model: int = 8, n_heads: int = 1, *, max_positions: int = 64, n_buckets: int = 32, seed: int = 0
) -> PositionModel:
    """Random projections, a learned table with ``max_positions`` rows and bucket biases.

    The table's entries have standard deviation 1, like the token contents, so that position is
    visible in the scores (a freshly initialised table would use about 0.02).
    """
    seed = check_positive_int(seed, "seed", minimum=0)
    if check_positive_int(n_buckets, "n_buckets") < 4:
        raise ValueError(f"n_buckets must be at least 4 (relative buckets cover both directions), got {n_buckets}")
    rng = np.random.default_rng(seed)
    params = init_multi_head(d_model, n_heads, rng=rng)
    learned = LearnedPositions(max_positions, d_model, rng=rng, std=1.0)
    bucket_bias = rng.normal(0.0, 1.0, size=(n_buckets, n_heads))  # (n_buckets, H)
    return PositionModel(params=params, learned=learned, bucket_bias=bucket_bias)


@dataclass(frozen=True)
class LayerResult:
    """What one self-attention layer computed; heads kept apart for inspection."""

    output: np.ndarray  # (n, d_model), or (n_q, d_model) for chosen queries
    weights: np.ndarray  # (H, n_q, n)
    scores: np.ndarray  # (H, n_q, n), scaled, with any position bias added, before masking


def check_mechanism(mechanism: str) -> str:
    """Refuse an unknown mechanism name, listing the known ones."""
    return check_choice(mechanism, "mechanism", MECHANISMS)


def self_attention(
    x: np.ndarray,
    model: PositionModel,
    mechanism: str,
    *,
    offset: int = 0,
    causal: bool = False,
    queries: np.ndarray | None = None,
    pairing: Pairing = "interleaved",
) -> LayerResult:
    """Self-attention of the tokens x (n, d_model) sitting at positions offset .. offset + n - 1.

    Position enters where ``mechanism`` puts it (see WHERE_POSITION_ENTERS). ``queries`` picks
    the query rows to compute (indices into 0..n-1, default all), so a long context can be
    probed one query at a time; ``causal`` lets query i see keys 0..i only.
    """
    check_mechanism(mechanism)
    check_instance(model, PositionModel, "model")
    x = as_float_array(x, "x")  # (n, d)
    width = model.params.w_q.shape[0]
    if x.ndim != 2 or x.shape[1] != width:
        raise ValueError(f"x must be tokens (n, d_model) = (n, {width}) for this model, got shape {x.shape}")
    offset = check_positive_int(offset, "offset", minimum=0)
    causal = check_flag(causal, "causal")
    n = x.shape[0]
    positions = offset + np.arange(n)  # (n,)
    rows = np.arange(n) if queries is None else as_int_array(queries, "queries")  # (n_q,)
    if rows.ndim != 1 or rows.min() < 0 or rows.max() >= n:
        raise ValueError(f"queries must be a 1-D list of query rows in 0..{n - 1}, got {rows.tolist()}")
    if mechanism == "sinusoidal":
        x = x + sinusoidal_positions(offset + n, x.shape[-1])[offset:]  # (n, d)
    elif mechanism == "learned":
        x = x + model.learned(positions)  # (n, d); raises past the table's size
    p = model.params
    q = split_heads(x[rows] @ p.w_q, p.n_heads)  # (H, n_q, d_head)
    k = split_heads(x @ p.w_k, p.n_heads)  # (H, n, d_head)
    v = split_heads(x @ p.w_v, p.n_heads)  # (H, n, d_head)
    if mechanism == "rope":
        q = rope(q, positions[rows], pairing=pairing)  # (H, n_q, d_head)
        k = rope(k, positions, pairing=pairing)  # (H, n, d_head)
    scores = attention_scores(q, k)  # (H, n_q, n)
    if mechanism == "relative":  # b[bucket(key - query)]: the offset drops out
        bias = relative_position_bias(n, n, model.bucket_bias, max_distance=model.max_distance)  # (H, n, n)
        scores += bias[:, rows]  # (H, n_q, n)
    elif mechanism == "alibi":  # -m_h |key - query|, again offsets only
        scores += alibi_bias(n, n, p.n_heads)[:, rows]  # (H, n_q, n)
    if causal:
        weights = masked_softmax(scores, causal_mask(n)[rows])  # (H, n_q, n)
    else:
        weights = softmax(scores)  # (H, n_q, n)
    output = merge_heads(weights @ v) @ p.w_o  # (n_q, d_model)
    return LayerResult(output=output, weights=weights, scores=scores)


def permutation_deviation(
    x: np.ndarray, model: PositionModel, mechanism: str, perm: np.ndarray | list[int], **options: Any
) -> float:
    """max |SA(P x) - P SA(x)|: zero (to rounding) exactly when outputs permute with the inputs."""
    plain = self_attention(x, model, mechanism, **options).output  # (n, d)
    shuffled = self_attention(permute(x, perm), model, mechanism, **options).output  # (n, d)
    return float(np.max(np.abs(shuffled - permute(plain, perm))))


def shift_change(
    x: np.ndarray, model: PositionModel, mechanism: str, shift: int, *, causal: bool = False
) -> float:
    """max |scores at positions shift.. - scores at positions 0..| over the keys each query may see.

    Zero (to rounding) when the scores depend on position offsets only, or not on position at all.
    """
    before = self_attention(x, model, mechanism, causal=causal).scores  # (H, n, n)
    after = self_attention(x, model, mechanism, offset=shift, causal=causal).scores  # (H, n, n)
    allowed = causal_mask(x.shape[0]) if causal else np.ones(before.shape[-2:], bool)  # (n, n)
    return float(np.max(np.abs(after - before)[:, allowed]))


def shuffle_order(n: int, shuffle: int) -> np.ndarray:
    """Token order for the ``shuffle`` control: 0 keeps 0..n-1; k > 0 draws a permutation from seed k."""
    if shuffle == 0:
        return np.arange(n)
    return np.random.default_rng(shuffle).permutation(n)


TOLERANCE_TEXT = "1e-9"
TOLERANCE = float(TOLERANCE_TEXT)  # deviations below this are rounding, not a broken symmetry


def deviation_text(value: float) -> str:
    """A deviation as the readout prints it: rounding as "below 1e-9", small values in e-notation,
    others to two decimals. The size of rounding noise (2e-16 on one CPU, 4e-16 on another) depends
    on the CPU's kernels, so it is not printed; an exact 0 comes from identical computations and is."""
    if value == 0:
        return "0"
    if value < TOLERANCE:
        return f"below {TOLERANCE_TEXT}"
    return f"{value:.0e}" if value < 1e-3 else f"{value:.2f}"


# --- The explorer ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What the learner controls."""

    mechanism: str = "none"
    shuffle: int = 1  # 0 keeps the order; k > 0 shuffles with seed k
    offset: int = 0  # every position shifted by this much
    causal: bool = False
    n_tokens: int = 6
    d_model: int = 16
    n_heads: int = 4  # ALiBi slopes 1/4, 1/16, 1/64, 1/256; the figure shows head 0
    max_positions: int = 64  # rows of the learned table
    seed: int = 0

    def __post_init__(self) -> None:
        check_mechanism(self.mechanism)
        for name in ("shuffle", "offset", "seed"):
            check_positive_int(getattr(self, name), name, minimum=0)
        for name in ("n_tokens", "d_model", "n_heads", "max_positions"):
            check_positive_int(getattr(self, name), name)
        check_flag(self.causal, "causal")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} does not split into n_heads={self.n_heads} equal heads")
        if self.mechanism == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"RoPE turns pairs of coordinates, so d_model / n_heads must be even, got "
                             f"{self.d_model} / {self.n_heads}")
        refuse_oversized(array_bytes((self.n_heads, self.n_tokens, self.n_tokens), np.float64, 12),
                         f"the position explorer with n_tokens={self.n_tokens} and n_heads={self.n_heads}",
                         "Use fewer tokens.")


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting (scores of head 0, outputs of all heads)."""

    settings: Settings
    order: np.ndarray  # (n,) token order: shuffled[i] = x[order[i]]
    scores: np.ndarray  # (n, n) scores of the original order at positions offset..
    scores_back: np.ndarray  # (n, n) scores of the shuffled input, rows and columns put back
    allowed: np.ndarray  # (n, n) keys each query of the original order may see
    allowed_back: np.ndarray  # (n, n) the shuffled run's allowed keys, put back the same way
    deviation: float  # max |SA(P x) - P SA(x)|, NaN when the learned table has no rows there
    shift: float  # max score change (any head) from offset 0 to this offset, NaN as above
    where: str  # where position enters
    past_table: bool  # a learned table asked for positions it does not have


def compute(settings: Settings) -> Result:
    """Run the layer on the tokens and on their shuffle; compare, and compare with offset 0."""
    s = check_instance(settings, Settings, "settings")
    n = s.n_tokens
    model = _model(s.d_model, s.n_heads, s.max_positions, s.seed)
    x = np.random.default_rng(s.seed + 1).standard_normal((n, s.d_model))  # (n, d)
    order = shuffle_order(n, s.shuffle)
    back = inverse_permutation(order)
    allowed = causal_mask(n) if s.causal else np.ones((n, n), bool)  # (n, n)
    allowed_back = allowed[np.ix_(back, back)]  # (n, n)
    where = WHERE_POSITION_ENTERS[s.mechanism]
    if s.mechanism == "learned" and s.offset + n > s.max_positions:
        blank = np.full((n, n), np.nan)
        return Result(s, order, blank, blank, allowed, allowed_back, float("nan"), float("nan"),
                      where, past_table=True)
    plain = self_attention(x, model, s.mechanism, offset=s.offset, causal=s.causal)
    shuffled = self_attention(permute(x, order), model, s.mechanism, offset=s.offset, causal=s.causal)
    deviation = permutation_deviation(x, model, s.mechanism, order, offset=s.offset, causal=s.causal)
    shift = shift_change(x, model, s.mechanism, s.offset, causal=s.causal)
    scores_back = shuffled.scores[0][np.ix_(back, back)]  # (n, n) token i's row, token j's column
    return Result(s, order, plain.scores[0], scores_back, allowed, allowed_back, deviation, shift,
                  where, past_table=False)


_MODELS: dict[tuple[int, int, int, int], PositionModel] = {}


def _model(d_model: int, n_heads: int, max_positions: int, seed: int) -> PositionModel:
    """The layer's weights for these settings, drawn once and reused on every update."""
    key = (d_model, n_heads, max_positions, seed)
    if key not in _MODELS:
        _MODELS[key] = make_model(d_model, n_heads, max_positions=max_positions, seed=seed)
    return _MODELS[key]


def describe(result: Result) -> str:
    """The readout under the controls: the numbers the figure illustrates."""
    s = check_instance(result, Result, "result").settings
    head = f"{s.mechanism} (position enters: {result.where}); order {result.order.tolist()}; offset {s.offset}"
    if s.causal:
        head += "; causal mask"
    if result.past_table:
        return (f"{head}: positions {s.offset}..{s.offset + s.n_tokens - 1} go past the learned table's "
                f"{s.max_positions} rows, so there is nothing to compute")
    permutes = "yes" if result.deviation < TOLERANCE else "no"
    shifts = "no" if result.shift < TOLERANCE else "yes"
    return (f"{head}: outputs permute with inputs: {permutes} (max deviation "
            f"{deviation_text(result.deviation)}); scores change with the offset: {shifts} "
            f"(max change {deviation_text(result.shift)})")


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    if result.past_table:
        return "both panels are empty: the learned table has no vectors for these positions"
    same = "the same" if np.allclose(result.scores, result.scores_back, equal_nan=True) else "different"
    low, high = _score_range(result)
    return (f"left, the scores of the tokens in their original order (from {low:.2f} to {high:.2f}); "
            f"right, the scores of the shuffled tokens put back in the original order: {same}"
            + ("; hatched cells are masked" if result.settings.causal else ""))


def _score_range(result: Result) -> tuple[float, float]:
    """Smallest and largest score either panel shows on allowed cells."""
    shown = np.concatenate([result.scores[result.allowed], result.scores_back[result.allowed_back]])
    return float(np.min(shown)), float(np.max(shown))


class Figure:
    """Two score heatmaps, original order and shuffled-then-put-back, updated in place.

    Titles, token labels and frames never change, so they are rasterised once; an update redraws
    the two images, the hatching of masked cells and the frames drawn over them.
    """

    def __init__(self, n_tokens: int) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        shape = (n_tokens, n_tokens)
        self.left = HeatmapPanel(left, shape, annotate=False, xlabel="key token", ylabel="query token")
        self.right = HeatmapPanel(right, shape, annotate=False, xlabel="key token", ylabel="")
        right.tick_params(labelleft=False)  # same tokens as on the left
        self.left.ax.set_title("head 0 scores, original order", fontsize=9)
        self.right.ax.set_title("shuffled, put back", fontsize=9)
        for ax in (left, right):
            pin_layout(ax, max_yticks=None)
        dynamic = [self.left.image, self.right.image, *left.spines.values(), *right.spines.values()]
        for panel in (self.left, self.right):
            dynamic += [patch for row in panel.hatches for patch in row]
        self.redraw = PartialRedraw(self.fig, dynamic)

    def draw(self, result: Result) -> PartialRedraw:
        """Show ``result`` on one colour scale; returns the renderer ``figure_png`` turns into an image."""
        if result.past_table:
            low, high = 0.0, 1.0
        else:
            low, high = _score_range(result)
            high = high if high > low else low + 1.0
        self.left.update(result.scores, allowed=result.allowed, title=self.left.ax.get_title())
        self.right.update(result.scores_back, allowed=result.allowed_back, title=self.right.ax.get_title())
        for panel in (self.left, self.right):
            panel.image.set_clim(low, high)
        return self.redraw


def show(settings: Settings = Settings()) -> Any:
    """The widget: mechanism, shuffle, offset and causal controls wired to compute() and draw()."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    figure = Figure(settings.n_tokens)
    controls = {
        "mechanism": widgets.Dropdown(options=MECHANISMS, value=settings.mechanism, description="position"),
        # a drop-down and a number box, not sliders: ipywidgets' slider handles carry no accessible name
        "shuffle": widgets.Dropdown(options=list(range(10)), value=settings.shuffle, description="shuffle seed"),
        "offset": widgets.BoundedIntText(value=settings.offset, min=0, max=100, description="offset"),
        "causal": widgets.Checkbox(value=settings.causal, description="causal mask"),
    }

    return build_explorer(controls, settings, compute=compute, describe=describe,
                          draw=figure.draw, alt_text=alt_text, title="Position explorer: what order can change")
