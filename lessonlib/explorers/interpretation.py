"""Explorer for notebook 05: attention weights against what actually changes a decision.

One query attends over a few keys; a downstream "decision" reads the attention output through a
fixed readout vector u: decision = u . output. The weight of a key says how much of its value
was mixed in; it does not say what happens to the decision when the key is removed or its value
is edited. Removing key j (excluding it with the mask, so the others are renormalised) changes
the output by w_j / (1 - w_j) * (output - v_j), which is zero whenever v_j already equals the
output, however large w_j is; and it changes the decision by u . that, which is also zero when
v_j differs from the output only in a direction u ignores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib._checks import (
    as_float_array,
    check_choice,
    check_flag,
    check_index,
    check_instance,
    check_positive_int,
    check_real,
)
from lessonlib.attention import MultiHeadParams, multi_head_attention, scaled_dot_product_attention
from lessonlib.plots import BarPanel, PartialRedraw, new_figure, pin_layout

N_KEYS = 6
QUIET_KEY = 2  # in the default example, the key with the largest weight and no effect on the decision
EXAMPLE_SEED = 4  # an example where weights and exclusion effects disagree plainly


@dataclass(frozen=True)
class Example:
    """A single query over S keys, and the readout a later decision applies to the output."""

    query: np.ndarray  # (d_k,)
    keys: np.ndarray  # (S, d_k)
    values: np.ndarray  # (S, d_v)
    readout: np.ndarray  # (d_v,), unit length; decision = readout . output

    def __post_init__(self) -> None:
        q, k, v, u = (as_float_array(getattr(self, name), name) for name in ("query", "keys", "values", "readout"))
        if ((q.ndim, k.ndim, v.ndim, u.ndim) != (1, 2, 2, 1) or k.shape[1] != q.shape[0]
                or v.shape[0] != k.shape[0] or u.shape[0] != v.shape[1]):
            raise ValueError(f"an Example needs query (d_k,), keys (S, d_k), values (S, d_v) and readout (d_v,); "
                             f"got shapes {q.shape}, {k.shape}, {v.shape} and {u.shape}")


def attend(example: Example, *, values: np.ndarray | None = None, exclude: int | None = None) -> tuple[
        np.ndarray, np.ndarray]:
    """Output (d_v,) and weights (S,) of the example's query; ``exclude`` removes one key by the mask."""
    values = example.values if values is None else values  # (S, d_v)
    allowed = np.ones(example.keys.shape[0], dtype=bool)  # (S,), True = may be attended to
    if exclude is not None:
        allowed[exclude] = False
    result = scaled_dot_product_attention(example.query, example.keys, values, mask=allowed)
    return result.output, result.weights


def ignored_direction(readout: np.ndarray, seed: int = 0) -> np.ndarray:
    """A unit vector orthogonal to ``readout``: moving a value along it cannot change u . value."""
    readout = np.asarray(readout, dtype=float)
    if readout.ndim != 1 or readout.size < 2:
        raise ValueError(f"readout must be a vector of width >= 2 to leave a direction free, got {readout.shape}")
    unit = readout / np.linalg.norm(readout)
    candidate = np.random.default_rng(seed).standard_normal(readout.size)  # (d_v,)
    candidate -= (candidate @ unit) * unit  # remove the part the readout sees
    return candidate / np.linalg.norm(candidate)


def make_example(n_keys: int = N_KEYS, d_k: int = 4, d_v: int = 3, *, seed: int = EXAMPLE_SEED,
                 top_value: str = "ignored-offset", quiet_key: int = QUIET_KEY) -> Example:
    """A random example whose largest-weight key sits at ``quiet_key``, with its value chosen by ``top_value``.

    "random": left as drawn. "output": set to the output the other keys give without it, so the
    key's weight is the largest but excluding it changes nothing. "ignored-offset" (the default):
    that same vector plus 1.5 times a unit direction the readout ignores, so excluding the key
    moves the output but not the decision. A key's weight does not depend on its value, so the
    weights are the same in all three.
    """
    n_keys = check_positive_int(n_keys, "n_keys", minimum=2)
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v", minimum=2)  # a direction the readout ignores needs d_v >= 2
    seed = check_positive_int(seed, "seed", minimum=0)
    check_choice(top_value, "top_value", ("random", "output", "ignored-offset"))
    check_index(quiet_key, "quiet_key", n_keys)
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(d_k)  # (d_k,)
    keys = rng.standard_normal((n_keys, d_k))  # (S, d_k)
    values = rng.standard_normal((n_keys, d_v))  # (S, d_v)
    readout = rng.standard_normal(d_v)  # (d_v,)
    readout /= np.linalg.norm(readout)
    top = int(np.argmax(keys @ query))  # the largest score gets the largest weight
    order = np.arange(n_keys)
    order[[top, quiet_key]] = order[[quiet_key, top]]  # move it to quiet_key
    example = Example(query, keys[order], values[order], readout)
    if top_value == "random":
        return example
    without, _ = attend(example, exclude=quiet_key)  # (d_v,), does not involve values[quiet_key]
    new_values = example.values.copy()  # (S, d_v)
    new_values[quiet_key] = without
    if top_value == "ignored-offset":
        new_values[quiet_key] += 1.5 * ignored_direction(readout, seed)
    return Example(query, example.keys, new_values, readout)


