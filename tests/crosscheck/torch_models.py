"""The pieces the torch rebuilds of lessonlib.training's models share, written from the formulas.

Each works on float64 tensors with torch's own operations: the absolute position tables, RoPE's
rotation of interleaved pairs, and one multi-head attention with ALiBi, T5's buckets and the
causal mask filled with -inf before the softmax.
"""

from __future__ import annotations

import math

from lessonlib import relative_position_bucket
from lessonlib.training.model import RELATIVE_BUCKETS, RELATIVE_MAX_DISTANCE


def add_position_table(torch, position: str, x, params: dict):
    """``x`` (B, L, d) plus the sinusoidal or learned table; unchanged for the other mechanisms."""
    length, d = x.shape[1], x.shape[2]
    if position == "sinusoidal":
        pos = torch.arange(length, dtype=torch.float64)
        angle = pos[:, None] / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
        pe = torch.zeros(length, d, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return x + pe
    if position == "learned":
        return x + params["pos_table"][:length]
    return x


def rotate(torch, z):
    """RoPE on ``z`` (B, H, L, d_h): pairs (2i, 2i+1) turned by pos * 10000^(-2i/d_h)."""
    length, d_h = z.shape[-2], z.shape[-1]
    pos = torch.arange(length, dtype=torch.float64)
    theta = pos[:, None] * 10000.0 ** (-torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)  # (L, d_h/2)
    a, b = z[..., 0::2], z[..., 1::2]
    return torch.stack([a * torch.cos(theta) - b * torch.sin(theta),
                        a * torch.sin(theta) + b * torch.cos(theta)], dim=-1).flatten(-2)


def multi_head_attention(torch, position: str, x, params: dict, prefix: str, n_heads: int, causal: bool):
    """Concatenated heads (B, L, d) before the output projection, for input ``x`` (B, L, d).

    Weights are read as ``params[prefix + "wq"]`` and so on; T5's buckets are bidirectional
    exactly when the attention is not causal.
    """
    n_batch, length, d = x.shape
    d_h = d // n_heads
    q, k, v = ((x @ params[prefix + m]).view(n_batch, length, n_heads, d_h).transpose(1, 2)  # (B, H, L, d_h)
               for m in ("wq", "wk", "wv"))
    if position == "rope":
        q, k = rotate(torch, q), rotate(torch, k)
    offset = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (L, L) key - query
    s = q @ k.transpose(-1, -2) / math.sqrt(d_h)  # (B, H, L, L)
    if position == "alibi":
        slopes = torch.tensor([2.0 ** (-8.0 * (j + 1) / n_heads) for j in range(n_heads)], dtype=torch.float64)
        s = s - slopes[:, None, None] * offset.abs()
    elif position == "relative":
        buckets = torch.as_tensor(relative_position_bucket(
            offset.numpy(), bidirectional=not causal, n_buckets=RELATIVE_BUCKETS,
            max_distance=RELATIVE_MAX_DISTANCE))
        s = s + params[prefix + "rel_bias"][buckets].permute(2, 0, 1)
    if causal:
        s = s.masked_fill(offset > 0, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(n_batch, length, d)
