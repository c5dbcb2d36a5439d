"""Library facts that hold only under a condition; notebook 02 (Going deeper) states each condition.

- torch nn.MultiheadAttention with is_causal=True, need_weights=False and no key_padding_mask
  drops the attn_mask it is given and applies its own top-left causal mask; with need_weights=True
  it uses the mask as built.
- torch nn.MultiheadAttention's empty attn_mask row gives nan with need_weights=True (the default)
  and zeros with need_weights=False, as F.scaled_dot_product_attention does; measured on CPU.
- transformers' BertModel: config.is_decoder=True makes its self-attention causal, aligned
  bottom-right when it decodes with a cache; an empty
  attention_mask row is uniform under eager attention and zeros under sdpa (the default).

Every probe sets the scores to 0 (zero queries and keys, or zero query and key projections), so the
weights show the mask alone; with value = identity the output of the attention is its weights.
"""

from __future__ import annotations

import numpy as np

from lessonlib.crosscheck import torch_mha


def _rows(allowed: np.ndarray) -> np.ndarray:
    """Uniform weights over each row's allowed keys; (L, S) boolean (True = attend) -> (L, S)."""
    return allowed / allowed.sum(axis=-1, keepdims=True)


BOTTOM_RIGHT = np.tril(np.ones((2, 4), bool), k=2)  # 2 queries at the end of 4 keys (a cache)
TOP_LEFT = np.tril(np.ones((2, 4), bool))


def _mha_weights(*, mask_blocked: np.ndarray, causal: bool, need_weights: bool) -> np.ndarray:
    """(L, S) weights of one-head MultiheadAttention with zero scores; attn_mask True = blocked."""
    attend = torch_mha("attn_mask", need_weights=need_weights)
    n_queries, n_keys = mask_blocked.shape
    return attend(np.zeros((n_queries, n_keys)), np.zeros((n_keys, n_keys)), np.eye(n_keys),
                  mask=mask_blocked, causal=causal)


def test_mha_is_causal_without_weights_drops_the_built_mask(torch):
    dropped = _mha_weights(mask_blocked=~BOTTOM_RIGHT, causal=True, need_weights=False)
    np.testing.assert_allclose(dropped, _rows(TOP_LEFT), atol=1e-12)  # [[1,0,0,0],[.5,.5,0,0]]
    kept = _mha_weights(mask_blocked=~BOTTOM_RIGHT, causal=True, need_weights=True)
    np.testing.assert_allclose(kept, _rows(BOTTOM_RIGHT), atol=1e-12)
    plain = _mha_weights(mask_blocked=~BOTTOM_RIGHT, causal=False, need_weights=False)
    np.testing.assert_allclose(plain, _rows(BOTTOM_RIGHT), atol=1e-12)


def test_mha_empty_attn_mask_row_depends_on_need_weights(torch):
    blocked = np.zeros((2, 4), bool)
    blocked[1] = True  # query 1 may see no key
    with_weights = _mha_weights(mask_blocked=blocked, causal=False, need_weights=True)
    without = _mha_weights(mask_blocked=blocked, causal=False, need_weights=False)
    assert np.isnan(with_weights[1]).all()
    np.testing.assert_allclose(without[1], 0.0, atol=0)
    np.testing.assert_allclose(without[0], 0.25, atol=1e-12)


def _bert(transformers, torch, *, implementation: str, is_decoder: bool = False):
    config = transformers.BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                     intermediate_size=16, max_position_embeddings=16, is_decoder=is_decoder,
                                     attn_implementation=implementation)
    torch.manual_seed(0)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    attention = model.encoder.layer[0].attention.self
    with torch.no_grad():
        for projection in (attention.query, attention.key):
            projection.weight.zero_()
            projection.bias.zero_()
        attention.value.weight.copy_(torch.eye(8))
        attention.value.bias.zero_()
    return model, attention


def _self_attention_output(model, attention, torch, attention_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The self-attention's output (S, 8) and its input hidden states (S, 8), for one sequence."""
    seen = {}

    def record_input(_module, args, kwargs) -> None:
        seen["in"] = args[0] if args else kwargs["hidden_states"]  # (1, S, 8)

    def record_output(_module, _args, out) -> None:
        seen["out"] = out[0]  # (1, S, 8), before the output projection

    hooks = [attention.register_forward_pre_hook(record_input, with_kwargs=True),
             attention.register_forward_hook(record_output)]
    try:
        with torch.no_grad():
            model(input_ids=torch.arange(1, 5)[None], attention_mask=torch.as_tensor(attention_mask)[None])
    finally:
        for hook in hooks:
            hook.remove()
    return seen["out"][0].double().numpy(), seen["in"][0].double().numpy()


def _bert_weights(model, torch, n_tokens: int, **kwargs) -> tuple[np.ndarray, object]:
    """(L, S) weights of the one head for n_tokens new tokens, and the model's output (its cache)."""
    with torch.no_grad():
        out = model(input_ids=torch.arange(1, n_tokens + 1)[None], output_attentions=True, **kwargs)
    return out.attentions[0][0, 0].double().numpy(), out


def test_bert_is_decoder_is_causal_and_bottom_right_with_a_cache(transformers, torch):
    encoder, _ = _bert(transformers, torch, implementation="eager")
    weights, _ = _bert_weights(encoder, torch, 4)
    np.testing.assert_allclose(weights, 0.25, atol=1e-6)  # an encoder: every token sees every token
    decoder, _ = _bert(transformers, torch, implementation="eager", is_decoder=True)
    weights, _ = _bert_weights(decoder, torch, 4)
    np.testing.assert_allclose(weights, _rows(np.tril(np.ones((4, 4), bool))), atol=1e-6)
    _, prefill = _bert_weights(decoder, torch, 2, use_cache=True)
    weights, _ = _bert_weights(decoder, torch, 2, use_cache=True, cache=prefill.cache)  # (2, 4)
    np.testing.assert_allclose(weights, _rows(BOTTOM_RIGHT), atol=1e-6)


def test_bert_empty_row_uniform_under_eager_zeros_under_sdpa(transformers, torch):
    no_key = np.zeros(4, dtype=np.int64)  # attention_mask all 0: every query sees no key
    eager_out, hidden = _self_attention_output(*_bert(transformers, torch, implementation="eager"), torch, no_key)
    np.testing.assert_allclose(eager_out, np.broadcast_to(hidden.mean(axis=0), hidden.shape), atol=1e-5)
    sdpa_out, _ = _self_attention_output(*_bert(transformers, torch, implementation="sdpa"), torch, no_key)
    np.testing.assert_allclose(sdpa_out, 0.0, atol=1e-6)
    default, _ = _bert(transformers, torch, implementation=None)
    assert default.config._attn_implementation == "sdpa"  # what a learner gets without asking
