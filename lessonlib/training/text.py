"""The capstone's text: Tiny Shakespeare as character ids, its train/validation split, and baselines.

As in nanoGPT's character-level Shakespeare model: the vocabulary is every distinct character of
the text, a character's id is its rank in code-point order, and the split is by position (the
first 90% trains, the last 10% validates). Losses are in nats per character.

Baselines, fitted on the training text and measured on the validation text:

    unigram  p(c)        = count(c) / N                                (65,)
    bigram   p(c | a)    = (count(a c) + alpha) / (count(a) + alpha V)  (V, V), add-alpha smoothing
    loss                 = mean over validation characters of -log p

Counts and logs are float64: a mean over a hundred thousand terms in float32 would keep about
four significant digits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from lessonlib._checks import as_array

CORPUS_PATH = Path(__file__).resolve().parent / "data" / "tinyshakespeare.txt"
CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TRAIN_FRACTION = 0.9


class Vocabulary:
    """Characters <-> ids: id i is the i-th distinct character of the text in code-point order."""

    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars) or list(chars) != sorted(chars):
            raise ValueError("a vocabulary is a string of distinct characters in code-point order")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def of(cls, text: str) -> Vocabulary:
        """The vocabulary of every distinct character in ``text``."""
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """(len(text),) int64 ids; a character outside the vocabulary is refused, by name."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        try:
            return np.array([self._ids[c] for c in text], dtype=np.int64)
        except KeyError as err:
            raise ValueError(f"text: character {err.args[0]!r} is not in the vocabulary of {self.size} characters "
                             f"this model was trained on: {self.chars!r}") from None

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """The text of a sequence of ids (none gives "")."""
        ids = as_array(ids, "ids")
        if ids.size and ids.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.size):
            raise ValueError(f"id {int(ids.max()) if ids.max() >= self.size else int(ids.min())} is outside the "
                             f"vocabulary (0..{self.size - 1})")
        return "".join(self.chars[i] for i in ids.ravel().tolist())

    def __repr__(self) -> str:
        return f"Vocabulary({self.size} characters)"


@dataclass(frozen=True)
class TextData:
    """The text as ids, split by position: ``train`` the first 90%, ``validation`` the rest."""

    vocab: Vocabulary
    train: np.ndarray  # (N_train,) int64
    validation: np.ndarray  # (N_val,) int64


def corpus() -> str:
    """The bundled text, checked against its published sha256 (the data README gives its provenance)."""
    raw = CORPUS_PATH.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CORPUS_SHA256:
        raise ValueError(f"{CORPUS_PATH.name} has sha256 {digest}, not the published {CORPUS_SHA256}: the file was "
                         "changed or damaged; reinstall the package")
    return raw.decode("ascii")


@cache
def load() -> TextData:
    """Tiny Shakespeare as ids with the fixed split (cached: the same arrays every call; do not modify them)."""
    text = corpus()
    vocab = Vocabulary.of(text)
    ids = vocab.encode(text)
    cut = int(TRAIN_FRACTION * ids.size)
    train, validation = ids[:cut], ids[cut:]
    train.flags.writeable = False
    validation.flags.writeable = False
    return TextData(vocab, train, validation)


def unigram_loss(train: np.ndarray, validation: np.ndarray, vocab_size: int) -> float:
    """Validation loss (nats per character) of character frequencies counted on ``train``."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)  # (V,)
    if np.any(counts[validation] == 0):
        raise ValueError("a validation character never occurs in the training text: its unigram probability is 0")
    return float(-np.mean(np.log(counts[validation] / counts.sum())))


def bigram_loss(train: np.ndarray, validation: np.ndarray, vocab_size: int, *, alpha: float = 1.0) -> float:
    """Validation loss (nats per character) of p(next | this) counted on ``train`` with add-``alpha`` smoothing.

    Scored on each validation character after the first (the first has no predecessor in the text).
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be positive (a pair never seen in training would get probability 0), got {alpha}")
    counts = np.zeros((vocab_size, vocab_size))  # (V, V): row = this character, column = the next
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    probs = (counts + alpha) / (counts.sum(axis=1, keepdims=True) + alpha * vocab_size)  # (V, V), rows sum to 1
    return float(-np.mean(np.log(probs[validation[:-1], validation[1:]])))


def baselines() -> dict[str, float]:
    """{"unigram": ..., "bigram": ...}: the two baselines on the bundled text's split, nats per character."""
    data = load()
    return {"unigram": unigram_loss(data.train, data.validation, data.vocab.size),
            "bigram": bigram_loss(data.train, data.validation, data.vocab.size)}


@dataclass(frozen=True)
class TextWindows:
    """A task (``vocab_size``, ``sample``) of random windows of a text: the target is the next character.

    sample(batch, length, rng) -> tokens = ids[s : s + length], targets = ids[s + 1 : s + length + 1]
    for ``batch`` starts s drawn uniformly, so every position is scored.
    """

    ids: np.ndarray
    vocab_size: int

    def sample(self, batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        if length + 1 > self.ids.size:
            raise ValueError(f"a window of {length} characters and its next one do not fit in a text of "
                             f"{self.ids.size} characters")
        starts = rng.integers(0, self.ids.size - length, size=batch)  # (B,)
        index = starts[:, None] + np.arange(length + 1)[None, :]  # (B, L + 1)
        window = self.ids[index]  # (B, L + 1)
        return window[:, :-1], window[:, 1:]
