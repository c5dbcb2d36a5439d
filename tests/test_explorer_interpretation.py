"""Unit tests of the interpretation explorer's pure part: the example, exclusion effects, ranks, compute()."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lessonlib as L
from lessonlib.explorers import interpretation as I
from lessonlib.plots import figure_png

SEEDS = [0, 1, 4, 7]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_quiet_key_has_the_largest_weight_in_every_variant(seed):
    weights = [I.attend(I.make_example(seed=seed, top_value=v))[1] for v in ("random", "output", "ignored-offset")]
    for w in weights:
        assert int(np.argmax(w)) == I.QUIET_KEY
        np.testing.assert_allclose(w, weights[0], atol=1e-15)  # values never change weights


@pytest.mark.parametrize("seed", SEEDS)
def test_a_value_equal_to_the_output_makes_exclusion_change_nothing(seed):
    ex = I.make_example(seed=seed, top_value="output")
    before, weights = I.attend(ex)
    after, _ = I.attend(ex, exclude=I.QUIET_KEY)
    np.testing.assert_allclose(ex.values[I.QUIET_KEY], before, atol=1e-12)
    np.testing.assert_allclose(after, before, atol=1e-12)
    assert weights[I.QUIET_KEY] == weights.max()


@pytest.mark.parametrize("seed", SEEDS)
def test_an_offset_the_readout_ignores_moves_the_output_but_not_the_decision(seed):
    ex = I.make_example(seed=seed)
    before, weights = I.attend(ex)
    after, _ = I.attend(ex, exclude=I.QUIET_KEY)
    # excluding key j moves the output by w_j / (1 - w_j) (output - v_j) = -1.5 w_j z here
    assert np.linalg.norm(after - before) == pytest.approx(1.5 * weights[I.QUIET_KEY])
    assert abs((after - before) @ ex.readout) < 1e-12


def test_ignored_direction_is_a_unit_vector_orthogonal_to_the_readout():
    u = np.array([0.6, 0.0, 0.8])
    z = I.ignored_direction(u, seed=3)
    assert np.linalg.norm(z) == pytest.approx(1.0)
    assert abs(z @ u) < 1e-12
    with pytest.raises(ValueError, match="width >= 2"):
        I.ignored_direction(np.array([1.0]))


@pytest.mark.parametrize("seed", SEEDS)
def test_exclusion_by_mask_equals_attention_over_the_remaining_keys(seed):
    ex = I.make_example(seed=seed, top_value="random")
    base, _ = I.attend(ex)
    effects = I.exclusion_effects(ex)
    for j in range(ex.keys.shape[0]):
        rest = np.arange(ex.keys.shape[0]) != j
        reduced = L.scaled_dot_product_attention(ex.query, ex.keys[rest], ex.values[rest]).output
        assert effects[j] == pytest.approx((reduced - base) @ ex.readout, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_exclusion_effect_matches_its_closed_form(seed):
    ex = I.make_example(seed=seed, top_value="random")
    out, w = I.attend(ex)
    closed = w / (1 - w) * ((out[None, :] - ex.values) @ ex.readout)  # (S,)
    np.testing.assert_allclose(I.exclusion_effects(ex), closed, atol=1e-12)


def test_ranks_put_the_largest_first_and_share_ties():
    np.testing.assert_array_equal(I.ranks([0.1, 0.7, 0.3]), [3, 1, 2])
    np.testing.assert_array_equal(I.ranks([2.0, 5.0, 2.0, 1.0]), [2.5, 1, 2.5, 4])


def test_ranks_tie_values_that_differ_only_in_the_last_bits():
    # Two keys with equal effects in exact arithmetic, as one BLAS kernel computed them (notebook 06).
    low, high = 1.2108954062392887, 1.210895406239289
    np.testing.assert_array_equal(I.ranks([0.5, high, low, 2.0]), [4, 2.5, 2.5, 1])
    np.testing.assert_array_equal(I.ranks([1.0, 1.0 + 1e-6, 0.0]), [2, 1, 3])  # a real difference is kept
    assert I.ranks([]).shape == (0,)


@given(st.lists(st.integers(1, 6), min_size=2, max_size=20), st.data())
def test_ranks_and_spearman_do_not_see_rounding_noise(levels, data):
    exact = 0.1 * np.array(levels, dtype=float)  # (n,) with ties wherever two levels agree
    ulps = np.array(data.draw(st.lists(st.integers(-8, 8), min_size=exact.size, max_size=exact.size)))
    noisy = exact + ulps * np.spacing(exact)  # (n,) each entry a few units in its last place off
    np.testing.assert_array_equal(I.ranks(noisy), I.ranks(exact))
    other = np.arange(exact.size, dtype=float)[::-1]
    if np.ptp(exact) > 0:
        assert I.spearman(noisy, other) == I.spearman(exact, other)


def test_spearman_limits_and_the_no_ties_formula():
    a = np.array([0.3, 0.1, 0.9, 0.5, 0.2])
    assert I.spearman(a, 2 * a + 1) == pytest.approx(1.0)
    assert I.spearman(a, -a) == pytest.approx(-1.0)
    b = np.array([0.2, 0.4, 0.1, 0.8, 0.3])
    d = I.ranks(a) - I.ranks(b)
    n = a.size
    assert I.spearman(a, b) == pytest.approx(1 - 6 * np.sum(d**2) / (n * (n**2 - 1)))
    with pytest.raises(ValueError, match="not all equal"):
        I.spearman(a, np.ones(5))
    with pytest.raises(ValueError, match="equal length"):
        I.spearman(a, b[:3])


def test_default_view_high_weight_no_effect_and_disagreeing_rankings():
    r = I.compute(I.Settings())
    k = r.settings.key
    assert r.weight_rank == 1 and r.effect_rank == r.weights.size
    assert r.effects[k] < 1e-12
    assert r.decision_after == pytest.approx(r.decision_before, abs=1e-12)
    assert r.output_shift < 1e-12
    assert r.rho < 0.5  # the weights do not order the keys by their effect
    ex = I.make_example()
    np.testing.assert_allclose(r.weights, I.attend(ex)[1])
    np.testing.assert_allclose(r.effects, np.abs(I.exclusion_effects(ex)), atol=1e-12)
    assert r.rho == pytest.approx(I.spearman(r.weights, r.effects))


@pytest.mark.parametrize("key", [0, I.QUIET_KEY, 4])
@pytest.mark.parametrize("scale", [-1.0, 0.0, 2.0])
def test_scaling_a_value_moves_the_decision_by_weight_times_change(key, scale):
    r = I.compute(I.Settings(key=key, scale=scale))
    ex = I.make_example()
    w = r.weights[key]
    assert r.decision_after - r.decision_before == pytest.approx(w * (scale - 1) * (ex.values[key] @ ex.readout))
    assert r.output_shift == pytest.approx(w * abs(scale - 1) * np.linalg.norm(ex.values[key]))


@pytest.mark.parametrize("key", [0, I.QUIET_KEY, 5])
def test_a_shift_the_readout_ignores_moves_the_output_only(key):
    r = I.compute(I.Settings(key=key, shift=2.0))
    assert r.decision_after == pytest.approx(r.decision_before, abs=1e-12)
    assert r.output_shift == pytest.approx(2.0 * r.weights[key])


@pytest.mark.parametrize("key", range(I.N_KEYS))
def test_excluding_the_chosen_key_gives_its_effect(key):
    r = I.compute(I.Settings(key=key, exclude=True))
    assert abs(r.decision_after - r.decision_before) == pytest.approx(r.effects[key], abs=1e-12)


def test_an_edit_changes_the_exclusion_effect_of_the_edited_key():
    quiet = I.compute(I.Settings())
    edited = I.compute(I.Settings(scale=2.0))
    assert quiet.effects[I.QUIET_KEY] < 1e-12 < 0.01 < edited.effects[I.QUIET_KEY]
    np.testing.assert_allclose(edited.weights, quiet.weights)


def test_describe_is_deterministic_and_reports_the_numbers():
    s = I.Settings(key=4, scale=1.5, exclude=True)
    r = I.compute(s)
    text = I.describe(r)
    assert text == I.describe(I.compute(s))
    assert text.startswith(f"key 4: weight {r.weights[4]:.3f} (rank {r.weight_rank:g} of 6)")
    assert f"decision {r.decision_after:.3f} (was {r.decision_before:.3f})" in text
    assert f"Spearman(weights, effects) = {r.rho:.2f}" in text and "excluded" in text
    assert text != I.describe(I.compute(replace(s, exclude=False)))


@pytest.mark.parametrize("bad", [dict(key=-1), dict(key=I.N_KEYS)])
def test_bad_key_is_refused(bad):
    with pytest.raises(ValueError, match="key must lie"):
        I.compute(I.Settings(**bad))


def test_bad_example_options_are_refused():
    with pytest.raises(ValueError, match="top_value"):
        I.make_example(top_value="largest")
    with pytest.raises(ValueError, match="quiet_key"):
        I.make_example(quiet_key=9)


def test_figure_draws_without_widgets():
    figure = I.Figure()
    for s in (I.Settings(), I.Settings(key=0, scale=-2.0, exclude=True)):
        assert figure_png(figure.draw(I.compute(s))).startswith(b"\x89PNG")


def _layer(seed=9, n=6, d=8):
    rng = np.random.default_rng(seed)
    tokens = rng.standard_normal((n, d))
    params = L.init_multi_head(d, 2, rng=np.random.default_rng(seed + 1))
    return tokens, params, rng.standard_normal(d)


def test_layer_decision_is_the_residual_stream_read_at_the_last_position():
    tokens, params, u = _layer()
    decision, weights = I.layer_decision(tokens, params, u)
    layer = L.multi_head_attention(tokens, None, params)
    assert decision == pytest.approx((tokens[-1] + layer.output[-1]) @ u)
    np.testing.assert_array_equal(weights, layer.weights[:, -1, :])
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)


def test_replacement_effects_hold_the_other_tokens_fixed():
    tokens, params, u = _layer()
    effects = I.replacement_effects(tokens, params, u)
    base, _ = I.layer_decision(tokens, params, u)
    for i in (0, 3, 5):
        changed = tokens.copy()
        changed[i] = 0.0
        assert effects[i] == pytest.approx(abs(I.layer_decision(changed, params, u)[0] - base))
    np.testing.assert_array_equal(tokens, _layer()[0])  # the input was not modified


def test_with_a_silent_attention_layer_only_the_residual_path_matters():
    tokens, params, u = _layer()
    silent = replace(params, w_o=np.zeros_like(params.w_o))  # the layer adds nothing
    effects = I.replacement_effects(tokens, silent, u)
    np.testing.assert_allclose(effects[:-1], 0.0, atol=1e-12)
    assert effects[-1] == pytest.approx(abs(tokens[-1] @ u))
