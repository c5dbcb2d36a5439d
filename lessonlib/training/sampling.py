"""Generating text from a character model, one character at a time, with or without a key/value cache.

    p(next | context) = softmax(logits[-1] / temperature)      (V,); temperature 0 takes the argmax

With ``use_cache`` each new character costs one row of attention against the cached keys and
values (work that grows linearly with the text); without it the whole context is recomputed
for every character (work that grows with the square of the text, in attention). Both see the
same context and so draw the same characters from the same seed.

``window`` bounds the context: when the text outgrows it, the model restarts from the last
``window // 2`` characters (one prefill), so it never reads positions far past those it was
trained on. ``window=None`` lets the context grow with the text.
"""

from __future__ import annotations

import numpy as np

from lessonlib._checks import as_float_array, as_int_array, check_flag, check_positive_int, check_real, check_rng
from lessonlib.training.lm import CharModel, KVCache


def sample_next(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One id drawn from softmax(logits / temperature) (V,), in float64; temperature 0 = the most likely id."""
    temperature = check_temperature(temperature)
    rng = check_rng(rng)
    logits = as_float_array(logits, "logits").astype(np.float64, copy=False)  # (V,)
    if logits.ndim != 1:
        raise ValueError(f"logits must be 1-D, one score per id (V,), got shape {logits.shape}")
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits / temperature
    p = np.exp(z - z.max())  # (V,)
    cdf = np.cumsum(p)  # (V,)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), logits.size - 1))


def check_temperature(temperature: object) -> float:
    """A finite temperature >= 0; NaN would turn every probability into NaN and always give one id."""
    temperature = check_real(temperature, "temperature")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (always the most likely character) or positive, got {temperature}")
    return temperature


def generate(model: CharModel, prompt: np.ndarray | list[int], n_new: int, *, temperature: float = 1.0,
             seed: int = 0, window: int | None = None, use_cache: bool = True) -> np.ndarray:
    """(n_new,) ids that follow ``prompt`` (a non-empty 1-D sequence of ids), drawn one at a time from ``seed``.

    ``n_new`` = 0 gives an empty array.
    """
    if not isinstance(model, CharModel):
        raise TypeError(f"model must be a CharModel, got {type(model).__name__}")
    if prompt is None or np.size(prompt) == 0:
        raise ValueError("the prompt is empty: give at least one character to continue from")
    ids = as_int_array(prompt, "prompt", what="integer ids (vocab.encode(text) gives them)")
    if ids.ndim != 1:
        raise ValueError(f"prompt must be 1-D, one id per character, got shape {ids.shape}")
    if ids.min() < 0 or ids.max() >= model.vocab_size:
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ValueError(f"prompt id {bad} is outside the model's vocabulary of {model.vocab_size} ids")
    n_new = check_positive_int(n_new, "n_new", minimum=0)
    temperature = check_temperature(temperature)
    seed = check_positive_int(seed, "seed", minimum=0)
    if window is not None and check_positive_int(window, "window") < 2:
        raise ValueError(f"window must be at least 2 characters, got {window}")
    use_cache = check_flag(use_cache, "use_cache")
    out = [int(i) for i in ids]
    limit = len(out) + n_new if window is None else window
    rng = np.random.default_rng([3, seed])
    start = max(0, len(out) - limit)  # the first id of the context
    cache: KVCache | None = None
    for _ in range(n_new):
        if len(out) - start > limit:  # the context is full: restart from its last half
            start, cache = len(out) - limit // 2, None
        if not use_cache:
            last = model.logits(np.array([out[start:]]))[0, -1]  # (V,)
        elif cache is None:
            logits, cache = model.prefill(np.array([out[start:]]))
            last = logits[0, -1]  # (V,)
        else:
            last = model.extend(cache, np.array([[out[-1]]]))[0, -1]  # (V,)
        out.append(sample_next(last, temperature, rng))
    return np.array(out[len(out) - n_new:], dtype=np.int64)
