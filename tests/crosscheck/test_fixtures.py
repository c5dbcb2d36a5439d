"""The lesson's two fixtures through torch SDPA and jax.nn.dot_product_attention print the lesson's lines."""

from __future__ import annotations

import numpy as np
import pytest

from lessonlib.fixtures import MASKING, SCALING, format_masking, format_scaling

DTYPES = ("float32", "float64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaling_fixture_through_torch(torch, dtype):
    F, t = torch.nn.functional, getattr(torch, dtype)
    query = torch.tensor([SCALING.query], dtype=t)  # (1, 2)
    keys = torch.tensor(SCALING.keys, dtype=t)  # (2, 2)
    weights = F.scaled_dot_product_attention(query, keys, torch.eye(2, dtype=t))[0]  # (2,): value = identity
    values = torch.tensor(SCALING.values, dtype=t)[:, None]  # (2, 1)
    context = F.scaled_dot_product_attention(query, keys, values)[0, 0]  # default scale 1/sqrt(2)
    assert format_scaling(weights.tolist(), context.item()) == SCALING.expected_output


@pytest.mark.parametrize("dtype", DTYPES)
def test_masking_fixture_through_torch(torch, dtype):
    F, t = torch.nn.functional, getattr(torch, dtype)
    query = torch.ones((1, 1), dtype=t)  # (1, 1): with scale 1, query @ key^T is the scores row
    keys = torch.tensor(MASKING.scores, dtype=t)[:, None]  # (3, 1)
    allowed = torch.tensor([MASKING.allowed])  # (1, 3), True = attend (checked by the probe)
    weights = F.scaled_dot_product_attention(query, keys, torch.eye(3, dtype=t), attn_mask=allowed, scale=1.0)[0]
    assert format_masking(weights.tolist()) == MASKING.expected_output


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaling_fixture_through_jax(jax, dtype):
    jnp = jax.numpy
    with jax.enable_x64(dtype == "float64"):
        query = jnp.asarray([SCALING.query], dtype)[None, :, None]  # (1, 1, 1, 2) = (B, L, heads, E)
        keys = jnp.asarray(SCALING.keys, dtype)[None, :, None]  # (1, 2, 1, 2)
        weights = jax.nn.dot_product_attention(query, keys, jnp.eye(2, dtype=dtype)[None, :, None])[0, 0, 0]
        values = jnp.asarray(SCALING.values, dtype)[:, None].repeat(2, axis=1)  # (2, 2): JAX wants d_v = d_k
        context = jax.nn.dot_product_attention(query, keys, values[None, :, None])[0, 0, 0, 0]
        assert weights.dtype == dtype
        assert format_scaling(np.asarray(weights).tolist(), float(context)) == SCALING.expected_output


@pytest.mark.parametrize("dtype", DTYPES)
def test_masking_fixture_through_jax(jax, dtype):
    jnp = jax.numpy
    with jax.enable_x64(dtype == "float64"):
        query = jnp.asarray([[1.0, 0.0, 0.0]], dtype)[None, :, None]  # (1, 1, 1, 3): zero-padded to d_v = 3
        keys = jnp.asarray([[s, 0.0, 0.0] for s in MASKING.scores], dtype)[None, :, None]  # (1, 3, 1, 3)
        allowed = jnp.asarray(MASKING.allowed).reshape(1, 1, 1, 3)  # (B, heads, L, S)
        value = jnp.eye(3, dtype=dtype)[None, :, None]  # (1, 3, 1, 3)
        weights = jax.nn.dot_product_attention(query, keys, value, mask=allowed, scale=1.0)[0, 0, 0]
        assert weights.dtype == dtype
        assert format_masking(np.asarray(weights).tolist()) == MASKING.expected_output