def exclusion_effects(example: Example, values: np.ndarray | None = None) -> np.ndarray:
    """(S,) signed change of the decision u . output when each key alone is excluded by the mask."""
    check_instance(example, Example, "example")
    values = example.values if values is None else as_float_array(values, "values")
    if values.shape != example.values.shape:
        raise ValueError(f"values must have the example's shape {example.values.shape}, got {values.shape}")
    base, _ = attend(example, values=values)
    return np.array([(attend(example, values=values, exclude=j)[0] - base) @ example.readout
                     for j in range(example.keys.shape[0])])


def ranks(x: np.ndarray, *, rtol: float = 1e-9) -> np.ndarray:
    """Rank of each entry, 1 = largest; tied entries share the mean of their ranks.

    x (n,). Entries less than ``rtol * max|x|`` apart count as tied: two values that are equal in
    exact arithmetic (two keys with the same token and the same bias, say) come out of a float
    computation a few units in the last place apart, and which one is then larger depends on the
    CPU's BLAS kernel, not on the model.
    """
    x = np.asarray(x, dtype=float)  # (n,)
    if x.size == 0:
        return x
    order = np.argsort(-x, kind="stable")  # (n,) largest first
    gaps = -np.diff(x[order])  # (n - 1,) each sorted entry's distance below the one before
    group = np.concatenate([[0], np.cumsum(gaps > rtol * np.abs(x).max())])  # (n,) tie group, sorted order
    places = np.arange(1, x.size + 1)  # (n,) rank of each sorted entry before ties are shared
    shared = np.bincount(group, weights=places) / np.bincount(group)  # (groups,) mean rank per group
    r = np.empty(x.size)
    r[order] = shared[group]
    return r


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation: the Pearson correlation of the two rank vectors (+1 same order, -1 reversed)."""
    a, b = as_float_array(a, "a"), as_float_array(b, "b")
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"a and b must be two 1-D sequences of equal length >= 2, got shapes {a.shape} and {b.shape}")
    ra, rb = ranks(a) - (a.size + 1) / 2, ranks(b) - (b.size + 1) / 2
    denom = np.sqrt((ra @ ra) * (rb @ rb))
    if denom == 0:
        raise ValueError("a rank correlation needs values that are not all equal")
    return float(ra @ rb / denom)


def layer_decision(tokens: np.ndarray, params: MultiHeadParams, readout: np.ndarray) -> tuple[float, np.ndarray]:
    """A decision read after one self-attention layer with a residual connection, at the last position.

    tokens (n, d_model); decision = readout . (tokens[-1] + MHA(tokens)[-1]). Returns the decision
    and the last query's weights in every head, (H, n).
    """
    layer = multi_head_attention(tokens, None, params)
    return float((tokens[-1] + layer.output[-1]) @ readout), layer.weights[..., -1, :]


def replacement_effects(tokens: np.ndarray, params: MultiHeadParams, readout: np.ndarray,
                        replacement: np.ndarray | None = None) -> np.ndarray:
    """(n,) |decision change| when each token alone is replaced (by zeros unless given), the rest held fixed.

    A replaced token changes its key and value, and for the last token also the query and the
    residual path: every route by which the token can reach the decision.
    """
    tokens = np.asarray(tokens, dtype=float)  # (n, d_model)
    replacement = np.zeros(tokens.shape[-1]) if replacement is None else replacement  # (d_model,)
    base, _ = layer_decision(tokens, params, readout)
    effects = []
    for i in range(tokens.shape[0]):
        changed = tokens.copy()
        changed[i] = replacement
        effects.append(abs(layer_decision(changed, params, readout)[0] - base))
    return np.array(effects)


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    key: int = QUIET_KEY  # the key to edit or exclude
    scale: float = 1.0  # multiplies that key's value vector
    shift: float = 0.0  # moves that value along a direction the readout ignores
    exclude: bool = False  # remove that key with the mask
    seed: int = EXAMPLE_SEED

    def __post_init__(self) -> None:
        check_index(self.key, "key", N_KEYS)
        check_real(self.scale, "scale")
        check_real(self.shift, "shift")
        check_flag(self.exclude, "exclude")
        check_positive_int(self.seed, "seed", minimum=0)


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting."""

    settings: Settings
    weights: np.ndarray  # (S,) weights of the unedited example
    effects: np.ndarray  # (S,) |decision change| when each key alone is excluded (value edit applied)
    rho: float  # Spearman correlation of weights and effects
    weight_rank: float  # rank of the chosen key by weight, 1 = largest
    effect_rank: float  # rank of the chosen key by exclusion effect
    decision_before: float  # u . output, unedited example
    decision_after: float  # after the edit (and the exclusion, if on)
    output_shift: float  # |output after - output before|


