"""Explorer for notebook 06: trained models at their training length and beyond.

Pick a stored model (a position mechanism trained on the previous-token task at length 16) and
an evaluation length; see its accuracy, measured here on the stored checkpoint, and the attention
map of its previous-token head on one sequence. That head is chosen once per model, at the
training length, and kept at every evaluation length.

Also here, for the notebook's interpretation section: the exclusion effect of each key on a
trained model's prediction, set against that head's attention weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lessonlib._checks import check_choice, check_index, check_instance, check_positive_int
from lessonlib.explorers.interpretation import spearman
from lessonlib.plots import heatmap, new_figure
from lessonlib.training import TASKS, AttentionModel, accuracy, catalog

MODELS = {
    "none": "previous_none",
    "sinusoidal": "previous_sinusoidal",
    "learned": "previous_learned",
    "rope": "previous_rope",
    "relative": "previous_relative",
    "alibi": "previous_alibi",
    "alibi, causal": "previous_alibi_causal",
    "none, causal": "previous_none_causal",
    "none, causal, 2 layers": "previous_none_causal_2layers",
}
LENGTHS = catalog.EVAL_LENGTHS
EXAMPLE_SEED = 5
HEAD_SEQUENCES, HEAD_SEED = 64, 4  # the sequences at the training length on which a head is chosen


def example_tokens(length: int, seed: int = EXAMPLE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """One previous-token sequence (1, length) and its targets, the same for every model."""
    length = check_positive_int(length, "length")
    seed = check_positive_int(seed, "seed", minimum=0)
    return TASKS["previous"].sample(1, length, np.random.default_rng([3, seed]))


def weight_on_previous(model: AttentionModel, tokens: np.ndarray, layer: int = -1) -> np.ndarray:
    """(H,) each head's weight on key i - 1, averaged over the queries i >= 1 of every sequence in ``tokens`` (B, L)."""
    check_instance(model, AttentionModel, "model")
    layer = _check_layer(model, layer)
    weights = model.attention(tokens)[layer]  # (B, H, L, L)
    on_previous = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1)  # (B, H, L - 1): entries (i, i - 1)
    return on_previous.mean(axis=(0, 2))


def training_length_tokens() -> np.ndarray:
    """(HEAD_SEQUENCES, TRAIN_LENGTH) previous-token sequences at the length every stored model was trained on."""
    tokens, _ = TASKS["previous"].sample(HEAD_SEQUENCES, catalog.TRAIN_LENGTH, np.random.default_rng(HEAD_SEED))
    return tokens


def previous_token_head(model: AttentionModel, layer: int = -1) -> int:
    """The head of ``layer`` (default: the last) with the most weight on key i - 1 at the training length.

    The weight is averaged over the queries of HEAD_SEQUENCES sequences of the training length
    (:func:`training_length_tokens`). The head is chosen there, once, and kept when the model is
    read at other lengths, where another head may happen to look more like a previous-token head.
    """
    check_instance(model, AttentionModel, "model")
    return int(weight_on_previous(model, training_length_tokens(), _check_layer(model, layer)).argmax())


def _check_layer(model: AttentionModel, layer: object) -> int:
    """``layer`` as an index into the model's layers; a negative one counts from the last, as in a list."""
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"layer must be an integer, got {type(layer).__name__}")
    if not -model.n_layers <= layer < model.n_layers:
        raise ValueError(f"layer must lie in {-model.n_layers}..{model.n_layers - 1} (negative counts from the last), "
                         f"got {layer}")
    return int(layer) % model.n_layers


