"""A tiny attention model in float64 NumPy, with its backward pass written out by hand.

    x_0     = E[tokens] (+ P[positions] for "sinusoidal" and "learned")      (B, L, d)
    for each layer l:
        q, k, v = x W_q, x W_k, x W_v, split into H heads                   (B, H, L, d_h)
        (q, k rotated by their positions for "rope")
        s       = q k^T / sqrt(d_h) + bias                                  (B, H, L, L)
                  bias: -m_h |j - i| for "alibi", a learned number per bucket of j - i and head
                  for "relative", none otherwise
        w       = softmax over the allowed keys (all keys, or j <= i when causal)
        x_l+1   = x_l + concat_h(w v) W_o                                    (B, L, d)
    logits  = x_n U + b                                                     (B, L, V)
    loss    = mean over scored positions of -log softmax(logits)[target]

Every part calls the public core functions (softmax, masked_softmax, causal_mask,
sinusoidal_positions, rope, alibi_slopes, relative_position_bucket) and has its gradient below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lessonlib._checks import check_flag, check_positive_int
from lessonlib.attention import masked_softmax, softmax
from lessonlib.masks import causal_mask
from lessonlib.position import BeyondTableError, alibi_slopes, relative_position_bucket, rope, sinusoidal_positions
from lessonlib.training import checkpoint

POSITIONS = ("none", "sinusoidal", "learned", "rope", "alibi", "relative")
FORMAT = "lessonlib.training.AttentionModel"
FORMAT_VERSION = 1
# T5's default. When not causal: 0..15 for keys at or before the query, 17..31 for later keys (16,
# a later key at distance 0, never occurs); in each half, half the buckets are exact distances.
RELATIVE_BUCKETS = 32
RELATIVE_MAX_DISTANCE = 128


def check_position(position: object) -> str:
    """Refuse a position mechanism that is not one of POSITIONS, listing them."""
    if not isinstance(position, str) or position not in POSITIONS:
        raise ValueError(f"unknown position mechanism {position!r}; choose one of {', '.join(POSITIONS)}")
    return position


@dataclass
class _LayerCache:
    """What one layer's forward pass keeps for its backward pass."""

    x: np.ndarray  # (B, L, d) the layer's input
    q: np.ndarray  # (B, H, L, d_h) after RoPE, if any
    k: np.ndarray  # (B, H, L, d_h)
    v: np.ndarray  # (B, H, L, d_h)
    w: np.ndarray  # (B, H, L, L) attention weights
    o: np.ndarray  # (B, L, d) heads merged, before W_o


@dataclass
class _Cache:
    tokens: np.ndarray  # (B, L)
    layers: list[_LayerCache] = field(default_factory=list)
    final: np.ndarray | None = None  # (B, L, d) input of the output projection