def compute(settings: Settings) -> Result:
    """Weights, exclusion effects and the chosen intervention's effect, for the default example."""
    check_instance(settings, Settings, "settings")
    example = make_example(seed=settings.seed)
    values = example.values.copy()  # (S, d_v)
    values[settings.key] = (settings.scale * values[settings.key]
                            + settings.shift * ignored_direction(example.readout, settings.seed))
    before, weights = attend(example)
    after, _ = attend(example, values=values, exclude=settings.key if settings.exclude else None)
    effects = np.abs(exclusion_effects(example, values))  # (S,)
    return Result(
        settings=settings,
        weights=weights,
        effects=effects,
        rho=spearman(weights, effects),
        weight_rank=float(ranks(weights)[settings.key]),
        effect_rank=float(ranks(effects)[settings.key]),
        decision_before=float(before @ example.readout),
        decision_after=float(after @ example.readout),
        output_shift=float(np.linalg.norm(after - before)),
    )


def describe(result: Result) -> str:
    """The readout under the controls: the numbers the figure illustrates."""
    s, k = check_instance(result, Result, "result").settings, result.settings.key
    edit = f"value x{s.scale:g}, shifted {s.shift:+g} along an ignored direction" + (", excluded" if s.exclude else "")
    return (
        f"key {k}: weight {result.weights[k]:.3f} (rank {result.weight_rank:g} of {result.weights.size}); "
        f"excluding it changes the decision by {result.effects[k]:.3f} "
        f"(rank {result.effect_rank:g}); {edit}: decision {result.decision_after:.3f} "
        f"(was {result.decision_before:.3f}), output moved {result.output_shift:.3f}; "
        f"Spearman(weights, effects) = {result.rho:.2f}"
    )


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    k = result.settings.key
    top_w, top_e = int(np.argmax(result.weights)), int(np.argmax(result.effects))
    return (
        f"left, attention weights of {result.weights.size} keys, largest {result.weights[top_w]:.2f} on key {top_w}; "
        f"right, the size of the decision change when each key is excluded, largest {result.effects[top_e]:.2f} "
        f"on key {top_e}; key {k} is hatched and marked by a triangle in both"
    )


class Figure:
    """Left: the weights. Right: the decision change when each key is excluded.

    The chosen key's bars are hatched and a triangle under the axis points at it (a bar of
    height zero shows no hatching). Only what a new setting changes is redrawn: the bars, the
    triangles, the right title and the right y axis (its range follows the effects); frames, key
    labels, axis labels and the fixed weight axis are rasterised once.
    """

    WEIGHTS_TITLE = "attention weights"

    def __init__(self, n_keys: int = N_KEYS) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        self.weights = BarPanel(left, n_keys, ylabel="weight", ylim=(0.0, 1.0))
        self.effects = BarPanel(right, n_keys)
        self.pointers = [ax.plot([0], [0], marker="^", ms=7, color="0.15", ls="none", clip_on=False,
                                 transform=ax.get_xaxis_transform())[0] for ax in (left, right)]
        for ax in (left, right):
            pin_layout(ax)
        left.set_title(self.WEIGHTS_TITLE, fontsize=9)
        # the right y axis is redrawn with its moving ticks; its label is a separate, static text
        right.text(-0.2, 0.5, "|decision change|", transform=right.transAxes, rotation=90, ha="center",
                   va="center", fontsize=8)
        dynamic = [*self.weights.rects, *self.effects.rects, *self.pointers, right.title, right.yaxis,
                   *right.lines, *left.spines.values(), *right.spines.values()]
        self.redraw = PartialRedraw(self.fig, dynamic)
        self.key: int | None = None

    def draw(self, result: Result) -> PartialRedraw:
        """Show ``result``; returns the figure's renderer (``figure_png`` turns it into an image)."""
        k = result.settings.key
        if k != self.key:  # restyle only when the chosen key changes
            for panel in (self.weights, self.effects):
                for i, rect in enumerate(panel.rects):
                    rect.set_hatch("///" if i == k else "")
            for pointer in self.pointers:
                pointer.set_xdata([k])
            self.key = k
        self.weights.update(result.weights, title=self.WEIGHTS_TITLE)
        self.effects.update(result.effects, title=f"excluding each key (rho {result.rho:.2f})")
        return self.redraw


def show(settings: Settings = Settings()) -> Any:
    """The widget: choose a key, scale or shift its value, exclude it; wired to compute() and draw()."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    figure = Figure()
    wide = {"description_width": "initial"}
    controls = {
        "key": widgets.Dropdown(options=list(range(N_KEYS)), value=settings.key, description="key"),
        # number boxes, not sliders: ipywidgets' slider handles carry no accessible name
        "scale": widgets.BoundedFloatText(value=settings.scale, min=-2.0, max=3.0, step=0.25,
                                          description="scale its value", style=wide),
        "shift": widgets.BoundedFloatText(value=settings.shift, min=-3.0, max=3.0, step=0.5,
                                          description="shift it where the readout is blind", style=wide),
        "exclude": widgets.Checkbox(value=settings.exclude, description="exclude it (mask)", style=wide),
    }

    return build_explorer(controls, settings, compute=compute, describe=describe,
                          draw=figure.draw, alt_text=alt_text,
                          title="Interpretation explorer: weights against what changes the decision")
