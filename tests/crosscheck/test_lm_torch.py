"""The character language model rebuilt in torch from the same weights: logits, loss and gradients agree.

The torch version is written from the formulas in lessonlib.training.lm's docstring with torch's
own pieces (nn.functional.layer_norm, gelu(approximate="tanh"), cross_entropy) and the attention of
torch_models.py, in float64; autograd differentiates it.
"""

from __future__ import annotations

import numpy as np
import pytest
from torch_models import add_position_table, multi_head_attention

from lessonlib.training import POSITIONS
from lessonlib.training.lm import CharModel


def torch_logits(torch, model: CharModel, params: dict, tokens: np.ndarray):
    """(B, L, V) logits of ``model``'s architecture computed by torch on ``params`` (float64 tensors)."""
    F = torch.nn.functional
    d = model.d_model
    x = add_position_table(torch, model.position, params["embed"][torch.as_tensor(tokens)], params)  # (B, L, d)
    for layer in range(model.n_layers):
        n = f"blocks.{layer}."
        a = F.layer_norm(x, (d,), params[n + "ln1_g"], params[n + "ln1_b"], eps=1e-5)
        heads = multi_head_attention(torch, model.position, a, params, n, model.n_heads, causal=True)
        x = x + heads @ params[n + "wo"]
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
