"""Hugging Face transformers decodes with a cache by aligning its causal mask bottom-right.

Notebook 02 (section 6) says so. A tiny LlamaModel is built from a config (nothing is
downloaded), with its query and key projections set to zero so that every score is 0 and the
weights show the mask alone. Two tokens fill the cache; two more are then fed as queries against
all four keys. Bottom-right alignment lets the new query i see keys 0..i + S - L.
"""

from __future__ import annotations

import numpy as np


def test_decoding_with_a_cache_is_bottom_right(transformers, torch):
    config = transformers.LlamaConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                      num_key_value_heads=1, intermediate_size=16, max_position_embeddings=16,
                                      attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    attention = model.layers[0].self_attn
    with torch.no_grad():
        attention.q_proj.weight.zero_()
        attention.k_proj.weight.zero_()
        prefill = model(input_ids=torch.zeros((1, 2), dtype=torch.long), use_cache=True)
        step = model(input_ids=torch.zeros((1, 2), dtype=torch.long), cache=prefill.cache, use_cache=True,
                     output_attentions=True)
    weights = step.attentions[0][0, 0].to(torch.float64).numpy()  # (L, S) = (2, 4)
    bottom_right = np.tril(np.ones((2, 4)), k=2)  # query i sees keys 0..i + 2
    np.testing.assert_allclose(weights, bottom_right / bottom_right.sum(axis=-1, keepdims=True), atol=1e-6)
