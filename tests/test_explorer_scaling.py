"""Unit tests of the scaling explorer's pure part: compute() and describe(), no widgets."""

import io
import math
from dataclasses import replace

import numpy as np
import pytest

import lessonlib as L
from lessonlib.explorers import scaling


@pytest.mark.parametrize("d_k", [4, 64, 256])
def test_unscaled_score_spread_grows_as_sqrt_d_k(d_k):
    r = scaling.compute(scaling.Settings(d_k=d_k, scaled=False, n_samples=512))
    assert r.predicted_std == pytest.approx(math.sqrt(d_k))
    assert r.score_std == pytest.approx(math.sqrt(d_k), rel=0.15)


@pytest.mark.parametrize("d_k", [4, 64, 256])
def test_scaled_score_spread_stays_near_one(d_k):
    r = scaling.compute(scaling.Settings(d_k=d_k, scaled=True, n_samples=512))
    assert r.predicted_std == pytest.approx(1.0)
    assert r.score_std == pytest.approx(1.0, rel=0.15)


def test_entry_std_scales_the_spread_by_its_square_even_when_scaled():
    r = scaling.compute(scaling.Settings(d_k=64, scaled=True, entry_std=3.0, n_samples=512))
    assert r.predicted_std == pytest.approx(9.0)
    assert r.score_std == pytest.approx(9.0, rel=0.15)
    baseline = scaling.compute(scaling.Settings(d_k=64, scaled=True))
    assert r.mean_max_weight > baseline.mean_max_weight + 0.3  # saturated although scaled


def test_scores_and_weights_agree_with_the_engine():
    s = scaling.Settings(d_k=16, scaled=True, n_keys=5, seed=3)
    r = scaling.compute(s)
    rng = np.random.default_rng(s.seed)  # redraw the same query and keys as compute() does
    queries = s.entry_std * rng.standard_normal((s.n_samples, s.d_k))
    keys = s.entry_std * rng.standard_normal((s.n_keys, s.d_k))
    expected = L.scaled_dot_product_attention(queries[0], keys, np.eye(s.n_keys))
    np.testing.assert_allclose(r.scores, queries[0] @ keys.T / math.sqrt(s.d_k))
    np.testing.assert_allclose(r.weights, expected.weights)
    unscaled = scaling.compute(replace(s, scaled=False))
    np.testing.assert_allclose(unscaled.scores, r.scores * math.sqrt(s.d_k))


def test_weights_are_a_distribution():
    for s in (scaling.Settings(), scaling.Settings(d_k=512, scaled=False), scaling.Settings(entry_std=3.0)):
        r = scaling.compute(s)
        assert np.all(r.weights >= 0)
        assert r.weights.sum() == pytest.approx(1.0, abs=1e-12)
        assert 1.0 / s.n_keys <= r.mean_max_weight <= 1.0


def test_entropy_matches_its_formula_and_its_limits():
    w = np.array([0.5, 0.25, 0.25, 0.0])
    assert L.attention_entropy(w) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert L.attention_entropy(np.full(8, 1 / 8)) == pytest.approx(math.log(8))
    assert L.attention_entropy(np.eye(3)).tolist() == [0.0, 0.0, 0.0]  # one-hot rows, 0 log 0 = 0
    r = scaling.compute(scaling.Settings())
    assert r.entropy == pytest.approx(-np.sum(r.weights * np.log(r.weights)))
    assert r.max_entropy == pytest.approx(math.log(r.settings.n_keys))
    assert 0.0 <= r.mean_entropy <= r.max_entropy


def test_unscaled_large_d_k_saturates_and_scaling_undoes_it():
    off = scaling.compute(scaling.Settings(d_k=256, scaled=False))
    on = scaling.compute(scaling.Settings(d_k=256, scaled=True))
    assert off.mean_entropy < 0.25 * off.max_entropy
    assert on.mean_entropy > 0.7 * on.max_entropy
    assert off.mean_max_weight > 0.85 > on.mean_max_weight


def test_same_seed_same_result_and_readout():
    a, b = scaling.compute(scaling.Settings(seed=7)), scaling.compute(scaling.Settings(seed=7))
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert scaling.describe(a) == scaling.describe(b)
    assert scaling.alt_text(a) == scaling.alt_text(b)
    other = scaling.compute(scaling.Settings(seed=8))
    assert not np.array_equal(a.scores, other.scores)


def test_describe_reports_the_result_numbers():
    r = scaling.compute(scaling.Settings(d_k=256, scaled=False))
    text = scaling.describe(r)
    assert text.startswith("d_k=256, scaling off")
    assert f"score std {r.score_std:.2f}" in text
    assert f"entropy {r.mean_entropy:.2f} of {r.max_entropy:.2f}" in text
    assert f"mean largest weight {r.mean_max_weight:.2f}" in text


@pytest.mark.parametrize("bad", [dict(d_k=0), dict(n_keys=0), dict(n_samples=0), dict(entry_std=0.0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        scaling.compute(scaling.Settings(**bad))


def test_partial_redraw_matches_a_full_render():
    from PIL import Image

    from lessonlib.plots import figure_png

    figure = scaling.Figure(8)
    for s in (scaling.Settings(), scaling.Settings(d_k=512, scaled=False), scaling.Settings(entry_std=3.0)):
        fast = figure_png(figure.draw(scaling.compute(s)))  # background + changed artists only
        for artist in figure.redraw.dynamic:
            artist.set_animated(False)
        full = figure_png(figure.fig)  # every artist drawn from scratch
        for artist in figure.redraw.dynamic:
            artist.set_animated(True)
        assert fast.startswith(b"\x89PNG")
        pixels = [np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float) for png in (fast, full)]
        assert pixels[0].shape == pixels[1].shape
        assert np.abs(pixels[0] - pixels[1]).max() <= 2.0
