"""The position explorer's pure parts: the layer with a position mechanism, compute() and describe()."""

from __future__ import annotations

import html

import numpy as np
import pytest

import lessonlib as L
from lessonlib.explorers import position as P
from lessonlib.plots import figure_png

POSITIONAL = ("sinusoidal", "learned", "relative", "alibi", "rope")


@pytest.fixture(scope="module")
def model() -> P.PositionModel:
    return P.make_model(16, 4, max_positions=64, seed=3)


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((7, 16))  # (n, d)


# --- self_attention against the engine and the formulas -------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_no_position_is_the_engines_multi_head_attention(model, tokens, causal):
    mask = L.causal_mask(7) if causal else None
    expected = L.multi_head_attention(tokens, None, model.params, mask=mask)
    got = P.self_attention(tokens, model, "none", causal=causal)
    np.testing.assert_allclose(got.output, expected.output, atol=1e-12)
    np.testing.assert_allclose(got.weights, expected.weights, atol=1e-12)


def _projections(x: np.ndarray, params: L.MultiHeadParams) -> tuple[np.ndarray, np.ndarray]:
    q = L.split_heads(x @ params.w_q, params.n_heads)  # (H, n, d_head)
    k = L.split_heads(x @ params.w_k, params.n_heads)  # (H, n, d_head)
    return q, k


def test_each_mechanism_enters_where_it_says(model, tokens):
    n, offset = tokens.shape[0], 9
    positions = offset + np.arange(n)
    q, k = _projections(tokens, model.params)
    plain = L.attention_scores(q, k)  # (H, n, n)
    expected = {
        "none": plain,
        "relative": plain + L.relative_position_bias(n, n, model.bucket_bias),
        "alibi": plain + L.alibi_bias(n, n, 4),
        "rope": L.attention_scores(L.rope(q, positions), L.rope(k, positions)),
        "sinusoidal": L.attention_scores(
            *_projections(tokens + L.sinusoidal_positions(offset + n, 16)[offset:], model.params)),
        "learned": L.attention_scores(*_projections(tokens + model.learned(positions), model.params)),
    }
    for mechanism, scores in expected.items():
        got = P.self_attention(tokens, model, mechanism, offset=offset).scores
        np.testing.assert_allclose(got, scores, atol=1e-12, err_msg=mechanism)
    assert {P.WHERE_POSITION_ENTERS[m] for m in ("sinusoidal", "learned")} == {"representation"}
    assert {P.WHERE_POSITION_ENTERS[m] for m in ("relative", "alibi")} == {"score"}
    assert P.WHERE_POSITION_ENTERS["rope"] == "query/key rotation"


@pytest.mark.parametrize("mechanism", P.MECHANISMS)
def test_chosen_queries_are_rows_of_the_full_layer(model, tokens, mechanism):
    full = P.self_attention(tokens, model, mechanism, causal=True, offset=2)
    rows = [6, 0, 3]
    part = P.self_attention(tokens, model, mechanism, causal=True, offset=2, queries=rows)
    np.testing.assert_allclose(part.output, full.output[rows], atol=1e-12)
    np.testing.assert_allclose(part.weights, full.weights[:, rows], atol=1e-12)


def test_unknown_mechanism_is_refused(model, tokens):
    with pytest.raises(ValueError, match="mechanism must be one of"):
        P.self_attention(tokens, model, "absolute", offset=0)


def test_learned_table_refuses_positions_past_its_size(model, tokens):
    with pytest.raises(IndexError, match="64 rows"):
        P.self_attention(tokens, model, "learned", offset=60)


# --- the two measured properties -----------------------------------------------------------------


def test_only_no_position_without_mask_is_permutation_equivariant(model, tokens):
    perm = np.random.default_rng(1).permutation(tokens.shape[0])
    assert P.permutation_deviation(tokens, model, "none", perm) < 1e-12
    assert P.permutation_deviation(tokens, model, "none", perm, causal=True) > 1e-2
    for mechanism in POSITIONAL:
        assert P.permutation_deviation(tokens, model, mechanism, perm) > 1e-2, mechanism


def test_identity_order_deviates_by_nothing(model, tokens):
    for mechanism in P.MECHANISMS:
        assert P.permutation_deviation(tokens, model, mechanism, np.arange(7), causal=True) == 0.0


@pytest.mark.parametrize("shift", [1, 40, 1000])
def test_relative_alibi_and_rope_scores_depend_on_offsets_only(model, tokens, shift):
    for mechanism in ("none", "relative", "alibi", "rope"):
        assert P.shift_change(tokens, model, mechanism, shift) < 1e-9, mechanism


def test_absolute_positions_change_scores_when_shifted(model, tokens):
    for mechanism in ("sinusoidal", "learned"):
        assert P.shift_change(tokens, model, mechanism, 20) > 1e-2, mechanism
        assert P.shift_change(tokens, model, mechanism, 20, causal=True) > 1e-2, mechanism


