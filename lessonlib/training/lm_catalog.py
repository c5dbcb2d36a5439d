"""The capstone's stored language models: one per position mechanism, how they are made, what they score.

Every model is a :class:`~lessonlib.training.lm.CharModel` with d_model 64, 4 heads, 2 blocks and
an MLP of width 256 (108,000 to 112,000 parameters), trained on Tiny Shakespeare's first 90% at
context length 64: 1,500 steps of Adam at 3e-3 on batches of 32 random windows, seed 0
(``lessonlib.training.train``). "learned" has a table of exactly 64 rows. The checkpoints store
the weights in float16 (the models compute in float32), which keeps each file near 200 KB.

Validation loss is measured on a fixed stretch of the validation text (its first ``EVAL_CHARS``
characters), cut into non-overlapping windows of the evaluated length, every position scored:
the same characters at every length, as Press et al. (2022) evaluate. At 2, 4 and 8 times the
training length a window holds positions (and offsets) that the model never saw in training.

``python -m lessonlib.training.lm_catalog`` (``make train-lm``) trains the models again, writes
``checkpoints/lm_<position>.npz`` and records what it measured in ``checkpoints/lm_losses.json``
(the length table, and :func:`context_use` at 8x), which a test compares with a fresh evaluation
of each stored checkpoint; ``--measure-only`` re-measures the stored checkpoints without training.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from lessonlib._checks import as_int_array, check_callable, check_flag, check_positive_int
from lessonlib._machine import one_blas_thread
from lessonlib.training.lm import CharModel, Plugs
from lessonlib.training.loop import train
from lessonlib.training.model import POSITIONS, check_position
from lessonlib.training.sampling import check_temperature, generate
from lessonlib.training.text import TextWindows, baselines, load

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
LOSSES = CHECKPOINT_DIR / "lm_losses.json"
TRAIN_LENGTH = 64
EVAL_FACTORS = (1, 2, 4, 8)
EVAL_CHARS = 32768  # a multiple of 8 * TRAIN_LENGTH: every length tiles the same characters
EVAL_BATCH_TOKENS = 4096  # positions per forward pass while evaluating
STEPS, BATCH_SIZE, LR, SEED = 1500, 32, 3e-3, 0
ARCHITECTURE = {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_mlp": 256}
STORED_DTYPE = "float16"


def path(position: str) -> Path:
    return CHECKPOINT_DIR / f"lm_{position}.npz"


def build(position: str) -> CharModel:
    """The untrained model of one mechanism, as ``make train`` starts it."""
    position = check_position(position)
    max_length = TRAIN_LENGTH if position == "learned" else TRAIN_LENGTH * max(EVAL_FACTORS)
    return CharModel(load().vocab.size, position=position, max_length=max_length, seed=SEED, **ARCHITECTURE)


@cache
def _stored(position: str) -> CharModel:
    file = path(position)
    if not file.exists():
        raise FileNotFoundError(f"{file.name} is missing; run `make train` to create the language-model checkpoints")
    return CharModel.load(file, **build(position).config)


def stored(position: str) -> CharModel:
    """The stored, trained model of ``position`` (loaded once; treat it as read-only)."""
    return _stored(check_position(position))


def windows(ids: np.ndarray, starts: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, targets), each (n_windows, length): ids[s : s + length] and the character after each.

    tokens[w, i] = ids[starts[w] + i], targets[w, i] = ids[starts[w] + i + 1]: every position is
    scored on the character that follows it, from the characters of its own window alone.
    """
    ids, starts = as_int_array(ids, "ids"), as_int_array(starts, "starts")
    length = check_positive_int(length, "length")
    if ids.ndim != 1 or starts.ndim != 1:
        raise ValueError(f"ids and starts must be 1-D, got shapes {ids.shape} and {starts.shape}")
    first, last = int(starts.min()), int(starts.max()) + length  # the last window's next character
    if first < 0 or last >= ids.size:
        raise ValueError(f"starts must leave room for windows of length={length} and the character after "
                         f"each: they need characters {first} .. {last}, but ids has 0 .. {ids.size - 1}")
    index = starts[:, None] + np.arange(length)[None, :]  # (n_windows, length)
    return ids[index], ids[index + 1]


