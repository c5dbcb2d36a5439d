"""Unit tests of the masking explorer's pure part and its teaching helpers, plus its widget wiring."""

import html
from dataclasses import replace

import numpy as np
import pytest

import lessonlib as L
from lessonlib.explorers import masking
from lessonlib.fixtures import MASKING, masking_reference

CAUSAL_WITH_EMPTY_LAST_ROW = masking.preset("causal")[:3] + ((False,) * 4,)


def settings(**changes):
    return replace(masking.Settings(), **changes)


# --- presets ---------------------------------------------------------------------------------------


def test_presets_are_the_engine_masks():
    size, length = masking.GRID_SIZE, masking.PADDED_LENGTH
    causal = L.causal_mask(size)
    padding = np.broadcast_to(L.padding_mask([length], size), (size, size))
    np.testing.assert_array_equal(masking.preset("causal"), causal)
    np.testing.assert_array_equal(masking.preset("padding"), padding)
    np.testing.assert_array_equal(masking.preset("both"), causal & padding)
    np.testing.assert_array_equal(masking.preset("none"), np.ones((size, size), bool))
    assert masking.Settings().allowed == masking.preset("causal")
    with pytest.raises(ValueError, match="name must be one of .causal."):
        masking.preset("future")


# --- teaching helpers ------------------------------------------------------------------------------


def test_softmax_then_zero_keeps_the_softmax_shares_of_allowed_keys():
    scores = np.array([1.0, 2.0, 3.0])
    allowed = np.array([True, True, False])
    wrong = masking.softmax_then_zero(scores, allowed)
    full = L.softmax(scores)
    np.testing.assert_array_equal(wrong, [full[0], full[1], 0.0])
    assert wrong.sum() == pytest.approx(full[0] + full[1])
    assert wrong.sum() < 1.0
    fixed = masking.softmax_then_zero(scores, allowed, renormalise=True)
    np.testing.assert_allclose(fixed, L.masked_softmax(scores, allowed), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_renormalising_after_the_fact_loses_what_has_underflowed(dtype):
    scores = np.array(MASKING.scores, dtype=dtype)
    allowed = np.array(MASKING.allowed)
    survivors = L.softmax(scores)[:2]  # the allowed keys' shares before renormalising
    fixed = masking.softmax_then_zero(scores, allowed, renormalise=True)
    assert fixed.dtype == np.dtype(dtype)
    if np.all(survivors == 0):  # float16: exp(-99) is below the smallest subnormal
        assert np.isnan(fixed).all()
    else:
        np.testing.assert_allclose(fixed[:2], survivors / survivors.sum(), rtol=1e-6)
        assert fixed[2] == 0.0
    if dtype == "float64":
        np.testing.assert_allclose(fixed, masking_reference(), atol=1e-12)
    if dtype == "float32":  # subnormal survivors keep few bits: visibly off
        assert abs(float(fixed[0]) - masking_reference()[0]) > 1e-4


def test_fill_then_softmax_with_minus_inf_matches_masked_softmax():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(3, 5))
    allowed = rng.random((3, 5)) < 0.6
    allowed[:, 0] = True  # every row keeps one key
    np.testing.assert_allclose(masking.fill_then_softmax(scores, allowed, -np.inf),
                               L.masked_softmax(scores, allowed), atol=1e-15)


def test_fill_then_softmax_on_an_empty_row():
    scores = np.array([1.0, 2.0, 100.0])
    nothing = np.zeros(3, bool)
    assert np.isnan(masking.fill_then_softmax(scores, nothing, -np.inf)).all()
    np.testing.assert_allclose(masking.fill_then_softmax(scores, nothing, -1e9), [1 / 3] * 3)


def test_helpers_refuse_a_float_mask():
    with pytest.raises(TypeError, match="boolean"):
        masking.softmax_then_zero(np.zeros(3), np.array([1.0, 1.0, 0.0]))
    with pytest.raises(TypeError, match="boolean"):
        masking.fill_then_softmax(np.zeros(3), np.array([1, 1, 0]), -np.inf)


@pytest.mark.parametrize(("fill", "dtype", "expected"), [
    ("-inf", "float16", -np.inf),
    ("-1e9", "float16", -np.inf),  # beyond float16's range
    ("-1e9", "float32", -1e9),
    ("-1e4", "float16", -1e4),
    ("finfo.min", "float16", -65504.0),
    ("finfo.min", "float32", float(np.finfo(np.float32).min)),
])
def test_fill_value_as_the_dtype_stores_it(fill, dtype, expected):
    value = masking.fill_value(fill, dtype)
    assert value.dtype == np.dtype(dtype)
    assert float(value) == expected


# --- compute ---------------------------------------------------------------------------------------


def test_default_view_is_correct_masking():
    r = masking.compute(masking.Settings())
    np.testing.assert_allclose(r.weights, L.masked_softmax(r.scores, r.allowed), atol=1e-6)
    np.testing.assert_allclose(r.row_sums, 1.0, atol=1e-6)
    assert np.all(r.weights[~r.allowed] == 0.0)
    assert r.nan_rows == () and r.empty_rows == ()
    assert r.max_gap < 1e-6


