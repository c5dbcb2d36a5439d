"""Adapters: real attention APIs wrapped in the probe's form ``fn(query, key, value, *, mask, causal)``.

Each adapter takes NumPy arrays query (L, E), key (S, E), value (S, D) and a mask of shape (L, S)
(or (S,) for a key-padding argument), hands them to the library in its own layout, and returns
the output (L, D) as float64 NumPy. torch, jax, flax, keras and transformers are imported inside
the adapters, so this module imports without them. :func:`probe_target` finds the adapter for a row of
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


def _identity_like(shape: tuple[int, ...]) -> np.ndarray:
    """An identity map in a projection kernel of shape (n, 1, n) or (1, n, n): one head, no mixing."""
    square = [n for n in shape if n != 1]
    if len(square) != 2 or square[0] != square[1]:
        raise ValueError(f"expected a one-head kernel (n, 1, n) or (1, n, n), got shape {shape}")
    return np.eye(square[0]).reshape(shape)


def flax_multi_head(*, dtype: str = "float32") -> AttentionFn:
    """flax.linen.MultiHeadDotProductAttention, one head, identity projections, no bias.

    The mask is handed over as (1, 1, L, S) (batch, heads, queries, keys). The module has no
    causal switch (flax's make_causal_mask builds a square mask from one sequence), so
    ``causal`` raises NotImplementedError.
    """

    def attend(query, key, value, *, mask=None, causal=False):
        if causal:
            raise NotImplementedError("flax.linen.MultiHeadDotProductAttention has no causal argument")
        import flax.linen as nn
        import jax
        import jax.numpy as jnp

        width = query.shape[-1]
        if key.shape[-1] != width or value.shape[-1] != width:
            raise ValueError(f"this adapter needs equal widths, got query {query.shape}, key {key.shape}, "
                             f"value {value.shape}")
        module = nn.MultiHeadDotProductAttention(num_heads=1, qkv_features=width, out_features=width,
                                                 use_bias=False, dtype=dtype, param_dtype=dtype)
        q, k, v = (jnp.asarray(np.asarray(x), dtype=dtype)[None] for x in (query, key, value))  # (1, T, E)
        params = module.init(jax.random.PRNGKey(0), q, k, v)
        params = jax.tree_util.tree_map(lambda w: jnp.asarray(_identity_like(w.shape), dtype=dtype), params)
        extra = {} if mask is None else {"mask": jnp.asarray(np.asarray(mask))[None, None]}  # (1, 1, L, S)
        out = module.apply(params, q, k, v, **extra)  # (1, L, E)
        return np.asarray(out[0], dtype=np.float64)  # (L, D)

    return attend


def _keras():
    """keras on the jax backend: KERAS_BACKEND is set before keras is first imported."""
    import os
    import sys

    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "jax"
    import keras

    if keras.backend.backend() != "jax":
        raise RuntimeError(f"keras was already imported with the {keras.backend.backend()!r} backend; the "
                           "cross-check measures it on 'jax' (set KERAS_BACKEND=jax before importing keras)")
    return keras


def keras_multi_head(*, return_attention_scores: bool = False) -> AttentionFn:
    """keras.layers.MultiHeadAttention (jax backend), one head, identity projections, no bias.

    ``attention_mask`` is (1, L, S); ``causal`` passes use_causal_mask=True. With
    ``return_attention_scores`` keras takes its explicit softmax path instead of
    ``ops.dot_product_attention``, which treats a row with no allowed key differently.
    """

    def attend(query, key, value, *, mask=None, causal=False):
        keras = _keras()
        width = query.shape[-1]
        if key.shape[-1] != width or value.shape[-1] != width:
            raise ValueError(f"this adapter needs equal widths, got query {query.shape}, key {key.shape}, "
                             f"value {value.shape}")
        layer = keras.layers.MultiHeadAttention(num_heads=1, key_dim=width, use_bias=False)
        q, k, v = (np.asarray(x, dtype=np.float32)[None] for x in (query, key, value))  # (1, T, E)
        layer(q, v, key=k)  # builds the weights
        layer.set_weights([_identity_like(w.shape).astype(np.float32) for w in layer.get_weights()])
        extra = {} if mask is None else {"attention_mask": np.asarray(mask)[None]}  # (1, L, S)
        out = layer(q, v, key=k, use_causal_mask=causal, return_attention_scores=return_attention_scores, **extra)
        if return_attention_scores:
            out = out[0]
        return np.asarray(out[0], dtype=np.float64)  # (L, D)

    return attend


def transformers_attention_mask(*, dtype: str = "float32") -> AttentionFn:
    """Hugging Face transformers' ``attention_mask`` on a tiny, randomly initialised BertModel.

    The model is built from a config (one layer, one head, eager attention): nothing is
    downloaded. Its query and key projections are set to zero, so every score is 0 and the mask
    alone decides the weights; the adapter returns the weights the model reports
    (``output_attentions``), (L, S), which is what the probe's value = identity reads. The inputs'
    content is ignored. ``attention_mask`` is one entry per key, (S,) given as (1, S); an encoder's
    queries are its S tokens, and the first L rows are returned (a padding mask treats every query
    alike). BERT is an encoder without a causal switch, so ``causal`` raises
    NotImplementedError.
    """

    def attend(query, key, value, *, mask=None, causal=False):
        if causal:
            raise NotImplementedError("BertModel (an encoder) has no causal argument")
        import torch
        from transformers import BertConfig, BertModel

        n_queries, n_keys = query.shape[0], key.shape[0]
        if n_queries > n_keys:
            raise ValueError(f"an encoder attends within one sequence of S={n_keys} tokens; L={n_queries} "
                             "queries would need more")
        config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                            intermediate_size=16, max_position_embeddings=16, attn_implementation="eager")
        torch.manual_seed(0)
        model = BertModel(config, add_pooling_layer=False).to(getattr(torch, dtype)).eval()
        attention = model.encoder.layer[0].attention.self
        with torch.no_grad():
            for projection in (attention.query, attention.key):
                projection.weight.zero_()
                projection.bias.zero_()
            extra = {}
            if mask is not None:
                mask = np.asarray(mask)
                extra["attention_mask"] = torch.as_tensor(mask if mask.dtype == bool else mask.astype(dtype))[None]
            out = model(input_ids=torch.zeros((1, n_keys), dtype=torch.long), output_attentions=True, **extra)
        return out.attentions[0][0, 0, :n_queries].to(torch.float64).numpy()  # (L, S): the first L query rows

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
    ("flax", "linen.MultiHeadDotProductAttention", "mask"):
        ProbeTarget(flax_multi_head, False, "flax"),
    ("keras", "layers.MultiHeadAttention", "attention_mask"):
        ProbeTarget(keras_multi_head, False, "keras"),
    ("keras", "layers.MultiHeadAttention(return_attention_scores=True)", "attention_mask"):
        ProbeTarget(lambda: keras_multi_head(return_attention_scores=True), False, "keras"),
    ("transformers", "BertModel (eager attention)", "attention_mask"):
        ProbeTarget(transformers_attention_mask, True, "transformers"),
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
