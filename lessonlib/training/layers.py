"""The pieces of a transformer block that notebook 06's models lack, each with its backward pass.

    LN(x)   = (x - mean) / sqrt(var + 1e-5) * g + b            over the last axis
    GELU(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    the tanh approximation (GPT-2)
    CE      = mean over scored positions of -log softmax(logits)[target]
"""

from __future__ import annotations

import math

import numpy as np

LN_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, xhat, rstd): y = xhat g + b, xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), last axis."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., d)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + LN_EPS)  # (..., 1)
    xhat = xc * rstd  # (..., d)
    return xhat * g + b, xhat, rstd


def layer_norm_backward(dy: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, g: np.ndarray):
    """(dx, dg, db) of LN, from dy (..., d)."""
    dxhat = dy * g  # (..., d)
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    d = dy.shape[-1]
    return dx, (dy * xhat).reshape(-1, d).sum(axis=0), dy.reshape(-1, d).sum(axis=0)


def gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y, t): y = x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), t the tanh (kept for the backward pass)."""
    t = np.tanh(GELU_C * (x + 0.044715 * x * x * x))
    return 0.5 * x * (1.0 + t), t


def gelu_backward(dy: np.ndarray, x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """d loss / d x of GELU, from dy and what :func:`gelu` kept."""
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))


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
