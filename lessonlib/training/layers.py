"""The pieces of a transformer block that notebook 06's models lack, each with its backward pass.

    LN(x)   = (x - mean) / sqrt(var + 1e-5) * g + b            over the last axis
    GELU(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    the tanh approximation (GPT-2)
    CE      = mean over scored positions of -log softmax(logits)[target]

Two fast paths of the language model's engine, each checked against the reference it replaces
(tests/test_lm.py plugs the reference in and compares losses): a causal softmax that adds a
precomputed 0 / -inf fill instead of calling :func:`lessonlib.masked_softmax`, and a RoPE
rotation in the activations' own dtype from cos/sin tables read off :func:`lessonlib.position.rope`.
"""

from __future__ import annotations

import math

import numpy as np

from lessonlib._checks import as_float_array
from lessonlib.position import rope

LN_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, xhat, rstd): y = xhat g + b, xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), last axis."""
    xhat = x - x.mean(axis=-1, keepdims=True)  # (..., d), centred; scaled in place below
    rstd = np.einsum("...i,...i->...", xhat, xhat)[..., None]  # (..., 1): sum of squares, one pass
    rstd *= 1.0 / x.shape[-1]
    rstd += LN_EPS
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    xhat *= rstd
    y = xhat * g  # (..., d)
    y += b
    return y, xhat, rstd


def layer_norm_backward(dy: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, g: np.ndarray):
    """(dx, dg, db) of LN, from dy (..., d)."""
    d = dy.shape[-1]
    dxhat = dy * g  # (..., d)
    proj = np.einsum("...i,...i->...", dxhat, xhat)[..., None]  # (..., 1): sum of dxhat * xhat
    proj *= 1.0 / d
    dx = xhat * proj  # (..., d)
    dx += dxhat.mean(axis=-1, keepdims=True)
    np.subtract(dxhat, dx, out=dx)
    dx *= rstd
    dg = np.einsum("ni,ni->i", dy.reshape(-1, d), xhat.reshape(-1, d))  # (d,)
    return dx, dg, dy.reshape(-1, d).sum(axis=0)


def gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y, t): y = x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), t the tanh (kept for the backward pass).

    ``x`` is checked first (real, finite, not empty); the model's forward pass calls the unchecked
    :func:`gelu_unchecked` on values it made itself.
    """
    return gelu_unchecked(as_float_array(x, "x"))


def gelu_unchecked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gelu` without the check of ``x``: the hot loop of the forward pass."""
    t = 0.044715 * x  # (..., f), in place below: it is a hot loop
    t *= x
    t *= x
    t += x
    t *= GELU_C
    np.tanh(t, out=t)  # tanh(sqrt(2/pi)(x + 0.044715 x^3))
    y = t + 1.0  # (..., f)
    y *= x
    y *= 0.5
    return y, t


def gelu_backward(dy: np.ndarray, x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """d loss / d x of GELU, from dy and what :func:`gelu` kept; ``t`` is used up (overwritten): it is a hot loop.

    dGELU/dx = (1 + t) / 2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
             = (1 + t) / 2 * (1 + A (1 - t)),   A = sqrt(2/pi) x (1 + 3 * 0.044715 x^2)
    """
    inner = x * x  # (..., f)
    inner *= 3 * 0.044715 * GELU_C
    inner += GELU_C
    inner *= x  # A
    np.subtract(1.0, t, out=t)  # 1 - t
    inner *= t
    inner += 1.0  # 1 + A (1 - t)
    np.subtract(2.0, t, out=t)  # 1 + t
    inner *= t
    inner *= dy
    inner *= 0.5
    return inner


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """(mean -log p[target] over scored positions as float64, d loss / d logits (B, L, V))."""
    scored = targets >= 0  # (B, L)
    n_scored = int(scored.sum())
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (B, L, V)
    log_z = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (B, L, 1)
    log_probs = shifted - log_z  # (B, L, V)
    picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], axis=-1)[..., 0]  # (B, L)
    loss = float(-picked.sum(where=scored, dtype=np.float64) / n_scored)
    d_logits = np.exp(log_probs)  # (B, L, V)
    rows, cols = np.nonzero(scored)
    d_logits[rows, cols, targets[rows, cols]] -= 1.0
    d_logits *= (scored[..., None] / logits.dtype.type(n_scored)).astype(logits.dtype)
    return loss, d_logits


def causal_fill(allowed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """0 where ``allowed``, -inf elsewhere: added to the scores, it excludes the keys before the softmax."""
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


def softmax_with_fill(scores: np.ndarray, fill: np.ndarray | None) -> np.ndarray:
    """softmax(scores + fill) over the last axis, in place in ``scores`` (returned); every row must keep a key.

    ``fill`` None: every key is allowed (one query at the end of the keys).
    """
    s = scores  # (..., S)
    if fill is not None:
        s += fill
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def rotation_tables(positions: np.ndarray, d: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), each (L, d/2), of RoPE's angles pos * 10000^(-2i/d), read off lessonlib.position.rope.

    Rotating the unit pair (1, 0) by an angle gives (cos, sin), so the convention stays in one place.
    """
    unit = np.zeros((len(positions), d))  # (L, d)
    unit[:, 0::2] = 1.0
    turned = rope(unit, positions)  # (L, d): (cos, sin) in each interleaved pair
    return turned[:, 0::2].astype(dtype), turned[:, 1::2].astype(dtype)


def rotate_pairs(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate interleaved pairs (2i, 2i+1) of x (..., L, d) by the angles of (cos, sin) (L, d/2); -sin undoes it."""
    first, second = x[..., 0::2], x[..., 1::2]  # (..., L, d/2) each
    out = np.empty_like(x)  # (..., L, d)
    out[..., 0::2] = first * cos - second * sin
    out[..., 1::2] = first * sin + second * cos
    return out
