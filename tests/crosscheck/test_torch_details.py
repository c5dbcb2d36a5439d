"""Two torch facts notebook 02 states in its Going deeper part, measured on the installed torch.

- F.scaled_dot_product_attention's default scale is 1/sqrt(E), E the width of the query (the
  last axis of query and key), whatever the value width;
- a 3-D attn_mask (N, L, S) is broadcast against (N, H, L, S) from the right, so with N == H it is
  silently read as one mask per *head*, (H, L, S), not one per batch element.
"""

from __future__ import annotations

import numpy as np

import lessonlib as L


def test_sdpa_default_scale_comes_from_the_query_width(torch):
    rng = np.random.default_rng(0)
    query, key = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))  # (L, E), (S, E): E = 4
    value = rng.normal(size=(5, 16))  # (S, Ev): Ev = 16
    q, k, v = (torch.from_numpy(x)[None] for x in (query, key, value))  # (1, T, width)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v)[0].numpy()  # (L, Ev)
    by_query_width = L.scaled_dot_product_attention(query, key, value, scale=1 / np.sqrt(4)).output
    by_value_width = L.scaled_dot_product_attention(query, key, value, scale=1 / np.sqrt(16)).output
    np.testing.assert_allclose(theirs, by_query_width, rtol=1e-12, atol=1e-12)
    assert np.abs(theirs - by_value_width).max() > 1e-3


def test_sdpa_reads_a_batch_mask_as_a_head_mask_when_n_equals_h(torch):
    n = h = 2
    rng = np.random.default_rng(1)
    query, key, value = (rng.normal(size=(n, h, 3, 4)) for _ in range(3))  # (N, H, L, E)
    per_batch = np.ones((n, 3, 3), bool)  # (N, L, S): meant as one mask per batch element
    per_batch[1] = np.tril(per_batch[1])  # batch element 1 causal, element 0 unmasked
    q, k, v = (torch.from_numpy(x) for x in (query, key, value))
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(per_batch)).numpy()
    as_meant = L.scaled_dot_product_attention(query, key, value, mask=per_batch[:, None]).output  # (N, 1, L, S)
    as_heads = L.scaled_dot_product_attention(query, key, value, mask=per_batch[None]).output  # (1, H, L, S)
    np.testing.assert_allclose(theirs, as_heads, rtol=1e-12, atol=1e-12)
    assert np.abs(theirs - as_meant).max() > 1e-3