def window_losses(model: CharModel, starts: np.ndarray, length: int, *, plugs: Plugs | None = None,
                  ids: np.ndarray | None = None) -> np.ndarray:
    """(n_windows, length) loss -ln p(next character), nats, of every position of validation windows.

    Window w holds the ``length`` validation characters from ``starts[w]`` on (``ids``: another
    text of ids). Logits come in float32, the log-softmax is taken in float64.
    """
    ids = load().validation if ids is None else ids
    tokens, targets = windows(ids, starts, length)
    per_batch = max(1, EVAL_BATCH_TOKENS // length)
    out = np.empty(tokens.shape)  # (n_windows, length), float64
    with one_blas_thread():
        for i in range(0, tokens.shape[0], per_batch):
            rows = slice(i, i + per_batch)
            logits = model.logits(tokens[rows], plugs=plugs).astype(np.float64)  # (b, length, V)
            logits -= logits.max(axis=-1, keepdims=True)
            log_z = np.log(np.exp(logits).sum(axis=-1))  # (b, length)
            out[rows] = log_z - np.take_along_axis(logits, targets[rows][..., None], axis=-1)[..., 0]
    return out


def position_losses(model: CharModel, length: int, *, n_chars: int = EVAL_CHARS,
                    plugs: Plugs | None = None) -> np.ndarray | None:
    """(length,) mean loss at each position of the first ``n_chars`` validation characters cut into windows.

    The windows do not overlap: window w is characters w * length .. (w + 1) * length - 1. None when
    ``length`` is beyond a learned position table (such a model has no vector for those positions).
    """
    if not isinstance(model, CharModel):
        raise TypeError(f"model must be a CharModel (catalog.stored(position), for one), got {type(model).__name__}")
    length = check_positive_int(length, "length")
    n_chars = check_positive_int(n_chars, "n_chars")
    if plugs is not None and not isinstance(plugs, Plugs):
        raise TypeError(f"plugs must be Plugs(...) or None, got {type(plugs).__name__}")
    if n_chars % length:
        raise ValueError(f"n_chars={n_chars} characters do not cut into whole windows of length={length}")
    if n_chars >= load().validation.size:
        raise ValueError(f"n_chars={n_chars} is more than the {load().validation.size - 1} validation characters "
                         "that have a next one to predict")
    if model.position == "learned" and length > model.max_length:
        return None
    return window_losses(model, np.arange(0, n_chars, length), length, plugs=plugs).mean(axis=0)


def validation_loss(model: CharModel, length: int, *, n_chars: int = EVAL_CHARS,
                    plugs: Plugs | None = None) -> float | None:
    """Mean loss (nats per character) over the first ``n_chars`` validation characters in windows of ``length``.

    None when ``length`` is beyond a learned position table: such a model has no vector for those
    positions, so there is nothing to measure. ``plugs`` lets a learner's own attention, mask or
    position function drive the forward pass (:class:`~lessonlib.training.lm.Plugs`).
    """
    losses = position_losses(model, length, n_chars=n_chars, plugs=plugs)
    return None if losses is None else float(losses.mean())


def length_table(models: dict[str, CharModel] | None = None, factors: tuple[int, ...] = EVAL_FACTORS,
                 ) -> dict[str, dict[int, float | None]]:
    """{mechanism: {length: validation loss, or None beyond a learned table}} at ``factors`` x the training length."""
    if models is not None and (not isinstance(models, dict)
                               or not all(isinstance(m, CharModel) for m in models.values())):
        raise TypeError(f"models must be a dict of name -> CharModel, or None for the stored ones; got {models!r:.80}")
    if not isinstance(factors, tuple) or not factors:
        raise TypeError(f"factors must be a non-empty tuple of whole multiples of the training length, got {factors!r}")
    for factor in factors:
        check_positive_int(factor, "each of factors")
    models = models if models is not None else {p: stored(p) for p in POSITIONS}
    return {name: {TRAIN_LENGTH * f: validation_loss(m, TRAIN_LENGTH * f) for f in factors}
            for name, m in models.items()}


def context_use(model: CharModel, length: int = TRAIN_LENGTH * max(EVAL_FACTORS), near: int = 2 * TRAIN_LENGTH,
                *, n_chars: int = EVAL_CHARS) -> dict[str, float]:
    """Does a model use context beyond ``near`` characters? The same characters predicted from two contexts.

    The last TRAIN_LENGTH positions of each ``length``-character window (the windows of
    :func:`position_losses`) are scored twice: in their own window, with ``length`` - TRAIN_LENGTH
    or more characters before them ("long"), and in a window of ``near`` characters that ends
    where theirs ends, with ``near`` - TRAIN_LENGTH or more ("near"). A model that uses the longer
    context scores lower in "long". Also the mean loss of positions 0 .. TRAIN_LENGTH - 1 ("first").
    """
    if not isinstance(model, CharModel):
        raise TypeError(f"model must be a CharModel (catalog.stored(position), for one), got {type(model).__name__}")
    length, near = check_positive_int(length, "length"), check_positive_int(near, "near")
    n_chars = check_positive_int(n_chars, "n_chars")
    if not TRAIN_LENGTH <= near < length:
        raise ValueError(f"need {TRAIN_LENGTH} (the training length) <= near < length, got near={near}, "
                         f"length={length}")
    if n_chars % length:
        raise ValueError(f"n_chars={n_chars} characters do not cut into whole windows of length={length}")
    starts = np.arange(0, n_chars, length)  # (n_windows,)
    whole = window_losses(model, starts, length)  # (n_windows, length)
    short = window_losses(model, starts + length - near, near)  # (n_windows, near): the same last characters
    return {"first": float(whole[:, :TRAIN_LENGTH].mean()), "long": float(whole[:, -TRAIN_LENGTH:].mean()),
            "near": float(short[:, -TRAIN_LENGTH:].mean())}


class _MaskedTraining:
    """A model whose training steps use another causal mask: what :func:`lessonlib.training.train` sees."""

    def __init__(self, model: CharModel, causal_mask: Callable) -> None:
        self.model, self.causal_mask = model, causal_mask

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)

    def loss_and_grads(self, tokens: np.ndarray, targets: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        return self.model.loss_and_grads(tokens, targets, causal_mask=self.causal_mask)


def train_briefly(position: str, steps: int, *, causal_mask: Callable | None = None, batch_size: int = BATCH_SIZE,
                  progress: bool = True) -> tuple[CharModel, np.ndarray]:
    """(model, training loss per step): a fresh model of ``position`` trained as the stored ones, for ``steps``.

    ``causal_mask(length) -> (L, L)`` boolean replaces the engine's causal mask in every training
    step (None: the engine's). Deterministic: the same arguments give the same losses on one machine.
    """
    check_positive_int(steps, "steps")
    check_positive_int(batch_size, "batch_size")
    check_flag(progress, "progress")
    if causal_mask is not None:
        check_callable(causal_mask, "causal_mask")
    model = build(position)
    data = load()
    trainee = model if causal_mask is None else _MaskedTraining(model, causal_mask)
    losses = train(trainee, TextWindows(data.train, data.vocab.size), steps=steps, batch_size=batch_size,
                   length=TRAIN_LENGTH, lr=LR, seed=SEED, progress=progress)
    return model, losses


def generate_text(position: str, prompt: str, n_chars: int = 200, *, temperature: float = 0.8, seed: int = 0,
                  use_cache: bool = True) -> str:
    """``n_chars`` characters that the stored model of ``position`` writes after ``prompt``.

    The context is bounded by the training length (see :func:`lessonlib.training.sampling.generate`).
    """
    position = check_position(position)
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string of characters, got {type(prompt).__name__}")
    check_positive_int(n_chars, "n_chars", minimum=0)
    check_temperature(temperature)
    check_positive_int(seed, "seed", minimum=0)
    check_flag(use_cache, "use_cache")
    vocab = load().vocab
    with one_blas_thread():  # one row per character: BLAS threads would only wait for each other
        ids = generate(stored(position), vocab.encode(prompt), n_chars, temperature=temperature, seed=seed,
                       window=TRAIN_LENGTH, use_cache=use_cache)
    return vocab.decode(ids)


def recorded() -> dict:
    """What ``make train`` measured and wrote beside the checkpoints (for checking them, not for teaching)."""
    return json.loads(LOSSES.read_text())


def measure(position: str) -> dict:
    """What the stored model of ``position`` scores: its length table and its use of long context."""
    model = stored(position)
    scores = length_table({position: model})[position]
    record = {"validation_loss": {str(k): None if v is None else round(v, 4) for k, v in scores.items()}}
    if position != "learned":  # a learned table stops at the training length: no long context to use
        record["context_use"] = {k: round(v, 4) for k, v in context_use(model).items()}
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the capstone's language models and record their losses.")
    parser.add_argument("positions", nargs="*", help=f"mechanisms to retrain (default: all of {', '.join(POSITIONS)})")
    parser.add_argument("--measure-only", action="store_true",
                        help="re-measure the stored checkpoints and rewrite what is recorded, without training")
    args = parser.parse_args(argv)
    chosen = args.positions or list(POSITIONS)
    CHECKPOINT_DIR.mkdir(exist_ok=True)
    table = recorded() if LOSSES.exists() else {"models": {}}
    data = load()
    table["baselines"] = {k: round(v, 4) for k, v in baselines().items()}
    table["training"] = {"length": TRAIN_LENGTH, "steps": STEPS, "batch_size": BATCH_SIZE, "lr": LR, "seed": SEED,
                         **ARCHITECTURE, "stored_dtype": STORED_DTYPE}
    for position in chosen:
        entry = table["models"].setdefault(position, {})
        if not args.measure_only:
            model = build(position)
            start = time.perf_counter()
            losses = train(model, TextWindows(data.train, data.vocab.size), steps=STEPS, batch_size=BATCH_SIZE,
                           length=TRAIN_LENGTH, lr=LR, seed=SEED, progress=False)
            seconds = time.perf_counter() - start
            model.save(path(position), dtype=STORED_DTYPE)
            _stored.cache_clear()
            entry.update({"train_seconds": round(seconds, 1),
                          "final_train_loss": round(float(np.mean(losses[-50:])), 4),
                          "kilobytes": round(path(position).stat().st_size / 1024, 1)})
        entry.update(measure(position))
        shown = ", ".join(f"{k}: {'beyond the table' if v is None else f'{v:.3f}'}"
                          for k, v in entry["validation_loss"].items())
        print(f"{position:10s} {entry.get('train_seconds', 0):6.1f} s  validation loss by length {shown}", flush=True)
    table["models"] = {k: table["models"][k] for k in sorted(table["models"])}
    LOSSES.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
