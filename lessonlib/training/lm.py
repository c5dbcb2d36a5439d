"""A small decoder-only character language model in NumPy, with its backward pass written out.

    x      = E[tokens] (+ P[positions] for "sinusoidal" and "learned")                 (B, L, d)
    for each block:
        a      = LN(x)                                                                 (B, L, d)
        q,k,v  = a W_q, a W_k, a W_v, split into H heads (q, k rotated for "rope")     (B, H, L, d_h)
        s      = q k^T / sqrt(d_h) + bias (ALiBi, or T5's learned bucket bias)         (B, H, L, S)
        w      = softmax over the allowed keys: causal, key j <= query i               (B, H, L, S)
        x      = x + concat_h(w v) W_o                                                 (B, L, d)
        x      = x + GELU(LN(x) W_1 + c_1) W_2 + c_2                                   (B, L, d)
    logits = LN(x) U                                                                   (B, L, V)
    loss   = mean over scored positions of -log softmax(logits)[target]

LN(x) = (x - mean) / sqrt(var + 1e-5) * g + b over the last axis; GELU is the tanh approximation.
Position "none" is the causal mask alone. Every mechanism comes from :mod:`lessonlib.position`.

Precision: parameters and activations are float32 by default (``dtype``), which is safe here:
softmax and log-softmax subtract their row maximum and LayerNorm divides by sqrt(var + 1e-5).
It is not safe for the loss's mean over thousands of positions and the T5 bias's gradient
(sums over every query-key pair of a bucket), which are accumulated in float64, nor for a
finite-difference gradient check, which needs ``dtype=np.float64`` (a step of 1e-6 is below
float32's resolution of a number near 1).

The attention function, the causal mask and the position function are arguments of
:meth:`CharModel.logits` and :meth:`CharModel.loss`, so a learner's own functions can drive the
forward pass of a stored model (see ``Plugs``); the backward pass uses the engine's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lessonlib._checks import as_allowed_mask, as_dtype, check_callable, check_positive_int
from lessonlib.attention import masked_softmax, merge_heads, split_heads
from lessonlib.masks import causal_mask
from lessonlib.position import alibi_bias, relative_position_bucket, sinusoidal_positions
from lessonlib.training import checkpoint
from lessonlib.training.layers import (
    causal_fill,
    cross_entropy,
    gelu_backward,
    gelu_unchecked,
    layer_norm,
    layer_norm_backward,
    rotate_pairs,
    rotation_tables,
    softmax_with_fill,
)
from lessonlib.training.model import (
    RELATIVE_BUCKETS,
    RELATIVE_MAX_DISTANCE,
    BeyondTableError,
    check_position,
)

FORMAT = "lessonlib.training.CharModel"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Plugs:
    """Functions that replace the engine's own in the forward pass (None = the engine's).

    - ``attention(q, k, v, mask=allowed)``: q (B, H, L, d_h), k and v (B, H, S, d_h), allowed
      (1, 1, L, S) or (B, 1, L, S) boolean; returns the output (B, H, L, d_h), a result with
      ``.output``, or a tuple whose first item is the output. Not for "alibi" or "relative",
      whose bias enters between the product and the softmax: plug ``softmax`` there.
    - ``softmax(scores, allowed)``: masked softmax of (B, H, L, S) scores over the last axis.
    - ``causal_mask(length)``: (L, L) boolean, True where key <= query (a whole sequence).
    - ``cached_causal_mask(lengths, n_queries)``: (B, n_queries, S) boolean, the new queries at
      the end of S cached keys (decoding with a cache).
    - ``position``: "sinusoidal": ``f(n_positions, d_model) -> (n, d)``; "rope":
      ``f(x, positions) -> x rotated``; "alibi": ``f(n_heads) -> (H,) slopes``.
    """

    attention: Callable | None = None
    softmax: Callable | None = None
    causal_mask: Callable | None = None
    cached_causal_mask: Callable | None = None
    position: Callable | None = None

    def __post_init__(self) -> None:
        for name in ("attention", "softmax", "causal_mask", "cached_causal_mask", "position"):
            if getattr(self, name) is not None:
                check_callable(getattr(self, name), name)


def _plugged_mask(value: object, call: str, shape: tuple[int, ...]) -> np.ndarray:
    """A plugged mask function's result as a boolean mask of ``shape``, refused by the call's name
    otherwise (an (L,) row, say, would broadcast over every query and let the future in, silently)."""
    allowed = as_allowed_mask(value, f"the result of the plugged {call}")
    if allowed.shape != shape:
        raise ValueError(f"the plugged {call} returned shape {allowed.shape}; it must return {shape}, "
                         "True where the key may be attended to")
    return allowed


def _plugs(plugs: object) -> Plugs:
    """``plugs`` itself, or the engine's own functions for None; anything else is refused."""
    if plugs is None:
        return Plugs()
    if not isinstance(plugs, Plugs):
        raise TypeError(f"plugs must be Plugs(...) or None, got {type(plugs).__name__}")
    return plugs


