"""The character language model rebuilt in torch from the same weights: logits, loss and gradients agree.

The torch version is written from the formulas in lessonlib.training.lm's docstring with torch's
own pieces (nn.functional.layer_norm, gelu(approximate="tanh"), softmax after a -inf fill,
cross_entropy), its own RoPE, ALiBi slopes and bucket lookup, in float64; autograd differentiates it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lessonlib import relative_position_bucket
from lessonlib.training import POSITIONS
from lessonlib.training.lm import CharModel
from lessonlib.training.model import RELATIVE_BUCKETS, RELATIVE_MAX_DISTANCE


def torch_logits(torch, model: CharModel, params: dict, tokens: np.ndarray):
    """(B, L, V) logits of ``model``'s architecture computed by torch on ``params`` (float64 tensors)."""
    F = torch.nn.functional
    n_batch, length = tokens.shape
    h, d_h, d = model.n_heads, model.d_head, model.d_model
    x = params["embed"][torch.as_tensor(tokens)]  # (B, L, d)
    pos = torch.arange(length, dtype=torch.float64)
    if model.position == "sinusoidal":
        angle = pos[:, None] / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
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
        n = f"blocks.{layer}."
        a = F.layer_norm(x, (d,), params[n + "ln1_g"], params[n + "ln1_b"], eps=1e-5)
        q, k, v = ((a @ params[n + m]).view(n_batch, length, h, d_h).transpose(1, 2) for m in ("wq", "wk", "wv"))
        if model.position == "rope":
            q, k = rotate(q), rotate(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(d_h)  # (B, H, L, L)
        if model.position == "alibi":
            slopes = torch.tensor([2.0 ** (-8.0 * (j + 1) / h) for j in range(h)], dtype=torch.float64)
            s = s - slopes[:, None, None] * offset.abs()
        elif model.position == "relative":
            buckets = torch.as_tensor(relative_position_bucket(offset.numpy(), bidirectional=False,
                                                               n_buckets=RELATIVE_BUCKETS,
                                                               max_distance=RELATIVE_MAX_DISTANCE))
            s = s + params[n + "rel_bias"][buckets].permute(2, 0, 1)
        w = torch.softmax(s.masked_fill(offset > 0, float("-inf")), dim=-1)
        x = x + (w @ v).transpose(1, 2).reshape(n_batch, length, d) @ params[n + "wo"]
        m = F.layer_norm(x, (d,), params[n + "ln2_g"], params[n + "ln2_b"], eps=1e-5)
        hidden = F.gelu(m @ params[n + "w1"] + params[n + "c1"], approximate="tanh")  # (B, L, f)
        x = x + hidden @ params[n + "w2"] + params[n + "c2"]
    return F.layer_norm(x, (d,), params["lnf_g"], params["lnf_b"], eps=1e-5) @ params["unembed"]


@pytest.mark.parametrize("position", POSITIONS)
def test_logits_loss_and_every_gradient_match_torch(torch, position):
    model = CharModel(11, d_model=16, n_heads=4, n_layers=2, position=position, max_length=16, seed=3,
                      dtype="float64")
    rng = np.random.default_rng(4)
    for name, value in model.params.items():  # off the initial values, so unit gains and zero biases matter
        model.params[name] = value + rng.normal(0.0, 0.3, value.shape)
    tokens = rng.integers(0, 11, (3, 12))  # (B, L)
    targets = rng.integers(-1, 11, (3, 12))  # (B, L), -1 = not scored
    params = {n: torch.tensor(v, requires_grad=True) for n, v in model.params.items()}
    logits = torch_logits(torch, model, params, tokens)
    np.testing.assert_allclose(model.logits(tokens), logits.detach().numpy(), rtol=0, atol=1e-10)
    reference = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), torch.as_tensor(targets).reshape(-1),
                                                  ignore_index=-1)
    reference.backward()
    loss, grads = model.loss_and_grads(tokens, targets)
    assert abs(loss - reference.item()) < 1e-10
    for name in model.params:
        np.testing.assert_allclose(grads[name], params[name].grad.numpy(), rtol=0, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("position", ("rope", "learned"))
def test_float32_forward_stays_close_to_torch_float64(torch, position):
    model = CharModel(11, d_model=16, n_heads=4, n_layers=2, position=position, max_length=16, seed=5)
    tokens = np.random.default_rng(6).integers(0, 11, (2, 16))
    params = {n: torch.tensor(v.astype(np.float64)) for n, v in model.params.items()}
    reference = torch_logits(torch, model, params, tokens).numpy()
    np.testing.assert_allclose(model.logits(tokens), reference, rtol=0, atol=1e-4)
