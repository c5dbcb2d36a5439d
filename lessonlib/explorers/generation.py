"""Explorer for notebook 07: text written by the stored character models.

Pick a position mechanism, a temperature, a prompt and a length; read the text the stored model
writes after the prompt (with the key/value cache, its context bounded by the training length)
and see the distribution of the first character it chooses from. Temperature divides the logits
before the softmax: near 0 the model always takes its most likely character, at 1 it samples
from what it learned, above 1 the choice flattens towards uniform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonlib._checks import check_instance, check_positive_int
from lessonlib._machine import one_blas_thread
from lessonlib.plots import bars, new_figure
from lessonlib.training import POSITIONS
from lessonlib.training import lm_catalog as catalog
from lessonlib.training.model import check_position
from lessonlib.training.sampling import check_temperature
from lessonlib.training.text import load

TOP = 10  # characters shown in the figure
TEMPERATURES = (0.0, 0.5, 0.8, 1.0, 1.5)
LENGTHS = (50, 100, 200, 400)  # characters to write


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    mechanism: str = "rope"  # one of POSITIONS
    temperature: float = 0.8
    prompt: str = "ROMEO:\n"
    length: int = 200  # characters to write
    seed: int = 0

    def __post_init__(self) -> None:
        check_position(self.mechanism)
        check_temperature(self.temperature)
        if not isinstance(self.prompt, str):
            raise TypeError(f"prompt must be a string, got {type(self.prompt).__name__}")
        check_positive_int(self.length, "length")
        check_positive_int(self.seed, "seed", minimum=0)


@dataclass(frozen=True)
class Result:
    settings: Settings
    text: str  # what the model wrote after the prompt ("" when the prompt is refused)
    refusal: str  # why the prompt was refused, else ""
    top_chars: tuple[str, ...]  # the TOP most likely first characters, most likely first
    top_probs: np.ndarray  # (TOP,) their probabilities at this temperature


def shown(char: str) -> str:
    """A character as a label a reader can see: newline and space named."""
    return {"\n": "\\n", " ": "space"}.get(char, char)


def compute(settings: Settings) -> Result:
    """The model's continuation of the prompt and its first choice's distribution at this temperature."""
    check_instance(settings, Settings, "settings")
    vocab = load().vocab
    empty = Result(settings, "", "", (), np.zeros(0))
    if not settings.prompt:
        return Result(**{**empty.__dict__, "refusal": "the prompt is empty: type at least one character"})
    try:
        ids = vocab.encode(settings.prompt[-catalog.TRAIN_LENGTH:])
    except ValueError as err:
        return Result(**{**empty.__dict__, "refusal": str(err)})
    model = catalog.stored(settings.mechanism)
    with one_blas_thread():  # a prompt of at most 64 characters: BLAS threads would only wait
        logits = model.logits(ids[None])[0, -1].astype(np.float64)  # (V,)
    if settings.temperature == 0:
        probs = np.eye(vocab.size)[np.argmax(logits)]  # (V,)
    else:
        z = logits / settings.temperature
        probs = np.exp(z - z.max())
        probs /= probs.sum()  # (V,)
    order = np.argsort(-probs, kind="stable")[:TOP]  # (TOP,)
    text = catalog.generate_text(settings.mechanism, settings.prompt[-catalog.TRAIN_LENGTH:], settings.length,
                                 temperature=settings.temperature, seed=settings.seed)
    return Result(settings, text, "", tuple(vocab.chars[i] for i in order), probs[order])


def describe(result: Result) -> str:
    s = check_instance(result, Result, "result").settings
    if result.refusal:
        return f"refused: {result.refusal}"
    return (f"{s.mechanism} model, temperature {s.temperature:.1f}, seed {s.seed}:\n"
            f"{s.prompt}{result.text}")


def alt_text(result: Result) -> str:
    if result.refusal:
        return "no chart: the prompt was refused"
    return (f"probabilities of the {TOP} most likely first characters after the prompt; the most likely, "
            f"{shown(result.top_chars[0])!r}, has {result.top_probs[0]:.2f}")


def draw(result: Result) -> Any:
    fig, (ax,) = new_figure(5.0, 2.4)
    fig.subplots_adjust(bottom=0.2)
    if result.refusal:
        ax.axis("off")
        ax.text(0.5, 0.5, "refused: see the readout", ha="center", va="center")
        return fig
    bars(ax, result.top_probs, labels=[shown(c) for c in result.top_chars], ylim=(0.0, 1.05),
         title=f"first character after the prompt, temperature {result.settings.temperature:.1f}",
         ylabel="probability")
    return fig


def show(settings: Settings = Settings()) -> Any:
    """The widget: mechanism, temperature, prompt, length and seed; wired to compute() and draw()."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    wide = {"description_width": "initial"}
    controls = {
        "mechanism": widgets.Dropdown(options=list(POSITIONS), value=settings.mechanism,
                                      description="position mechanism", style=wide),
        "temperature": widgets.Dropdown(options=list(TEMPERATURES), value=settings.temperature,
                                        description="temperature", style=wide),
        "prompt": widgets.Text(value=settings.prompt, description="prompt", continuous_update=False, style=wide),
        "length": widgets.Dropdown(options=list(LENGTHS), value=settings.length, description="characters",
                                   style=wide),
        "seed": widgets.BoundedIntText(value=settings.seed, min=0, max=99, description="seed", style=wide),
    }
    return build_explorer(controls, settings, compute=compute, describe=describe, draw=draw,
                          alt_text=alt_text, title="Generation explorer: what each stored model writes")