def exclusion_effects(model: AttentionModel, tokens: np.ndarray, *, head: int, query: int,
                      layer: int = 0) -> np.ndarray:
    """(L,) size of the change in the query's logits, |logits(without key j) - logits|, for each key j.

    Key j is excluded for this query in this head and layer only (before the softmax, so the
    head's other weights are renormalised); everything else stays as it was. A key the mask
    already hides (the future, under a causal mask) has effect 0.
    """
    check_instance(model, AttentionModel, "model")
    tokens = model.check_tokens(tokens)
    if tokens.shape[0] != 1:
        raise ValueError(f"tokens must be one sequence, shape (1, L); got {tokens.shape}")
    length = tokens.shape[1]
    check_index(query, "query", length)
    check_index(head, "head", model.n_heads)
    layer = _check_layer(model, layer)
    base = model.logits(tokens)[0, query]  # (V,)
    effects = np.zeros(length)
    for key in range(length):
        exclude = np.zeros((model.n_layers, 1, model.n_heads, length, length), dtype=bool)
        exclude[layer, 0, head, query, key] = True
        effects[key] = np.linalg.norm(model.logits_excluding(tokens, exclude)[0, query] - base)
    return effects


def readout_distance(model: AttentionModel, tokens: np.ndarray, *, head: int, query: int) -> np.ndarray:
    """(L,) |(o - v_j) W_o^h U|: how far each key's value lies from the head's output, as the logits see it.

    For one layer, excluding key j moves the logits by w_j / (1 - w_j) times this (notebook 05's
    formula, carried through the output projection W_o and the unembedding U).
    """
    if model.n_layers != 1:
        raise ValueError(f"the closed form holds for one layer; the model has {model.n_layers}")
    p, d_h = model.params, model.d_head
    x = p["embed"][tokens[0]]  # (L, d)
    if model.position == "sinusoidal":
        from lessonlib.position import sinusoidal_positions
        x = x + sinusoidal_positions(x.shape[0], model.d_model)
    elif model.position == "learned":
        x = x + p["pos_table"][: x.shape[0]]
    cols = slice(head * d_h, (head + 1) * d_h)
    v = x @ p["layers.0.wv"][:, cols]  # (L, d_h) this head's values
    w = model.attention(tokens)[0][0, head, query]  # (L,)
    o = w @ v  # (d_h,)
    readout = p["layers.0.wo"][cols] @ p["unembed"]  # (d_h, V)
    return np.linalg.norm((o - v) @ readout, axis=-1)


@dataclass(frozen=True)
class Interpretation:
    """Weights of one head at one query beside the exclusion effect of each key."""

    tokens: np.ndarray  # (L,)
    head: int
    query: int
    weights: np.ndarray  # (L,)
    effects: np.ndarray  # (L,)
    distance: np.ndarray  # (L,) readout distance of each value from the output
    rho: float  # Spearman(weights, effects)


def interpret(model: AttentionModel, tokens: np.ndarray, query: int) -> Interpretation:
    """The previous-token head's weights at ``query`` against the exclusion effects (one-layer model).

    The head is the one chosen at the training length (:func:`previous_token_head`), whatever ``tokens`` are.
    """
    check_instance(model, AttentionModel, "model")
    if model.n_layers != 1:
        raise ValueError(f"this comparison reads one layer; the model has {model.n_layers}")
    tokens = model.check_tokens(tokens)
    if tokens.shape[0] != 1:
        raise ValueError(f"tokens must be one sequence, shape (1, L); got {tokens.shape}")
    check_index(query, "query", tokens.shape[1])
    head = previous_token_head(model)
    weights = model.attention(tokens)[0][0, head, query]  # (L,)
    effects = exclusion_effects(model, tokens, head=head, query=query)
    return Interpretation(tokens=tokens[0], head=head, query=query, weights=weights, effects=effects,
                          distance=readout_distance(model, tokens, head=head, query=query),
                          rho=spearman(weights, effects))


# --- The explorer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    model: str = "rope"  # a key of MODELS
    length: int = 16  # evaluation length: 1x, 2x or 4x the training length

    def __post_init__(self) -> None:
        check_choice(self.model, "model", tuple(MODELS))
        if check_positive_int(self.length, "length") not in LENGTHS:
            raise ValueError(f"length must be one of {LENGTHS}, got {self.length!r}")


