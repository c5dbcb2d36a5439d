"""lessonlib against torch's F.scaled_dot_product_attention on random shapes, masks and dtypes.

Tolerances (absolute and relative, on outputs and weights of order one):
float64 1e-12 (both compute the same sums in a different order), float32 2e-5 (torch's CPU
kernels accumulate in a different order and may use fused exp).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lessonlib as L

TOLERANCE = {"float32": 2e-5, "float64": 1e-12}

settings.register_profile("crosscheck", max_examples=60, deadline=None)
crosscheck = settings.get_profile("crosscheck")


@st.composite
def attention_case(draw, max_len: int = 7):
    """Random batch shape, lengths, widths, dtype, and a NumPy generator seed."""
    return {
        "batch": tuple(draw(st.lists(st.integers(1, 3), max_size=2))),
        "n_queries": draw(st.integers(1, max_len)),
        "n_keys": draw(st.integers(1, max_len)),
        "d_k": draw(st.integers(1, 6)),
        "d_v": draw(st.integers(1, 5)),
        "dtype": draw(st.sampled_from(sorted(TOLERANCE))),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def _arrays(case):
    """query (..., L, d_k), key (..., S, d_k), value (..., S, d_v) in the case's dtype."""
    rng = np.random.default_rng(case["seed"])
    b, n_q, n_k = case["batch"], case["n_queries"], case["n_keys"]
    query = rng.normal(size=(*b, n_q, case["d_k"])).astype(case["dtype"])
    key = rng.normal(size=(*b, n_k, case["d_k"])).astype(case["dtype"])
    value = rng.normal(size=(*b, n_k, case["d_v"])).astype(case["dtype"])
    return rng, query, key, value


def _torch_sdpa(torch, query, key, value, **kwargs) -> np.ndarray:
    """torch SDPA on NumPy arrays (a (1,) batch axis is added: torch wants at least 3 dims)."""
    q, k, v = (torch.from_numpy(np.array(x))[None] for x in (query, key, value))  # copies: torch wants writable
    mask = kwargs.pop("attn_mask", None)
    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    return out[0].numpy()


def _ours_with_mask(query, key, value, mask, **kwargs) -> np.ndarray:
    """Our SDPA output; an (L, S) mask is passed bare unless the leading batch axis has L entries.

    Then the mask has the shape of a (B, S) key-padding mask as well, and ours refuses it (torch
    reads it as (L, S)): the refusal is checked, and the mask is passed as (1, L, S), the reading
    the refusal names for a mask shared by every example.
    """
    n_queries, batch = query.shape[-2], query.shape[:-2]
    if mask is not None and mask.ndim == 2 and n_queries > 1 and batch[:1] == (n_queries,):
        with pytest.raises(ValueError, match="could be read two ways"):
            L.scaled_dot_product_attention(query, key, value, mask=mask, **kwargs)
        mask = mask[None]  # (1, L, S)
    return L.scaled_dot_product_attention(query, key, value, mask=mask, **kwargs).output


def _close(ours: np.ndarray, theirs: np.ndarray, dtype: str) -> None:
    tol = TOLERANCE[dtype]
    assert ours.dtype == theirs.dtype == np.dtype(dtype)
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


@crosscheck
@given(case=attention_case(), mask_kind=st.sampled_from(["none", "(L, S)", "(..., L, S)", "(..., 1, S)"]),
       density=st.sampled_from([0.3, 0.7, 1.0]), scale=st.sampled_from([None, 0.5]))
def test_attention_matches_torch(torch, case, mask_kind, density, scale):
    rng, query, key, value = _arrays(case)
    shape = {"none": None, "(L, S)": (case["n_queries"], case["n_keys"]),
             "(..., L, S)": (*case["batch"], case["n_queries"], case["n_keys"]),
             "(..., 1, S)": (*case["batch"], 1, case["n_keys"])}[mask_kind]
    mask = None if shape is None else rng.random(shape) < density  # True = allowed; some rows empty
    ours = _ours_with_mask(query, key, value, mask, scale=scale)
    theirs = _torch_sdpa(torch, query, key, value, attn_mask=mask, scale=scale)  # empty rows: zeros in both
    _close(ours, theirs, case["dtype"])


@crosscheck
@given(case=attention_case(), density=st.sampled_from([0.2, 0.6, 1.0]))
def test_masked_softmax_matches_torch(torch, case, density):
    """Scores reach torch exactly as query @ I with scale 1; value = I returns the weights."""
    rng, scores, _, _ = _arrays({**case, "d_k": case["n_keys"]})  # (..., L, S) scores
    allowed = rng.random(scores.shape) < density  # (..., L, S), some rows may be empty
    eye = np.eye(case["n_keys"], dtype=case["dtype"])
    keys = np.broadcast_to(eye, (*case["batch"], *eye.shape))  # (..., S, S)
    theirs = _torch_sdpa(torch, scores, keys, keys, attn_mask=allowed, scale=1.0)  # (..., L, S) weights
    _close(L.masked_softmax(scores, allowed), theirs, case["dtype"])
    # The "nan" policy is what a plain masked_fill(-inf) + softmax gives.
    filled = torch.from_numpy(scores).masked_fill(torch.from_numpy(~allowed), float("-inf"))
    with_nan = torch.softmax(filled, dim=-1).numpy()
    np.testing.assert_allclose(L.masked_softmax(scores, allowed, fully_masked="nan"), with_nan,
                               rtol=TOLERANCE[case["dtype"]], atol=TOLERANCE[case["dtype"]])


@crosscheck
@given(case=attention_case(), align=st.sampled_from(["top-left", "bottom-right"]))
def test_causal_masks_match_torch(torch, case, align):
    """top-left = torch is_causal; bottom-right = torch.nn.attention.bias.causal_lower_right."""
    from torch.nn.attention.bias import causal_lower_right

    _, query, key, value = _arrays(case)
    n_q, n_k = case["n_queries"], case["n_keys"]
    ours_mask = L.causal_mask(n_q, n_k, align=align)  # (L, S)
    ours = _ours_with_mask(query, key, value, ours_mask)
    if align == "top-left":
        theirs = _torch_sdpa(torch, query, key, value, is_causal=True)
        expected_mask = torch.ones(n_q, n_k, dtype=torch.bool).tril().numpy()
    else:
        with warnings.catch_warnings():
            # torch warns that L > S "will produce NaNs"; on CPU the empty rows measure as zeros
            warnings.simplefilter("ignore", UserWarning)
            bias = causal_lower_right(n_q, n_k)
        theirs = _torch_sdpa(torch, query, key, value, attn_mask=bias)
        expected_mask = bias._materialize().numpy()
    np.testing.assert_array_equal(ours_mask, expected_mask)
    _close(ours, theirs, case["dtype"])


@crosscheck
@given(case=attention_case(max_len=20), block_size=st.integers(1, 8),
       causal=st.sampled_from([None, "top-left", "bottom-right"]))
def test_tiled_attention_matches_torch(torch, case, block_size, causal):
    from torch.nn.attention.bias import causal_lower_right

    _, query, key, value = _arrays(case)
    ours = L.tiled_attention(query, key, value, block_size=block_size, causal=causal is not None, align=causal).output
    if causal is None:
        theirs = _torch_sdpa(torch, query, key, value)
    elif causal == "top-left":
        theirs = _torch_sdpa(torch, query, key, value, is_causal=True)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            theirs = _torch_sdpa(torch, query, key, value,
                                 attn_mask=causal_lower_right(case["n_queries"], case["n_keys"]))
    _close(ours, theirs, case["dtype"])
