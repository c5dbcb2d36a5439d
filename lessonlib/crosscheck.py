"""Adapters: real attention APIs wrapped in the probe's form ``fn(query, key, value, *, mask, causal)``.

Each adapter takes NumPy arrays query (L, E), key (S, E), value (S, D) and a mask of shape (L, S)
(or (S,) for a key-padding argument), hands them to the library in its own layout, and returns
the output (L, D) as float64 NumPy. torch and jax are imported inside the adapters, so this
module imports without them. :func:`probe_target` finds the adapter for a row of
``lessonlib.masks.MASK_CONVENTIONS``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lessonlib.attention import FullyMasked, scaled_dot_product_attention
from lessonlib.masks import MaskConvention, causal_mask
from lessonlib.probe import AttentionFn


def installed_version(distribution: str) -> str:
    """"name version" of an installed distribution, e.g. "torch 2.13.0+cpu" (the form of measured_on)."""
    return f"{distribution} {importlib.metadata.version(distribution)}"


def lessonlib_attention(*, fully_masked: FullyMasked = "zeros") -> AttentionFn:
    """lessonlib's scaled_dot_product_attention; ``causal`` uses causal_mask(L, S) with no align."""

    def attend(query, key, value, *, mask=None, causal=False):
        if causal:
            if mask is not None:
                raise ValueError("pass either a mask or causal=True, not both")
            mask = causal_mask(query.shape[-2], key.shape[-2])  # refuses L != S without an align
        return scaled_dot_product_attention(query, key, value, mask=mask, fully_masked=fully_masked).output

    return attend


def _torch_mask(mask: np.ndarray | None, dtype: object) -> object:
    """A NumPy mask as a torch tensor: boolean stays boolean, numbers take the attention dtype."""
    import torch

    if mask is None:
        return None
    mask = np.asarray(mask)
    return torch.as_tensor(mask, dtype=torch.bool if mask.dtype == bool else dtype)


def torch_sdpa(*, dtype: str = "float64") -> AttentionFn:
    """torch.nn.functional.scaled_dot_product_attention on (1, 1, L, E) tensors; causal = is_causal."""

    def attend(query, key, value, *, mask=None, causal=False):
        import torch
        import torch.nn.functional as F

        tdtype = getattr(torch, dtype)
        q, k, v = (torch.as_tensor(np.asarray(x), dtype=tdtype)[None, None] for x in (query, key, value))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=_torch_mask(mask, tdtype), is_causal=causal)
        return out[0, 0].to(torch.float64).numpy()  # (L, D)

    return attend


def torch_mha(argument: str = "attn_mask", *, need_weights: bool = True, dtype: str = "float64") -> AttentionFn:
    """torch.nn.MultiheadAttention, one head, identity projections, no bias, batch_first.

    With identity projections the module computes softmax(q k^T / sqrt(E) + mask) v, so the
    probe's inputs reach the attention unchanged. ``argument`` is "attn_mask" ((L, S) masks) or
    "key_padding_mask" ((S,) masks, given as (1, S)); ``causal`` passes is_causal=True.
    """
    if argument not in ("attn_mask", "key_padding_mask"):
        raise ValueError(f"argument must be 'attn_mask' or 'key_padding_mask', got {argument!r}")

    def attend(query, key, value, *, mask=None, causal=False):
        import torch

        tdtype = getattr(torch, dtype)
        width = query.shape[-1]
        if key.shape[-1] != width or value.shape[-1] != width:
            raise ValueError(f"this adapter needs equal widths, got query {query.shape}, key {key.shape}, "
                             f"value {value.shape}")
        mha = torch.nn.MultiheadAttention(width, 1, bias=False, batch_first=True, dtype=tdtype)
        mha.eval()
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.eye(width, dtype=tdtype).repeat(3, 1))  # W_q = W_k = W_v = I
            mha.out_proj.weight.copy_(torch.eye(width, dtype=tdtype))
            q, k, v = (torch.as_tensor(np.asarray(x), dtype=tdtype)[None] for x in (query, key, value))
            torch_mask = _torch_mask(mask, tdtype)
            if argument == "key_padding_mask" and torch_mask is not None:
                torch_mask = torch_mask[None]  # (1, S): one row per batch element
            out, _ = mha(q, k, v, need_weights=need_weights, is_causal=causal, **{argument: torch_mask})
        return out[0].to(torch.float64).numpy()  # (L, D)

    return attend


def jax_dot_product_attention(argument: str = "mask", *, dtype: str = "float32") -> AttentionFn:
    """jax.nn.dot_product_attention on (1, T, 1, E) arrays; ``argument`` is "mask" or "bias".

    float64 runs inside jax.enable_x64(True) (JAX computes in float32 unless x64 is on).
    """
    if argument not in ("mask", "bias"):
        raise ValueError(f"argument must be 'mask' or 'bias', got {argument!r}")

    def attend(query, key, value, *, mask=None, causal=False):
        import jax
        import jax.numpy as jnp

        with jax.enable_x64(dtype == "float64"):
            q, k, v = (jnp.asarray(np.asarray(x), dtype=dtype)[None, :, None, :] for x in (query, key, value))
            extra = {}
            if mask is not None:
                mask = np.asarray(mask)
                keep_type = mask.dtype == bool or argument == "mask"  # let "mask" see what it was given
                extra[argument] = jnp.asarray(mask if keep_type else mask.astype(dtype))[None, None]  # (1, 1, L, S)
            out = jax.nn.dot_product_attention(q, k, v, is_causal=causal, **extra)
            return np.asarray(out[0, :, 0, :], dtype=np.float64)  # (L, D)

    return attend


@dataclass(frozen=True)
class ProbeTarget:
    """How to probe one table row: the adapter, the mask's shape, and the distribution measured."""

    make_adapter: Callable[[], AttentionFn]
    key_only: bool  # the mask argument is (S,), one entry per key
    distribution: str  # whose version measured_on must name


_TARGETS: dict[tuple[str, str, str], ProbeTarget] = {
    ("lessonlib", "scaled_dot_product_attention", "mask"):
        ProbeTarget(lessonlib_attention, False, "lessonlib"),
    ("torch", "F.scaled_dot_product_attention", "attn_mask"):
        ProbeTarget(torch_sdpa, False, "torch"),
    ("torch", "nn.MultiheadAttention", "attn_mask"):
        ProbeTarget(lambda: torch_mha("attn_mask"), False, "torch"),
    ("torch", "nn.MultiheadAttention", "key_padding_mask"):
        ProbeTarget(lambda: torch_mha("key_padding_mask"), True, "torch"),
    ("torch", "nn.MultiheadAttention(need_weights=False)", "key_padding_mask"):
        ProbeTarget(lambda: torch_mha("key_padding_mask", need_weights=False), True, "torch"),
    ("jax", "jax.nn.dot_product_attention", "mask"):
        ProbeTarget(lambda: jax_dot_product_attention("mask"), False, "jax"),
    ("jax", "jax.nn.dot_product_attention", "bias"):
        ProbeTarget(lambda: jax_dot_product_attention("bias"), False, "jax"),
}


def probe_target(row: MaskConvention) -> ProbeTarget:
    """The adapter that re-derives ``row``; a KeyError names rows that have none."""
    try:
        return _TARGETS[(row.library, row.api, row.argument)]
    except KeyError:
        raise KeyError(
            f"no adapter for {row.library} {row.api} ({row.argument}); every row of "
            "MASK_CONVENTIONS needs one in lessonlib.crosscheck so a test can re-derive it"
        ) from None
