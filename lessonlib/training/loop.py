"""Adam, the training loop with its progress bar, and accuracy.

Adam (Kingma and Ba), per parameter array, step t = 1, 2, ...:

    m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
    p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from lessonlib._checks import check_callable, check_flag, check_positive_int, check_real
from lessonlib._machine import one_blas_thread
from lessonlib.training.model import AttentionModel
from lessonlib.training.tasks import check_task


class TrainingDiverged(FloatingPointError):
    """The loss became NaN or infinite."""


class Adam:
    """Adam's moment estimates for a dict of parameter arrays, updated in place."""

    def __init__(self, params: dict[str, np.ndarray], *, lr: float = 3e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        lr = check_real(lr, "lr", positive=True)
        if not isinstance(betas, tuple) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (b1, b2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0 <= check_real(beta, f"betas[{i}]") < 1:
                raise ValueError(f"betas[{i}] must lie in [0, 1), got {beta}")
        eps = check_real(eps, "eps", positive=True)
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0

    def step(self, grads: dict[str, np.ndarray]) -> None:
        """Move every parameter one Adam step against its gradient."""
        self.t += 1
        b1, b2 = self.betas
        correct1, correct2 = 1 - b1**self.t, 1 - b2**self.t
        for name, g in grads.items():
            m, v = self.m[name], self.v[name]
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            self.params[name] -= self.lr * (m / correct1) / (np.sqrt(v / correct2) + self.eps)


def _samples(task: object, batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One batch from ``task``, checked against the protocol: int arrays (batch, length) of one shape."""
    tokens, targets = task.sample(batch, length, rng)
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.shape != (batch, length):
        raise ValueError(f"{type(task).__name__}.sample({batch}, {length}, rng) returned tokens of shape "
                         f"{tokens.shape}, expected ({batch}, {length})")
    if targets.shape != tokens.shape:
        raise ValueError(f"{type(task).__name__}.sample returned targets of shape {targets.shape} but tokens of "
                         f"shape {tokens.shape}; one target per token (-1 where not scored)")
    return tokens, targets


# What train() and predictions() use of a model.
_TRAINED = ("vocab_size", "params", "loss_and_grads", "position", "max_length", "check_tokens")
_EVALUATED = ("vocab_size", "logits")


def _check_vocab(model: AttentionModel, task: object, uses: tuple[str, ...]) -> None:
    """Refuse a model that lacks what ``uses`` names (e.g. not a model at all), or a task it cannot read."""
    missing = [name for name in uses if not hasattr(model, name)]
    if missing:
        raise TypeError(f"model must be a model such as AttentionModel or CharModel; {type(model).__name__} has no "
                        f"{', '.join(missing)}")
    check_task(task)
    if task.vocab_size > model.vocab_size:
        raise ValueError(f"the task uses {task.vocab_size} token ids but the model's vocabulary has only "
                         f"{model.vocab_size}")


def train(model: AttentionModel, task: object, *, steps: int, batch_size: int = 64, length: int = 16,
          lr: float = 3e-3, seed: int = 0, progress: bool = True,
          callback: Callable[[int, float], bool] | None = None) -> np.ndarray:
    """Train ``model`` in place with Adam on fresh batches from ``task``; returns the loss per step (steps,).

    The batches come from ``seed`` alone, so the same model, task and seed give the same losses.
    ``progress=True`` shows a tqdm bar (a widget in Jupyter, text elsewhere). A NaN or infinite
    loss stops the run with :class:`TrainingDiverged`, naming the step and the learning rate.
    ``callback(step, loss)``, if given, runs after each step; returning True ends training there
    (the history then holds the steps taken).
    """
    _check_vocab(model, task, _TRAINED)
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    length = check_positive_int(length, "length")
    lr = check_real(lr, "lr", positive=True)
    seed = check_positive_int(seed, "seed", minimum=0)
    progress = check_flag(progress, "progress")
    if callback is not None:
        check_callable(callback, "callback")
    if model.position == "learned" and length > model.max_length:
        model.check_tokens(np.zeros((1, length), dtype=int))  # raises, naming the table's size
    rng = np.random.default_rng([1, seed])  # a stream of its own: accuracy() draws from [2, seed]
    optimiser = Adam(model.params, lr=lr)
    losses = np.empty(steps)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"training ({model.position})", unit="step")
    try:
        with one_blas_thread():
            for step in range(steps):
                tokens, targets = _samples(task, batch_size, length, rng)
                loss, grads = model.loss_and_grads(tokens, targets)
                if not math.isfinite(loss):
                    raise TrainingDiverged(
                        f"the loss became {loss} at step {step} of {steps} (learning rate {lr:g}); the steps are "
                        f"too large for this model: try a smaller learning rate, e.g. lr={lr / 10:g}")
                optimiser.step(grads)
                losses[step] = loss
                if bar is not None:
                    bar.update(1)
                    if step % 25 == 0 or step == steps - 1:
                        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
                if callback is not None and callback(step, loss):
                    losses = losses[: step + 1]
                    break
    finally:
        if bar is not None:
            bar.close()
    return losses


def predictions(model: AttentionModel, task: object, *, length: int, n: int = 512, seed: int = 0,
                batch: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(correct, scored), both boolean (n, length): which scored positions the model predicts right."""
    _check_vocab(model, task, _EVALUATED)
    length = check_positive_int(length, "length")
    n = check_positive_int(n, "n")
    seed = check_positive_int(seed, "seed", minimum=0)
    batch = check_positive_int(batch, "batch")
    rng = np.random.default_rng([2, seed])
    correct, scored = [], []
    with one_blas_thread():
        for start in range(0, n, batch):
            tokens, targets = _samples(task, min(batch, n - start), length, rng)
            guess = model.logits(tokens).argmax(axis=-1)  # (b, L)
            correct.append((guess == targets) & (targets >= 0))
            scored.append(targets >= 0)
    return np.concatenate(correct), np.concatenate(scored)


def accuracy(model: AttentionModel, task: object, *, length: int, n: int = 512, seed: int = 0) -> float:
    """Fraction of scored positions predicted right, over ``n`` fresh sequences of ``length`` from ``seed``."""
    correct, scored = predictions(model, task, length=length, n=n, seed=seed)
    return float(correct.sum() / scored.sum())
