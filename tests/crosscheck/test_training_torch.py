"""The NumPy training model rebuilt in torch from the same parameters: loss and every gradient agree.

The torch version is written independently from the formulas (its own RoPE, ALiBi bias and
bucket lookup, masking with -inf before softmax), in float64, and autograd differentiates it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from lessonlib import relative_position_bucket
from lessonlib.training import POSITIONS, AttentionModel
from lessonlib.training.model import RELATIVE_BUCKETS, RELATIVE_MAX_DISTANCE


def torch_loss(torch, model: AttentionModel, params: dict, tokens: np.ndarray, targets: np.ndarray):
    """The model's mean cross-entropy, computed with torch operations on ``params`` (torch tensors)."""
    n_batch, length = tokens.shape
    h, d_h, d = model.n_heads, model.d_head, model.d_model
    t = torch.as_tensor(tokens)
    x = params["embed"][t]  # (B, L, d)
    pos = torch.arange(length, dtype=torch.float64)
    if model.position == "sinusoidal":
        i = torch.arange(0, d, 2, dtype=torch.float64)
        angle = pos[:, None] / 10000.0 ** (i / d)  # (L, d/2)
        pe = torch.zeros(length, d, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        x = x + pe
    elif model.position == "learned":
        x = x + params["pos_table"][:length]
    offset = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (L, L) key - query

    def rotate(z):  # interleaved pairs (2i, 2i+1) by pos * 10000^(-2i/d_h)
        theta = pos[:, None] * 10000.0 ** (-torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)  # (L, d_h/2)
        a, b = z[..., 0::2], z[..., 1::2]
        return torch.stack([a * torch.cos(theta) - b * torch.sin(theta),
                            a * torch.sin(theta) + b * torch.cos(theta)], dim=-1).flatten(-2)

    for layer in range(model.n_layers):
        name = f"layers.{layer}."

        q, k, v = ((x @ params[name + m]).view(n_batch, length, h, d_h).transpose(1, 2)  # (B, H, L, d_h)
                   for m in ("wq", "wk", "wv"))
        if model.position == "rope":
            q, k = rotate(q), rotate(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(d_h)  # (B, H, L, L)
        if model.position == "alibi":
            slopes = torch.tensor([2.0 ** (-8.0 * (j + 1) / h) for j in range(h)], dtype=torch.float64)
            s = s - slopes[:, None, None] * offset.abs()
        elif model.position == "relative":
            buckets = torch.as_tensor(relative_position_bucket(
                offset.numpy(), bidirectional=not model.causal, n_buckets=RELATIVE_BUCKETS,
                max_distance=RELATIVE_MAX_DISTANCE))
            s = s + params[name + "rel_bias"][buckets].permute(2, 0, 1)
        if model.causal:
            s = s.masked_fill(offset > 0, float("-inf"))
        w = torch.softmax(s, dim=-1)
        o = (w @ v).transpose(1, 2).reshape(n_batch, length, d)
        x = x + o @ params[name + "wo"]
    logits = x @ params["unembed"] + params["unembed_bias"]  # (B, L, V)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, model.vocab_size),
                                             torch.as_tensor(targets).reshape(-1), ignore_index=-1)


@pytest.mark.parametrize(("position", "causal", "n_layers"),
                         list(itertools.product(POSITIONS, (False, True), (1, 2))))
def test_loss_and_every_gradient_match_torch_autograd(torch, position, causal, n_layers):
    model = AttentionModel(7, d_model=8, n_heads=2, n_layers=n_layers, position=position, causal=causal,
                           max_length=12, seed=3)
    rng = np.random.default_rng(4)
    for name, value in model.params.items():  # off the initial values, so the zero biases matter too
        model.params[name] = value + rng.normal(0.0, 0.3, value.shape)
    tokens = rng.integers(0, 7, (3, 9))  # (B, L)
    targets = rng.integers(-1, 7, (3, 9))  # (B, L), -1 = not scored
    loss, grads = model.loss_and_grads(tokens, targets)
    params = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in model.params.items()}
    reference = torch_loss(torch, model, params, tokens, targets)
    reference.backward()
    assert abs(loss - reference.item()) < 1e-8
    for name in model.params:
        np.testing.assert_allclose(grads[name], params[name].grad.numpy(), rtol=0, atol=1e-8, err_msg=name)
