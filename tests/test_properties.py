"""Property tests (hypothesis): statements about attention that hold for every input."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import lessonlib as L

finite = st.floats(-20, 20, allow_nan=False, allow_infinity=False)
settings.register_profile("course", max_examples=60, deadline=None)
settings.load_profile("course")


@st.composite
def qkv(draw, max_len=9, max_d=6):
    n_q = draw(st.integers(1, max_len))
    n_k = draw(st.integers(1, max_len))
    d = draw(st.integers(1, max_d))
    d_v = draw(st.integers(1, max_d))
    q = draw(arrays(np.float64, (n_q, d), elements=finite))
    k = draw(arrays(np.float64, (n_k, d), elements=finite))
    v = draw(arrays(np.float64, (n_k, d_v), elements=finite))
    return q, k, v


@given(data=st.data(), shape=st.tuples(st.integers(1, 6), st.integers(1, 8)))
def test_weights_are_a_distribution_over_allowed_keys(data, shape):
    scores = data.draw(arrays(np.float64, shape, elements=finite))
    allowed = data.draw(arrays(bool, shape))
    w = L.masked_softmax(scores, allowed)
    assert np.all(w >= 0)
    assert np.all(w[~allowed] == 0.0)
    has_key = allowed.any(axis=-1)
    np.testing.assert_allclose(w[has_key].sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(w[~has_key] == 0.0)


@given(scores=arrays(np.float64, (3, 5), elements=finite), huge=st.floats(1e3, 1e300))
def test_masked_key_gets_exactly_zero_even_with_a_huge_score(scores, huge):
    scores = scores.copy()
    scores[:, 2] = huge
    allowed = np.ones((3, 5), bool)
    allowed[:, 2] = False
    assert np.all(L.masked_softmax(scores, allowed)[:, 2] == 0.0)


@given(scores=arrays(np.float64, (4, 6), elements=finite), shift=st.floats(-1e3, 1e3),
       allowed=arrays(bool, (4, 6)))
def test_adding_a_constant_to_every_score_changes_nothing(scores, shift, allowed):
    np.testing.assert_allclose(
        L.masked_softmax(scores + shift, allowed), L.masked_softmax(scores, allowed), atol=1e-9
    )


@given(x=arrays(np.float64, st.tuples(st.integers(2, 8), st.just(8)), elements=finite), seed=st.integers(0, 2**16))
def test_self_attention_without_position_is_permutation_equivariant(x, seed):
    params = L.init_multi_head(8, 2, rng=np.random.default_rng(seed))
    perm = np.random.default_rng(seed).permutation(x.shape[0])
    permuted_then_attended = L.multi_head_attention(L.permute(x, perm), None, params).output
    attended_then_permuted = L.permute(L.multi_head_attention(x, None, params).output, perm)
    np.testing.assert_allclose(permuted_then_attended, attended_then_permuted, atol=1e-9)


@given(q=arrays(np.float64, (1, 8), elements=finite), k=arrays(np.float64, (1, 8), elements=finite),
       m=st.integers(0, 500), n=st.integers(0, 500), shift=st.integers(-500, 500),
       pairing=st.sampled_from(["interleaved", "half"]))
def test_rope_scores_depend_only_on_the_offset(q, k, m, n, shift, pairing):
    def score(a, b):
        return float(np.sum(L.rope(q, [a], pairing=pairing) * L.rope(k, [b], pairing=pairing)))

    np.testing.assert_allclose(score(m + shift, n + shift), score(m, n), atol=1e-8)


@given(data=qkv(max_len=20), block=st.integers(1, 25), causal=st.booleans(),
       align=st.sampled_from(["top-left", "bottom-right"]))
def test_tiled_equals_dense(data, block, causal, align):
    q, k, v = data
    mask = L.causal_mask(q.shape[0], k.shape[0], align=align) if causal else None
    dense = L.scaled_dot_product_attention(q, k, v, mask=mask).output
    tiled = L.tiled_attention(q, k, v, block_size=block, causal=causal, align=align)
    np.testing.assert_allclose(tiled.output, dense, atol=1e-10)


@given(data=qkv(), position=st.integers(0, 8), new=arrays(np.float64, (2, 6), elements=finite))
def test_under_a_causal_mask_a_future_token_does_not_move_earlier_outputs(data, position, new):
    x = data[0]  # (n, d): a sequence attending to itself
    n, d = x.shape
    position = min(position, n - 1)
    params = L.init_multi_head(d, 1, rng=np.random.default_rng(0))
    changed = x.copy()
    changed[position] = new[0, :d]  # qkv() draws d <= 6
    before = L.multi_head_attention(x, None, params, mask=L.causal_mask(n)).output
    after = L.multi_head_attention(changed, None, params, mask=L.causal_mask(n)).output
    np.testing.assert_array_equal(after[:position], before[:position])