class AttentionModel:
    """Token embedding, a position mechanism, ``n_layers`` residual attention layers, an output projection.

    ``params`` is a dict of float64 arrays (names below); ``loss_and_grads`` returns gradients
    keyed the same way. The same ``seed`` gives the same initial parameters.

    - ``embed`` (V, d); ``pos_table`` (max_length, d) for "learned" only;
    - ``layers.{l}.wq``, ``.wk``, ``.wv``, ``.wo`` (d, d); ``layers.{l}.rel_bias`` (buckets, H) for "relative";
    - ``unembed`` (d, V) and ``unembed_bias`` (V,).
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        d_model: int = 32,
        n_heads: int = 2,
        n_layers: int = 1,
        position: str = "none",
        causal: bool = False,
        max_length: int = 64,
        seed: int = 0,
    ) -> None:
        self.vocab_size = check_positive_int(vocab_size, "vocab_size", minimum=2)
        self.d_model = check_positive_int(d_model, "d_model")
        self.n_heads = check_positive_int(n_heads, "n_heads")
        self.n_layers = check_positive_int(n_layers, "n_layers")
        self.max_length = check_positive_int(max_length, "max_length")
        self.seed = check_positive_int(seed, "seed", minimum=0)
        self.position = check_position(position)
        self.causal = check_flag(causal, "causal")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} does not split into n_heads={self.n_heads} equal heads")
        self.d_head = self.d_model // self.n_heads
        if position == "rope" and self.d_head % 2:
            raise ValueError(f"RoPE rotates pairs of coordinates, so the head width must be even, got {self.d_head}")
        self.params = self._init_params(np.random.default_rng(self.seed))
        self._static: dict[int, tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]] = {}

    # --- configuration -----------------------------------------------------------------------

    @property
    def config(self) -> dict[str, object]:
        """The constructor's arguments: enough to rebuild the same architecture."""
        return {"vocab_size": self.vocab_size, "d_model": self.d_model, "n_heads": self.n_heads,
                "n_layers": self.n_layers, "position": self.position, "causal": self.causal,
                "max_length": self.max_length, "seed": self.seed}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"AttentionModel({args})"

    def _init_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, v = self.d_model, self.vocab_size
        params = {"embed": rng.normal(0.0, 1.0, (v, d))}  # (V, d)
        if self.position == "learned":
            params["pos_table"] = rng.normal(0.0, 1.0, (self.max_length, d))  # (P, d)
        for layer in range(self.n_layers):
            for name in ("wq", "wk", "wv", "wo"):
                params[f"layers.{layer}.{name}"] = rng.normal(0.0, 1.0 / math.sqrt(d), (d, d))  # (d, d)
            if self.position == "relative":
                params[f"layers.{layer}.rel_bias"] = np.zeros((RELATIVE_BUCKETS, self.n_heads))  # (buckets, H)
        params["unembed"] = rng.normal(0.0, 1.0 / math.sqrt(d), (d, v))  # (d, V)
        params["unembed_bias"] = np.zeros(v)  # (V,)
        return params

    # --- input checks ------------------------------------------------------------------------

    def check_tokens(self, tokens: object) -> np.ndarray:
        """Return ``tokens`` as an int array (B, L), refusing other shapes, ids outside the vocabulary, long inputs."""
        tokens = np.asarray(tokens)
        if not np.issubdtype(tokens.dtype, np.integer):
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if tokens.ndim != 2:
            raise ValueError(f"tokens must have shape (batch, length), got {tokens.shape}; one sequence x is x[None]")
        if tokens.size == 0:
            raise ValueError(f"tokens hold no positions (shape {tokens.shape})")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"token {bad} is outside the vocabulary of this model, which has {self.vocab_size} "
                             f"ids (0..{self.vocab_size - 1})")
        length = tokens.shape[1]
        if self.position == "learned" and length > self.max_length:
            raise BeyondTableError(
                f"length {length} is beyond the learned position table, which has {self.max_length} rows "
                f"(positions 0..{self.max_length - 1}); a learned table has no vector for a position it never "
                "had, so it cannot be evaluated there")
        return tokens

    def check_targets(self, tokens: np.ndarray, targets: object) -> np.ndarray:
        """Return ``targets`` (B, L) ints in -1..V-1 (-1 = not scored), with the tokens' shape."""
        targets = np.asarray(targets)
        if targets.shape != tokens.shape:
            raise ValueError(f"targets have shape {targets.shape} but tokens have shape {tokens.shape}; "
                             "give one target per token (-1 where a position is not scored)")
        if not np.issubdtype(targets.dtype, np.integer):
            raise TypeError(f"targets must be integer ids (-1 = not scored), got dtype {targets.dtype}")
        if targets.min() < -1 or targets.max() >= self.vocab_size:
            bad = int(targets.min()) if targets.min() < -1 else int(targets.max())
            raise ValueError(f"target {bad} is outside the vocabulary of {self.vocab_size} ids "
                             f"(0..{self.vocab_size - 1}, or -1 for a position that is not scored)")
        if not np.any(targets >= 0):
            raise ValueError("no position is scored: every target is -1")
        return targets

    # --- pieces that depend only on the length ------------------------------------------------

    def _length_terms(self, length: int) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """(allowed (L, L) or None, score bias (H, L, L) or None, buckets (L, L) or None) for this length."""
        if length not in self._static:
            allowed = causal_mask(length) if self.causal else None  # (L, L), True = key j <= query i
            offset = np.arange(length)[None, :] - np.arange(length)[:, None]  # (L, L) key - query
            bias = buckets = None
            if self.position == "alibi":
                bias = -alibi_slopes(self.n_heads)[:, None, None] * np.abs(offset)[None]  # (H, L, L)
            elif self.position == "relative":
                buckets = relative_position_bucket(offset, bidirectional=not self.causal, n_buckets=RELATIVE_BUCKETS,
                                                   max_distance=RELATIVE_MAX_DISTANCE)  # (L, L)
            self._static[length] = (allowed, bias, buckets)
        return self._static[length]

    def _split(self, x: np.ndarray) -> np.ndarray:
        b, n, _ = x.shape
        return x.reshape(b, n, self.n_heads, self.d_head).transpose(0, 2, 1, 3)  # (B, H, L, d_h)

    def _merge(self, x: np.ndarray) -> np.ndarray:
        b, _, n, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(b, n, self.d_model)  # (B, L, d)

    # --- forward -----------------------------------------------------------------------------

    def _forward(self, tokens: np.ndarray, exclude: np.ndarray | None = None) -> tuple[np.ndarray, _Cache]:
        """Logits (B, L, V) and the cache; ``exclude`` (n_layers, B, H, L, L) True = also disallowed."""
        p = self.params
        _, length = tokens.shape
        allowed, bias, buckets = self._length_terms(length)
        positions = np.arange(length)  # (L,)
        x = p["embed"][tokens]  # (B, L, d)
        if self.position == "sinusoidal":
            x = x + sinusoidal_positions(length, self.d_model)[None]  # (B, L, d)
        elif self.position == "learned":
            x = x + p["pos_table"][:length][None]  # (B, L, d)
        cache = _Cache(tokens=tokens)
        for layer in range(self.n_layers):
            name = f"layers.{layer}."
            q = self._split(x @ p[name + "wq"])  # (B, H, L, d_h)
            k = self._split(x @ p[name + "wk"])  # (B, H, L, d_h)
            v = self._split(x @ p[name + "wv"])  # (B, H, L, d_h)
            if self.position == "rope":
                q, k = rope(q, positions), rope(k, positions)  # (B, H, L, d_h), rotated by position
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(self.d_head)  # (B, H, L, L)
            if bias is not None:
                s = s + bias[None]  # (B, H, L, L)
            elif buckets is not None:
                s = s + p[name + "rel_bias"][buckets].transpose(2, 0, 1)[None]  # (B, H, L, L)
            layer_allowed = allowed
            if exclude is not None:
                keep = ~exclude[layer]  # (B, H, L, L)
                layer_allowed = keep if allowed is None else keep & allowed
            w = softmax(s) if layer_allowed is None else masked_softmax(s, layer_allowed)  # (B, H, L, L)
            o = self._merge(w @ v)  # (B, L, d)
            cache.layers.append(_LayerCache(x=x, q=q, k=k, v=v, w=w, o=o))
            x = x + o @ p[name + "wo"]  # (B, L, d), residual
        cache.final = x
        return x @ p["unembed"] + p["unembed_bias"], cache  # (B, L, V)

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """(batch, L, vocab) unnormalised scores of the next-token choice at every position."""
        return self._forward(self.check_tokens(tokens))[0]

    def attention(self, tokens: np.ndarray) -> list[np.ndarray]:
        """Attention weights of every layer: a list of (batch, heads, L, L) arrays, rows summing to one."""
        return [c.w for c in self._forward(self.check_tokens(tokens))[1].layers]

    def logits_excluding(self, tokens: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """Logits (B, L, V) when attention may not use the keys where ``exclude`` (n_layers, B, H, L, L) is True.

        An ablation: the excluded keys are removed before the softmax, so the others are renormalised.
        """
        tokens = self.check_tokens(tokens)
        exclude = np.asarray(exclude)
        shape = (self.n_layers, tokens.shape[0], self.n_heads, tokens.shape[1], tokens.shape[1])
        if exclude.dtype != bool or exclude.shape != shape:
            raise ValueError(f"exclude must be a boolean array of shape {shape} (True = excluded), "
                             f"got {exclude.dtype} {exclude.shape}")
        return self._forward(tokens, exclude)[0]

    # --- loss and backward -------------------------------------------------------------------

    def loss_and_grads(self, tokens: np.ndarray, targets: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Mean cross-entropy over scored positions (targets != -1), and its gradient for every parameter.

        tokens, targets (B, L). Returns (loss, grads) with grads keyed like ``params``.
        """
        tokens = self.check_tokens(tokens)
        targets = self.check_targets(tokens, targets)
        logits, cache = self._forward(tokens)  # (B, L, V)
        scored = targets >= 0  # (B, L)
        n_scored = int(np.count_nonzero(scored))
        shifted = logits - logits.max(axis=-1, keepdims=True)  # (B, L, V)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (B, L, V)
        picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], axis=-1)[..., 0]  # (B, L)
        loss = float(-picked[scored].sum() / n_scored)
        # d loss / d logits = (softmax - one_hot(target)) / n_scored on scored positions, 0 elsewhere
        d_logits = np.exp(log_probs)  # (B, L, V)
        np.put_along_axis(d_logits, np.maximum(targets, 0)[..., None],
                          np.take_along_axis(d_logits, np.maximum(targets, 0)[..., None], axis=-1) - 1.0, axis=-1)
        d_logits *= scored[..., None] / n_scored
        return loss, self._backward(cache, d_logits)

    def _backward(self, cache: _Cache, d_logits: np.ndarray) -> dict[str, np.ndarray]:
        """Gradients of every parameter, given d loss / d logits (B, L, V)."""
        p = self.params
        grads: dict[str, np.ndarray] = {}
        tokens = cache.tokens
        length = tokens.shape[1]
        allowed, bias, buckets = self._length_terms(length)
        positions = np.arange(length)  # (L,)
        flat = d_logits.reshape(-1, self.vocab_size)  # (B*L, V)
        grads["unembed"] = cache.final.reshape(-1, self.d_model).T @ flat  # (d, V)
        grads["unembed_bias"] = flat.sum(axis=0)  # (V,)
        dx = d_logits @ p["unembed"].T  # (B, L, d)
        for layer in reversed(range(self.n_layers)):
            name, c = f"layers.{layer}.", cache.layers[layer]
            # x_out = x + o W_o: the residual passes dx through unchanged
            grads[name + "wo"] = c.o.reshape(-1, self.d_model).T @ dx.reshape(-1, self.d_model)  # (d, d)
            do = self._split(dx @ p[name + "wo"].T)  # (B, H, L, d_h)
            dw = do @ c.v.transpose(0, 1, 3, 2)  # (B, H, L, L)
            dv = c.w.transpose(0, 1, 3, 2) @ do  # (B, H, L, d_h)
            # softmax backward: ds = w * (dw - sum_j w dw); zero wherever w is zero (masked keys)
            ds = c.w * (dw - np.sum(c.w * dw, axis=-1, keepdims=True))  # (B, H, L, L)
            if buckets is not None:
                per_head = ds.sum(axis=0)  # (H, L, L)
                grads[name + "rel_bias"] = np.stack(
                    [np.bincount(buckets.ravel(), weights=per_head[h].ravel(), minlength=RELATIVE_BUCKETS)
                     for h in range(self.n_heads)], axis=1)  # (buckets, H)
            ds = ds / math.sqrt(self.d_head)
            dq = ds @ c.k  # (B, H, L, d_h)
            dk = ds.transpose(0, 1, 3, 2) @ c.q  # (B, H, L, d_h)
            if self.position == "rope":
                # a rotation's transpose is the rotation by the opposite angle
                dq, dk = rope(dq, -positions), rope(dk, -positions)
            dq, dk, dv = self._merge(dq), self._merge(dk), self._merge(dv)  # (B, L, d) each
            x2 = c.x.reshape(-1, self.d_model)  # (B*L, d)
            grads[name + "wq"] = x2.T @ dq.reshape(-1, self.d_model)
            grads[name + "wk"] = x2.T @ dk.reshape(-1, self.d_model)
            grads[name + "wv"] = x2.T @ dv.reshape(-1, self.d_model)
            dx = dx + dq @ p[name + "wq"].T + dk @ p[name + "wk"].T + dv @ p[name + "wv"].T  # (B, L, d)
        if self.position == "learned":
            grads["pos_table"] = np.zeros_like(p["pos_table"])  # (P, d)
            grads["pos_table"][:length] = dx.sum(axis=0)
        grads["embed"] = np.zeros_like(p["embed"])  # (V, d)
        np.add.at(grads["embed"], tokens.ravel(), dx.reshape(-1, self.d_model))
        return {name: grads[name] for name in p}

    # --- checkpoints -------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the configuration and parameters to an ``.npz`` file with a format name and version."""
        checkpoint.save(path, FORMAT, FORMAT_VERSION, self.config, self.params)

    @classmethod
    def load(cls, path: str | Path, **expected: object) -> AttentionModel:
        """A model rebuilt from ``save``; ``expected`` config values (e.g. position="rope") must match the file's."""
        model, stored = checkpoint.load(path, FORMAT, FORMAT_VERSION, cls, expected)
        model.params = {name: value.astype(np.float64) for name, value in stored.items()}
        return model