@dataclass
class KVCache:
    """Keys and values of every position seen so far, per block, in buffers allocated ahead.

    Block l keeps a keys buffer and a values buffer of shape (B, H, capacity, d_h); rows
    0 .. length - 1 hold the text so far and the rows after them are not written yet. A decoding
    step writes its new rows in place, so it costs the new rows, not a copy of the whole cache.
    When a text outgrows ``capacity``, the buffers are copied once into buffers twice as long.
    """

    capacity: int = 0
    length: int = 0
    key_buffers: list[np.ndarray] = field(default_factory=list)
    value_buffers: list[np.ndarray] = field(default_factory=list)

    @property
    def keys(self) -> list[np.ndarray]:
        """Each block's keys of the text so far: (B, H, length, d_h) views of the buffers."""
        return [buffer[:, :, :self.length] for buffer in self.key_buffers]

    @property
    def values(self) -> list[np.ndarray]:
        """Each block's values of the text so far: (B, H, length, d_h) views of the buffers."""
        return [buffer[:, :, :self.length] for buffer in self.value_buffers]

    @property
    def batch(self) -> int | None:
        """How many sequences the cache holds (None before the first write)."""
        return self.key_buffers[0].shape[0] if self.key_buffers else None

    def write(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Write block ``layer``'s new keys and values (B, H, n, d_h) at rows length .. length + n - 1.

        Returns that block's keys and values of the whole text, (B, H, length + n, d_h) views. The
        caller advances ``length`` once every block has written (:meth:`CharModel.extend` does).
        """
        end = self.length + k.shape[2]
        if end > self.capacity:
            self._grow(max(end, 2 * self.capacity))
        if layer == len(self.key_buffers):
            shape = k.shape[:2] + (self.capacity, k.shape[3])  # (B, H, capacity, d_h)
            self.key_buffers.append(np.empty(shape, dtype=k.dtype))
            self.value_buffers.append(np.empty(shape, dtype=v.dtype))
        keys, values = self.key_buffers[layer], self.value_buffers[layer]
        keys[:, :, self.length:end] = k
        values[:, :, self.length:end] = v
        return keys[:, :, :end], values[:, :, :end]

    def _grow(self, capacity: int) -> None:
        """Copy the rows written so far into buffers of ``capacity`` rows."""
        for buffers in (self.key_buffers, self.value_buffers):
            for i, old in enumerate(buffers):
                new = np.empty(old.shape[:2] + (capacity, old.shape[3]), dtype=old.dtype)  # (B, H, C, d_h)
                new[:, :, :self.length] = old[:, :, :self.length]
                buffers[i] = new
        self.capacity = capacity


def _attention_output(result: object) -> np.ndarray:
    """The output array of whatever a plugged-in attention function returned."""
    if isinstance(result, tuple):
        result = result[0]
    return np.asarray(getattr(result, "output", result))


class CharModel:
    """Token embedding, a position mechanism, ``n_layers`` pre-norm blocks, final norm and unembedding.

    ``params`` (arrays of ``dtype``): ``embed`` (V, d); ``pos_table`` (max_length, d) for "learned";
    per block ``blocks.{l}.ln1_g``, ``ln1_b``, ``wq``, ``wk``, ``wv``, ``wo`` (d, d), ``ln2_g``,
    ``ln2_b``, ``w1`` (d, f), ``c1`` (f,), ``w2`` (f, d), ``c2`` (d,), and ``rel_bias`` (buckets, H)
    for "relative"; ``lnf_g``, ``lnf_b``, ``unembed`` (d, V). Always causal.
    """

    def __init__(self, vocab_size: int, *, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_mlp: int | None = None, position: str = "rope", max_length: int = 256, seed: int = 0,
                 dtype: str = "float32") -> None:
        self.vocab_size = check_positive_int(vocab_size, "vocab_size", minimum=2)
        self.d_model = check_positive_int(d_model, "d_model")
        self.n_heads = check_positive_int(n_heads, "n_heads")
        self.n_layers = check_positive_int(n_layers, "n_layers")
        self.d_mlp = check_positive_int(4 * self.d_model if d_mlp is None else d_mlp, "d_mlp")
        self.max_length = check_positive_int(max_length, "max_length")
        self.seed = check_positive_int(seed, "seed", minimum=0)
        self.position = check_position(position)
        self.dtype = as_dtype(dtype, kinds="f")
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} does not split into n_heads={self.n_heads} equal heads")
        self.d_head = self.d_model // self.n_heads
        if position == "rope" and self.d_head % 2:
            raise ValueError(f"RoPE rotates pairs of coordinates, so the head width must be even, got {self.d_head}")
        self.params = self._init_params(np.random.default_rng(self.seed))

    @property
    def config(self) -> dict[str, object]:
        """The constructor's arguments: enough to rebuild the same architecture."""
        return {"vocab_size": self.vocab_size, "d_model": self.d_model, "n_heads": self.n_heads,
                "n_layers": self.n_layers, "d_mlp": self.d_mlp, "position": self.position,
                "max_length": self.max_length, "seed": self.seed, "dtype": self.dtype.name}

    def __repr__(self) -> str:
        return "CharModel(" + ", ".join(f"{k}={v!r}" for k, v in self.config.items()) + ")"

    def _init_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, f, v = self.d_model, self.d_mlp, self.vocab_size
        out_std = 1.0 / math.sqrt(2 * self.n_layers)  # residual branches start small (GPT-2)
        p = {"embed": rng.normal(0.0, 1.0, (v, d))}  # (V, d)
        if self.position == "learned":
            p["pos_table"] = rng.normal(0.0, 0.5, (self.max_length, d))  # (P, d)
        for layer in range(self.n_layers):
            n = f"blocks.{layer}."
            p[n + "ln1_g"], p[n + "ln1_b"] = np.ones(d), np.zeros(d)
            for m in ("wq", "wk", "wv"):
                p[n + m] = rng.normal(0.0, 1.0 / math.sqrt(d), (d, d))  # (d, d)
            p[n + "wo"] = rng.normal(0.0, out_std / math.sqrt(d), (d, d))  # (d, d)
            if self.position == "relative":
                p[n + "rel_bias"] = np.zeros((RELATIVE_BUCKETS, self.n_heads))  # (buckets, H)
            p[n + "ln2_g"], p[n + "ln2_b"] = np.ones(d), np.zeros(d)
            p[n + "w1"], p[n + "c1"] = rng.normal(0.0, 1.0 / math.sqrt(d), (d, f)), np.zeros(f)  # (d, f), (f,)
            p[n + "w2"], p[n + "c2"] = rng.normal(0.0, out_std / math.sqrt(f), (f, d)), np.zeros(d)  # (f, d), (d,)
        p["lnf_g"], p["lnf_b"] = np.ones(d), np.zeros(d)
        p["unembed"] = rng.normal(0.0, 0.02, (d, v))  # (d, V): a near-uniform first prediction
        return {name: value.astype(self.dtype) for name, value in p.items()}

    # --- input checks ------------------------------------------------------------------------

    def check_tokens(self, tokens: object, start: int = 0) -> np.ndarray:
        """``tokens`` as ints (B, L) after checking the vocabulary and, for "learned", the table's size."""
        tokens = np.asarray(tokens)
        if not np.issubdtype(tokens.dtype, np.integer):
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if tokens.ndim != 2 or tokens.size == 0:
            raise ValueError(f"tokens must have shape (batch, length) with length >= 1, got {tokens.shape}; "
                             "one sequence x is x[None]")
        if tokens.min() < 0 or tokens.max() >= self.vocab_size:
            bad = int(tokens.min()) if tokens.min() < 0 else int(tokens.max())
            raise ValueError(f"token {bad} is outside the vocabulary of this model, which has {self.vocab_size} "
                             f"ids (0..{self.vocab_size - 1})")
        end = start + tokens.shape[1]
        if self.position == "learned" and end > self.max_length:
            raise BeyondTableError(
                f"length {end} is beyond the learned position table, which has {self.max_length} rows "
                f"(positions 0..{self.max_length - 1}); a learned table has no vector for a position it never "
                "had, so the model cannot be evaluated there")
        return tokens

    # --- forward -----------------------------------------------------------------------------

    def _mask(self, batch: int, n_new: int, n_keys: int, plugs: Plugs) -> np.ndarray:
        """Allowed (1, 1, L, S) or (B, 1, L, S): causal, the L new queries at the end of the S keys.

        Always four axes, like the (B, H, L, S) scores: an (L, S) mask would be refused as ambiguous
        by lessonlib's attention, plugged in, whenever the windows number L.
        """
        if n_new != n_keys and plugs.cached_causal_mask is not None:
            allowed = _plugged_mask(plugs.cached_causal_mask(np.full(batch, n_keys), n_new),
                                    "cached_causal_mask(lengths, n_queries)", (batch, n_new, n_keys))  # (B, L, S)
            return allowed[:, None]  # (B, 1, L, S)
        if n_new == n_keys and plugs.causal_mask is not None:
            allowed = _plugged_mask(plugs.causal_mask(n_new), "causal_mask(length)", (n_new, n_new))  # (L, L)
        else:
            allowed = causal_mask(n_new, n_keys, align="bottom-right")  # (L, S)
        return allowed[None, None]  # (1, 1, L, S)

    def _bias(self, layer: int, n_new: int, n_keys: int, plugs: Plugs) -> np.ndarray | None:
        """(H, L, S) score bias of ALiBi or T5 (queries at the end of the keys), else None."""
        if self.position == "alibi":
            if plugs.position is not None:
                slopes = np.asarray(plugs.position(self.n_heads), dtype=float)  # (H,)
                offsets = np.arange(n_keys)[None, :] - np.arange(n_keys - n_new, n_keys)[:, None]  # (L, S)
                return -slopes[:, None, None] * np.abs(offsets)[None]  # (H, L, S)
            return alibi_bias(n_new, n_keys, self.n_heads, align="bottom-right")  # (H, L, S)
        if self.position == "relative":
            offsets = np.arange(n_keys)[None, :] - np.arange(n_keys - n_new, n_keys)[:, None]  # (L, S)
            buckets = self._buckets(offsets)  # (L, S)
            return self.params[f"blocks.{layer}.rel_bias"][buckets].transpose(2, 0, 1)  # (H, L, S)
        return None

    def _rotations(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """RoPE's (cos, sin) tables (n, d_h/2) for positions start .. start+n-1, computed once per model.

        The table covers at least ``max_length`` positions and doubles when a longer text needs it.
        """
        table = getattr(self, "_rotation_table", None)
        if table is None or table[0].shape[0] < start + n:
            size = max(self.max_length, 2 * (start + n) if table is not None else start + n)
            table = self._rotation_table = rotation_tables(np.arange(size), self.d_head, self.dtype)
        return table[0][start:start + n], table[1][start:start + n]

    @staticmethod
    def _buckets(offsets: np.ndarray) -> np.ndarray:
        return relative_position_bucket(offsets, bidirectional=False, n_buckets=RELATIVE_BUCKETS,
                                        max_distance=RELATIVE_MAX_DISTANCE)

    def _run(self, tokens: np.ndarray, past: KVCache | None, plugs: Plugs, keep: list | None):
        """Logits (B, L, V) of ``tokens`` placed after the ``past`` cache (extended in place if given).

        ``keep``, if a list, receives what the backward pass needs (only without a past).
        """
        p, dt = self.params, self.dtype
        if plugs.position is not None and self.position not in ("sinusoidal", "rope", "alibi"):
            raise ValueError(f"position {self.position!r} has no position function to plug in (its positions are "
                             "learned parameters, or there are none); a position function drives 'sinusoidal', "
                             "'rope' or 'alibi'")
        batch, n_new = tokens.shape
        start = 0 if past is None else past.length
        positions = np.arange(start, start + n_new)  # (L,)
        x = p["embed"][tokens]  # (B, L, d)
        if self.position == "sinusoidal":
            make = plugs.position or sinusoidal_positions
            x = x + np.asarray(make(start + n_new, self.d_model))[start:].astype(dt)  # (B, L, d)
        elif self.position == "learned":
            x = x + p["pos_table"][start:start + n_new]  # (B, L, d)
        n_keys = start + n_new
        own_mask = plugs.softmax is None and plugs.causal_mask is None and plugs.cached_causal_mask is None
        # the engine's own mask needs no policy for empty rows: a fill of 0 / -inf is the fast path, and
        # one new query at the end of the keys (a decoding step) sees every key, so it needs no fill at all
        allowed = fill = None
        if not (own_mask and n_new == 1 and plugs.attention is None):
            allowed = self._mask(batch, n_new, n_keys, plugs)
            fill = causal_fill(allowed, dt) if own_mask else None  # (1, 1, L, S)
        if self.position == "rope" and plugs.position is None:
            cos, sin = self._rotations(start, n_new)  # (L, d_h/2) each
        for layer in range(self.n_layers):
            n = f"blocks.{layer}."
            a, xhat1, rstd1 = layer_norm(x, p[n + "ln1_g"], p[n + "ln1_b"])  # (B, L, d)
            q = split_heads(a @ p[n + "wq"], self.n_heads)  # (B, H, L, d_h)
            k = split_heads(a @ p[n + "wk"], self.n_heads)  # (B, H, L, d_h)
            v = split_heads(a @ p[n + "wv"], self.n_heads)  # (B, H, L, d_h)
            if self.position == "rope":
                if plugs.position is None:
                    q, k = rotate_pairs(q, cos, sin), rotate_pairs(k, cos, sin)  # (B, H, L, d_h), rotated
                else:
                    q = np.asarray(plugs.position(q, positions), dtype=dt)  # (B, H, L, d_h), rotated by position
                    k = np.asarray(plugs.position(k, positions), dtype=dt)  # (B, H, L, d_h)
            if past is not None:
                k, v = past.write(layer, k, v)  # (B, H, S, d_h) each: the text so far, new rows last
            bias = self._bias(layer, n_new, n_keys, plugs)
            if plugs.attention is not None:
                if bias is not None:
                    raise ValueError(f"position {self.position!r} adds a bias to the scores before the softmax, "
                                     "which an attention(q, k, v, mask) function cannot take; plug in "
                                     "softmax=your_masked_softmax instead")
                w = None
                heads = _attention_output(plugs.attention(q, k, v, mask=allowed)).astype(dt)  # (B, H, L, d_h)
            else:
                s = q @ k.transpose(0, 1, 3, 2)  # (B, H, L, S), scaled in place: a fresh array
                s *= dt.type(1.0 / math.sqrt(self.d_head))
                if bias is not None:
                    s += bias.astype(dt)  # (B, H, L, S)
                if own_mask:
                    w = softmax_with_fill(s, fill)  # (B, H, L, S)
                else:
                    w = np.asarray((plugs.softmax or masked_softmax)(s, allowed), dtype=dt)  # (B, H, L, S)
                heads = w @ v  # (B, H, L, d_h)
            o = merge_heads(heads)  # (B, L, d)
            x_mid = o @ p[n + "wo"]  # (B, L, d)
            x_mid += x  # residual
            m, xhat2, rstd2 = layer_norm(x_mid, p[n + "ln2_g"], p[n + "ln2_b"])  # (B, L, d)
            h_pre = m @ p[n + "w1"]  # (B, L, f)
            h_pre += p[n + "c1"]
            h, t = gelu_unchecked(h_pre)  # (B, L, f)
            if keep is not None:
                keep.append((xhat1, rstd1, a, q, k, v, w, o, xhat2, rstd2, m, h_pre, t, h))
            x = h @ p[n + "w2"]  # (B, L, d)
            x += p[n + "c2"]
            x += x_mid  # residual
        if past is not None:
            past.length = n_keys
        y, xhatf, rstdf = layer_norm(x, p["lnf_g"], p["lnf_b"])  # (B, L, d)
        if keep is not None:
            keep.append((xhatf, rstdf, y))
        return y @ p["unembed"]  # (B, L, V)

    def logits(self, tokens: np.ndarray, *, plugs: Plugs | None = None) -> np.ndarray:
        """(B, L, V) next-character scores at every position of ``tokens`` (B, L)."""
        return self._run(self.check_tokens(tokens), None, _plugs(plugs), None)

    def attention(self, tokens: np.ndarray) -> list[np.ndarray]:
        """Attention weights of every block: a list of (B, H, L, L) arrays, rows summing to one."""
        keep: list = []
        self._run(self.check_tokens(tokens), None, Plugs(), keep)
        return [block[6] for block in keep[:-1]]

    # --- decoding with a key/value cache --------------------------------------------------------

    def prefill(self, tokens: np.ndarray, *, plugs: Plugs | None = None,
                capacity: int | None = None) -> tuple[np.ndarray, KVCache]:
        """(logits (B, L, V), cache) of a prompt: the cache holds every block's keys and values.

        The cache's buffers have room for ``capacity`` positions (default: the model's
        ``max_length``, or the prompt's length if longer); a longer text doubles them.
        """
        tokens = self.check_tokens(tokens)
        cache = KVCache(capacity=max(capacity or self.max_length, tokens.shape[1]))
        return self._run(tokens, cache, _plugs(plugs), None), cache

    def extend(self, cache: KVCache, tokens: np.ndarray, *, plugs: Plugs | None = None) -> np.ndarray:
        """Logits (B, n, V) of ``n`` new tokens after those in ``cache``, which grows by them.

        Each new query attends to the cached keys and to the new ones at or before it: the same
        logits as a full recomputation of the whole text, for the work of the new rows only.
        """
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be the KVCache that prefill returned, got {type(cache).__name__}")
        tokens = self.check_tokens(tokens, start=cache.length)
        if cache.batch is not None and cache.batch != tokens.shape[0]:
            raise ValueError(f"the cache holds {cache.batch} sequences but {tokens.shape[0]} were given")
        return self._run(tokens, cache, _plugs(plugs), None)

    # --- loss and backward -------------------------------------------------------------------

    def loss(self, tokens: np.ndarray, targets: np.ndarray, *, plugs: Plugs | None = None) -> float:
        """Mean cross-entropy (nats) over scored positions (targets != -1), float64."""
        tokens = self.check_tokens(tokens)
        return cross_entropy(self._run(tokens, None, _plugs(plugs), None), self._targets(tokens, targets))[0]

    def _targets(self, tokens: np.ndarray, targets: object) -> np.ndarray:
        targets = np.asarray(targets)
        if targets.shape != tokens.shape or not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"targets must be integer ids of the tokens' shape {tokens.shape}, got "
                             f"{targets.dtype} {targets.shape}")
        if targets.min() < -1 or targets.max() >= self.vocab_size or not np.any(targets >= 0):
            raise ValueError(f"targets must lie in 0..{self.vocab_size - 1} (-1 = not scored), with at least "
                             "one scored")
        return targets

    def loss_and_grads(self, tokens: np.ndarray, targets: np.ndarray, *,
                       causal_mask: Callable | None = None) -> tuple[float, dict[str, np.ndarray]]:
        """Mean cross-entropy over scored positions, and its gradient for every parameter (keyed like params).

        ``causal_mask(length) -> (L, L)`` replaces the engine's mask in training too (the backward
        pass holds for any mask: a key the mask excludes gets weight 0 and so no gradient), e.g. to
        watch what a model learns when the mask lets the future in.
        """
        tokens = self.check_tokens(tokens)
        targets = self._targets(tokens, targets)
        if causal_mask is not None:
            check_callable(causal_mask, "causal_mask")
        keep: list = []
        logits = self._run(tokens, None, Plugs(causal_mask=causal_mask), keep)  # (B, L, V)
        loss, d_logits = cross_entropy(logits, targets)
        return loss, self._backward(tokens, keep, d_logits)

    def _backward(self, tokens: np.ndarray, keep: list, d_logits: np.ndarray) -> dict[str, np.ndarray]:
        p, g, d = self.params, {}, self.d_model
        n_new = tokens.shape[1]
        positions = np.arange(n_new)  # (L,)
        if self.position == "rope":
            cos, sin = self._rotations(0, n_new)  # (L, d_h/2) each
        xhatf, rstdf, y = keep[-1]
        g["unembed"] = y.reshape(-1, d).T @ d_logits.reshape(-1, self.vocab_size)  # (d, V)
        dx, g["lnf_g"], g["lnf_b"] = layer_norm_backward(d_logits @ p["unembed"].T, xhatf, rstdf, p["lnf_g"])
        for layer in reversed(range(self.n_layers)):
            n = f"blocks.{layer}."
            xhat1, rstd1, a, q, k, v, w, o, xhat2, rstd2, m, h_pre, t, h = keep[layer]
            # x_out = x_mid + GELU(m W_1 + c_1) W_2 + c_2
            dx2 = dx.reshape(-1, d)  # (B*L, d)
            g[n + "w2"] = h.reshape(-1, self.d_mlp).T @ dx2  # (f, d)
            g[n + "c2"] = dx2.sum(axis=0)
            dh_pre = gelu_backward(dx @ p[n + "w2"].T, h_pre, t)  # (B, L, f)
            g[n + "w1"] = m.reshape(-1, d).T @ dh_pre.reshape(-1, self.d_mlp)  # (d, f)
            g[n + "c1"] = dh_pre.reshape(-1, self.d_mlp).sum(axis=0)
            dm = dh_pre @ p[n + "w1"].T  # (B, L, d)
            dmid, g[n + "ln2_g"], g[n + "ln2_b"] = layer_norm_backward(dm, xhat2, rstd2, p[n + "ln2_g"])
            dx += dmid  # (B, L, d): d loss / d x_mid
            # x_mid = x + concat_h(w v) W_o
            g[n + "wo"] = o.reshape(-1, d).T @ dx.reshape(-1, d)  # (d, d)
            do = split_heads(dx @ p[n + "wo"].T, self.n_heads)  # (B, H, L, d_h)
            dw = do @ v.transpose(0, 1, 3, 2)  # (B, H, L, L)
            dv = w.transpose(0, 1, 3, 2) @ do  # (B, H, L, d_h)
            dw -= np.einsum("...j,...j->...", w, dw)[..., None]  # (B, H, L, L): dw - sum_j w dw
            dw *= w
            ds = dw  # (B, H, L, L): w (dw - sum_j w dw), zero where masked
            if self.position == "relative":
                offsets = positions[None, :] - positions[:, None]  # (L, L)
                buckets = self._buckets(offsets).ravel()  # (L*L,)
                per_head = ds.sum(axis=0, dtype=np.float64).reshape(self.n_heads, -1)  # (H, L*L)
                g[n + "rel_bias"] = np.stack([np.bincount(buckets, weights=per_head[h_], minlength=RELATIVE_BUCKETS)
                                              for h_ in range(self.n_heads)], axis=1)  # (buckets, H)
            ds *= self.dtype.type(1.0 / math.sqrt(self.d_head))
            dq = ds @ k  # (B, H, L, d_h)
            dk = ds.transpose(0, 1, 3, 2) @ q  # (B, H, L, d_h)
            if self.position == "rope":  # a rotation's transpose is the rotation by the opposite angle
                dq, dk = rotate_pairs(dq, cos, -sin), rotate_pairs(dk, cos, -sin)
            dq, dk, dv = merge_heads(dq), merge_heads(dk), merge_heads(dv)  # (B, L, d) each
            a2 = a.reshape(-1, d)  # (B*L, d)
            g[n + "wq"] = a2.T @ dq.reshape(-1, d)
            g[n + "wk"] = a2.T @ dk.reshape(-1, d)
            g[n + "wv"] = a2.T @ dv.reshape(-1, d)
            da = dq @ p[n + "wq"].T + dk @ p[n + "wk"].T + dv @ p[n + "wv"].T  # (B, L, d)
            dln, g[n + "ln1_g"], g[n + "ln1_b"] = layer_norm_backward(da, xhat1, rstd1, p[n + "ln1_g"])
            dx += dln  # (B, L, d)
        if self.position == "learned":
            g["pos_table"] = np.zeros_like(p["pos_table"])  # (P, d)
            g["pos_table"][:n_new] = dx.sum(axis=0)
        one_hot = tokens.reshape(-1, 1) == np.arange(self.vocab_size)  # (B*L, V): row i marks token i
        g["embed"] = one_hot.astype(self.dtype).T @ dx.reshape(-1, d)  # (V, d): sum of dx over each token's rows
        return {name: g[name].astype(self.dtype, copy=False) for name in p}

    # --- checkpoints -------------------------------------------------------------------------

    def save(self, path: str | Path, *, dtype: str | None = None) -> None:
        """Write the configuration and parameters (as ``dtype``, default the model's) to an ``.npz`` file."""
        checkpoint.save(path, FORMAT, FORMAT_VERSION, self.config,
                        {name: value.astype(dtype or self.dtype) for name, value in self.params.items()})

    @classmethod
    def load(cls, path: str | Path, **expected: object) -> CharModel:
        """A model rebuilt from ``save``; ``expected`` config values (e.g. position="rope") must match the file's."""
        model, stored = checkpoint.load(path, FORMAT, FORMAT_VERSION, cls, expected)
        model.params = {name: value.astype(model.dtype) for name, value in stored.items()}
        return model
