"""Synthetic tasks, generated from a seed.

A task is any object with ``vocab_size`` and ``sample(batch, length, rng) -> (tokens, targets)``:
int arrays (batch, length), target -1 where a position is not scored.

- ``CopyBack(k)``: the target at position i is the token at i - k. Only order says which token
  that is, so a model that cannot see order cannot learn it; and the distance k is the same at
  every length, so the task asks whether a mechanism keeps working past the training length.
- ``Mode``: the target at every position is the most frequent token of the whole sequence
  (made unique). The multiset of tokens decides it, not their order: the content-only control.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lessonlib._checks import array_bytes, check_positive_int, check_rng, refuse_oversized


def _check_sizes(batch: int, length: int, rng: np.random.Generator) -> None:
    """Refuse a batch or length that is not a positive integer, or one whose arrays would not fit."""
    check_positive_int(batch, "batch")
    check_positive_int(length, "length")
    check_rng(rng)
    refuse_oversized(array_bytes((batch, length), np.int64, 3), f"a batch of {batch} sequences of length {length}",
                     "Draw fewer or shorter sequences.")


@dataclass(frozen=True)
class CopyBack:
    """Target at position i: the token k positions earlier (the first k positions are not scored)."""

    vocab_size: int = 16
    k: int = 1

    def __post_init__(self) -> None:
        check_positive_int(self.vocab_size, "vocab_size", minimum=2)
        check_positive_int(self.k, "k")

    @property
    def name(self) -> str:
        return "previous token" if self.k == 1 else f"copy the token {self.k} back"

    def sample(self, batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """tokens uniform over the vocabulary (B, L); targets[:, i] = tokens[:, i - k], -1 for i < k."""
        _check_sizes(batch, length, rng)
        tokens = rng.integers(0, self.vocab_size, size=(batch, length))  # (B, L)
        targets = np.full((batch, length), -1)  # (B, L)
        targets[:, self.k:] = tokens[:, : length - self.k]
        return tokens, targets

    def chance(self) -> float:
        """Accuracy of guessing uniformly: 1 / vocabulary."""
        return 1.0 / self.vocab_size


@dataclass(frozen=True)
class Mode:
    """Target at every position: the sequence's most frequent token, which is made unique."""

    vocab_size: int = 8

    def __post_init__(self) -> None:
        check_positive_int(self.vocab_size, "vocab_size", minimum=2)

    @property
    def name(self) -> str:
        return "most frequent token"

    def sample(self, batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """tokens (B, L) with a unique most frequent token; targets (B, L) all equal to it."""
        _check_sizes(batch, length, rng)
        tokens = rng.integers(0, self.vocab_size, size=(batch, length))  # (B, L)
        for row in tokens:
            counts = np.bincount(row, minlength=self.vocab_size)  # (V,)
            winner = int(np.argmax(counts))
            tied = np.flatnonzero(counts == counts[winner])
            if tied.size > 1:  # break the tie: one other copy of a tied token becomes the winner
                loser = int(tied[tied != winner][0])
                row[np.flatnonzero(row == loser)[0]] = winner
        modes = np.array([np.bincount(row, minlength=self.vocab_size).argmax() for row in tokens])  # (B,)
        return tokens, np.repeat(modes[:, None], length, axis=1)

    def chance(self) -> float:
        return 1.0 / self.vocab_size


TASKS: dict[str, CopyBack | Mode] = {
    "previous": CopyBack(vocab_size=16, k=1),
    "copy_back_3": CopyBack(vocab_size=16, k=3),
    "mode": Mode(vocab_size=8),
}


def check_task(task: object) -> None:
    """Refuse an object that does not follow the task protocol, naming what it lacks."""
    missing = [name for name in ("vocab_size", "sample") if not hasattr(task, name)]
    if missing:
        raise TypeError(f"{type(task).__name__} is not a task: it has no {' and no '.join(missing)}; a task needs "
                        "vocab_size and sample(batch, length, rng) -> (tokens, targets)")
    if not callable(task.sample):
        raise TypeError(f"{type(task).__name__}.sample is not callable")
