"""The NumPy training model rebuilt in torch from the same parameters: loss and every gradient agree.

The torch version is written independently from the formulas (the attention of torch_models.py:
its own RoPE, ALiBi bias and bucket lookup, masking with -inf before softmax), in float64, and
autograd differentiates it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from torch_models import add_position_table, multi_head_attention

from lessonlib.training import POSITIONS, AttentionModel


def torch_loss(torch, model: AttentionModel, params: dict, tokens: np.ndarray, targets: np.ndarray):
    """The model's mean cross-entropy, computed with torch operations on ``params`` (torch tensors)."""
    x = add_position_table(torch, model.position, params["embed"][torch.as_tensor(tokens)], params)  # (B, L, d)
    for layer in range(model.n_layers):
        name = f"layers.{layer}."
        heads = multi_head_attention(torch, model.position, x, params, name, model.n_heads, model.causal)
        x = x + heads @ params[name + "wo"]
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