# --- compute / describe ---------------------------------------------------------------------------


def test_default_view_is_equivariant_and_says_so():
    result = P.compute(P.Settings())
    assert result.settings.mechanism == "none"
    assert not np.array_equal(result.order, np.arange(result.order.size))  # the default shuffles
    assert result.deviation < 1e-12
    np.testing.assert_allclose(result.scores_back, result.scores, atol=1e-12)
    text = P.describe(result)
    assert "outputs permute with inputs: yes (max deviation" in text
    assert "scores change with the offset: no" in text


@pytest.mark.parametrize("mechanism", POSITIONAL)
def test_positions_break_the_symmetry_in_compute(mechanism):
    result = P.compute(P.Settings(mechanism=mechanism, shuffle=3, offset=20))
    assert result.deviation > 1e-2
    assert not np.allclose(result.scores_back, result.scores)
    assert "outputs permute with inputs: no" in P.describe(result)
    offset_only = mechanism in ("relative", "alibi", "rope")
    assert (result.shift < 1e-9) == offset_only
    assert ("scores change with the offset: no" in P.describe(result)) == offset_only


def test_compute_scores_match_the_layer_and_put_back_is_the_shuffled_run():
    s = P.Settings(mechanism="rope", shuffle=4, offset=7, causal=True)
    result = P.compute(s)
    model = P.make_model(s.d_model, s.n_heads, max_positions=s.max_positions, seed=s.seed)
    x = np.random.default_rng(s.seed + 1).standard_normal((s.n_tokens, s.d_model))
    plain = P.self_attention(x, model, "rope", offset=7, causal=True).scores[0]
    shuffled = P.self_attention(L.permute(x, result.order), model, "rope", offset=7, causal=True).scores[0]
    np.testing.assert_allclose(result.scores, plain, atol=1e-12)
    # token order[i] sits in slot i of the shuffled run
    for i, ti in enumerate(result.order):
        for j, tj in enumerate(result.order):
            assert result.scores_back[ti, tj] == pytest.approx(shuffled[i, j], abs=1e-12)
            assert result.allowed_back[ti, tj] == (j <= i)
    np.testing.assert_array_equal(result.allowed, L.causal_mask(s.n_tokens))


def test_shuffle_zero_keeps_the_order_and_seeds_are_permutations():
    assert P.shuffle_order(6, 0).tolist() == list(range(6))
    for seed in range(1, 10):
        assert sorted(P.shuffle_order(6, seed).tolist()) == list(range(6))


def test_learned_past_its_table_is_reported_not_raised():
    result = P.compute(P.Settings(mechanism="learned", offset=59))
    assert result.past_table and np.isnan(result.deviation)
    assert "go past the learned table's 64 rows" in P.describe(result)
    assert "empty" in P.alt_text(result)
    assert not P.compute(P.Settings(mechanism="learned", offset=58)).past_table


def test_describe_and_alt_text_are_deterministic():
    s = P.Settings(mechanism="sinusoidal", shuffle=2, offset=5, causal=True)
    first, second = P.compute(s), P.compute(s)
    assert P.describe(first) == P.describe(second)
    assert P.alt_text(first) == P.alt_text(second)
    assert "hatched cells are masked" in P.alt_text(first)


def test_deviation_text():
    assert P.deviation_text(0.0) == "0"
    assert P.deviation_text(2.2e-16) == P.deviation_text(4.4e-16) == "below 1e-9"  # rounding: CPU-dependent
    assert P.deviation_text(3e-6) == "3e-06"
    assert P.deviation_text(1.234) == "1.23"


# --- drawing and wiring ---------------------------------------------------------------------------


def test_figure_draws_every_mechanism_and_the_empty_case():
    figure = P.Figure(6)
    for mechanism in P.MECHANISMS:
        result = P.compute(P.Settings(mechanism=mechanism, causal=True))
        assert figure_png(figure.draw(result)).startswith(b"\x89PNG")
        low, high = figure.left.image.get_clim()
        assert low <= np.nanmin(np.where(result.allowed, result.scores, np.nan)) + 1e-12
        assert high >= np.nanmax(np.where(result.allowed, result.scores, np.nan)) - 1e-12
    png = figure_png(figure.draw(P.compute(P.Settings(mechanism="learned", offset=80))))
    assert png.startswith(b"\x89PNG")


def test_show_readout_follows_the_controls():
    pytest.importorskip("ipywidgets")
    box = P.show()
    controls = {getattr(child, "description", None): child for child in box.children}
    readout = next(c for c in box.children if "lessonlib-readout" in c._dom_classes)
    assert html.escape(P.describe(P.compute(P.Settings()))) in readout.value
    controls["position"].value = "rope"
    controls["offset"].value = 30
    expected = P.describe(P.compute(P.Settings(mechanism="rope", offset=30)))
    assert html.escape(expected) in readout.value