def test_the_fixture_row_appears_under_the_causal_mask():
    r = masking.compute(settings(dtype="float64"))
    np.testing.assert_allclose(r.weights[1], masking_reference() + [0.0], atol=1e-12)
    assert r.weights[1, 2] == 0.0  # the disallowed score of 100 gets exactly nothing


@pytest.mark.parametrize("dtype", masking.DTYPES)
def test_zero_after_softmax_row_sums_are_the_allowed_share(dtype):
    r = masking.compute(settings(order="after", dtype=dtype))
    full = L.softmax(r.scores.astype(dtype)).astype(float)  # (L, S)
    np.testing.assert_allclose(r.row_sums, np.where(r.allowed, full, 0.0).sum(-1), rtol=1e-3)
    assert r.row_sums[1] < 1e-40  # keys 0 and 1 got almost nothing: key 2 had taken it all
    assert r.max_gap > 0.5


def test_renormalise_in_float16_turns_rows_to_nan_and_float64_recovers():
    low = masking.compute(settings(order="renormalise", dtype="float16"))
    assert low.nan_rows == (0, 1)  # their allowed keys underflowed to zero
    assert np.isnan(low.max_gap)
    high = masking.compute(settings(order="renormalise", dtype="float64"))
    assert high.nan_rows == ()
    np.testing.assert_allclose(high.weights, high.reference, atol=1e-12)


def test_a_row_with_no_allowed_key_by_fill_and_dtype():
    base = settings(allowed=CAUSAL_WITH_EMPTY_LAST_ROW)
    assert masking.compute(base).empty_rows == (3,)
    for dtype in masking.DTYPES:
        assert masking.compute(replace(base, fill="-inf", dtype=dtype)).nan_rows == (3,)
        uniform = masking.compute(replace(base, fill="finfo.min", dtype=dtype))
        np.testing.assert_allclose(uniform.weights[3], 0.25, atol=1e-3)
        assert uniform.blocked_weight[3] == pytest.approx(1.0, abs=1e-3)
    assert masking.compute(replace(base, fill="-1e9", dtype="float16")).nan_rows == (3,)  # -1e9 -> -inf
    assert masking.compute(replace(base, fill="-1e9", dtype="float32")).nan_rows == ()  # uniform


def test_reference_follows_the_zeros_policy():
    r = masking.compute(settings(allowed=CAUSAL_WITH_EMPTY_LAST_ROW))
    np.testing.assert_array_equal(r.reference[3], 0.0)
    np.testing.assert_array_equal(r.reference, L.masked_softmax(r.scores, r.allowed, fully_masked="zeros"))


@pytest.mark.parametrize("bad", [dict(order="sideways"), dict(dtype="bfloat16"), dict(fill="-1"),
                                 dict(allowed=((True, False),) * 2)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        masking.compute(settings(**bad))


# --- readout, alt text, figure ---------------------------------------------------------------------


def test_describe_reports_the_result_numbers():
    r = masking.compute(settings(order="after"))
    text = masking.describe(r)
    assert text.startswith("zero after softmax, float32, fill unused:")
    assert "row sums [1.01e-43, 3.76e-43, 1, 1]" in text
    assert "NaN rows []" in text
    r = masking.compute(settings(fill="-1e9", dtype="float16"))
    assert "fill -1e9 (stored -inf)" in masking.describe(r)
    assert masking.describe(masking.compute(masking.Settings())) == masking.describe(
        masking.compute(masking.Settings()))


def test_alt_text_counts_leaking_cells_and_nan_rows():
    r = masking.compute(settings(allowed=CAUSAL_WITH_EMPTY_LAST_ROW, fill="-1e4"))
    assert "10 blocked cells hatched, 4 of them carrying weight" in masking.alt_text(r)
    r = masking.compute(settings(order="renormalise", dtype="float16"))
    assert masking.alt_text(r).endswith("2 NaN")


def test_figure_draws_without_widgets():
    from lessonlib.plots import figure_png

    figure = masking.Figure()
    for s in (masking.Settings(), settings(order="renormalise", dtype="float16")):
        assert figure_png(figure.draw(masking.compute(s))).startswith(b"\x89PNG")


def test_widget_readout_follows_the_grid_and_presets():
    pytest.importorskip("ipywidgets")
    box = masking.show()
    grid = next(w for w in box.children if type(w).__name__ == "MaskGrid")
    readout = next(w for w in box.children if "lessonlib-readout" in w._dom_classes)
    table = grid.children[1]
    n = masking.GRID_SIZE + 1  # a label column, then one toggle per key
    table.children[n + 2].value = True  # query 0 may now see key 1
    assert grid.value[0] == (True, True, False, False)
    expected = masking.describe(masking.compute(masking.Settings(allowed=grid.value)))
    assert html.unescape(readout.value) == f"<pre style='margin:0'>{expected}</pre>"
    both = next(b for b in grid.children[0].children if getattr(b, "description", "") == "both")
    both.click()
    assert grid.value == masking.preset("both")
    grid.value = masking.preset("none")  # set from code: the buttons follow
    toggles = [w for w in table.children if isinstance(getattr(w, "value", None), bool)]
    assert len(toggles) == masking.GRID_SIZE**2 and all(t.value for t in toggles)
    expected = masking.describe(masking.compute(masking.Settings(allowed=masking.preset("none"))))
    assert html.unescape(readout.value) == f"<pre style='margin:0'>{expected}</pre>"