@dataclass(frozen=True)
class Result:
    settings: Settings
    accuracy: float | None  # measured on 512 sequences; None when the model refuses the length
    refusal: str  # the model's error message when it refuses, else ""
    head: int  # in the last layer, chosen at the training length
    weights: np.ndarray | None  # (L, L) that head's weights on the example sequence
    allowed: np.ndarray | None  # (L, L) True where a key may be attended to


@cache
def _model(name: str) -> AttentionModel:
    return catalog.load(name)


@cache
def _head(name: str) -> int:
    model = _model(name)
    return previous_token_head(model, model.n_layers - 1)


@cache
def _accuracy(name: str, length: int) -> float:
    """Measured on the stored checkpoint, as notebook 06's tables are (the first call takes a fraction of a second)."""
    return accuracy(_model(name), TASKS[catalog.spec(name).task], length=length, n=catalog.EVAL_SEQUENCES)


def compute(settings: Settings) -> Result:
    """The accuracy measured at this length, and the last layer's previous-token head on the example sequence.

    The head is chosen at the training length and kept at every length, so a longer input shows
    what happens to the head that does the task, not which head looks most like it there.
    """
    check_instance(settings, Settings, "settings")
    name = MODELS[settings.model]
    model = _model(name)
    tokens, _ = example_tokens(settings.length)
    try:
        model.check_tokens(tokens)
    except IndexError as refusal:
        return Result(settings, None, str(refusal), 0, None, None)
    layer = model.n_layers - 1  # the last layer, where the answer is read from
    head = _head(name)
    weights = model.attention(tokens)[layer][0, head]  # (L, L)
    allowed = np.tril(np.ones(weights.shape, bool)) if model.causal else None
    return Result(settings, _accuracy(name, settings.length), "", head, weights, allowed)


def describe(result: Result) -> str:
    s = check_instance(result, Result, "result").settings
    times = s.length // catalog.TRAIN_LENGTH
    if result.accuracy is None:
        return f"{s.model} at length {s.length} ({times}x training): refused. {result.refusal}"
    on_previous = float(np.diagonal(result.weights, offset=-1).mean())
    return (f"{s.model} at length {s.length} ({times}x training): accuracy {result.accuracy:.3f} "
            f"(uniform guessing {TASKS['previous'].chance():.3f}); head {result.head}, chosen at length "
            f"{catalog.TRAIN_LENGTH}, puts on average {on_previous:.2f} of each query's weight on the key just "
            "before it")


def alt_text(result: Result) -> str:
    s = result.settings
    if result.weights is None:
        return f"no map: the {s.model} model has no position vectors for length {s.length}"
    top = result.weights.argmax(axis=-1)  # (L,)
    share = float(np.mean(top[1:] == np.arange(result.weights.shape[0] - 1)))
    return (f"attention weights of head {result.head}, queries down and keys across, on one sequence of "
            f"length {s.length}; in {share:.0%} of the rows the largest weight sits just left of the diagonal "
            "(the previous token)")


def draw(result: Result) -> Any:
    fig, (ax,) = new_figure(4.2, 3.6)
    fig.subplots_adjust(left=0.14, bottom=0.14)
    if result.weights is None:
        ax.axis("off")
        ax.text(0.5, 0.5, "refused: no learned vector\nfor these positions", ha="center", va="center")
        return fig
    heatmap(ax, result.weights, allowed=result.allowed, annotate=False, vmin=0.0, vmax=1.0,
            title=f"{result.settings.model}, head {result.head}, length {result.settings.length}")
    n = result.weights.shape[0]
    ticks = list(range(0, n, max(1, n // 8)))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    return fig


def show(settings: Settings = Settings()) -> Any:
    """The widget: choose a stored model and an evaluation length; wired to compute() and draw()."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    wide = {"description_width": "initial"}
    controls = {
        "model": widgets.Dropdown(options=list(MODELS), value=settings.model, description="trained model",
                                  style=wide),
        "length": widgets.Dropdown(options=list(LENGTHS), value=settings.length, description="evaluation length",
                                   style=wide),
    }
    return build_explorer(controls, settings, compute=compute, describe=describe, draw=draw,
                          alt_text=alt_text, title="Training explorer: a trained model past its training length")
