"""probe_mask_semantics on lessonlib itself and on small fake attention functions with known conventions.

These run without torch or JAX; the probes of the real libraries are in tests/crosscheck.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import lessonlib as L
from lessonlib import probe as P
from lessonlib.crosscheck import installed_version, lessonlib_attention, probe_target
from lessonlib.fixtures import MASKING


def fake_attention(*, polarity="attend", floats="added", alignment="top-left", fill=-np.inf, empty_rows=None):
    """A NumPy attention whose conventions are set by hand, for the probe to rediscover.

    polarity: what a boolean True means ("attend", "blocked", "+1" = added as a number, "ignore");
    floats: "added", "nonzero attends", "nonzero blocks", "ignore", "refuse";
    alignment: its causal switch ("top-left", "bottom-right", "ignore", None = has none, "refuse");
    fill: the score given to disallowed keys (-inf, or a finite minimum that makes empty rows uniform);
    empty_rows: "zeros" to zero rows with no allowed key after softmax.
    """

    def attend(query, key, value, *, mask=None, causal=False):
        scores = query @ key.T / math.sqrt(query.shape[-1])  # (L, S)
        n_q, n_k = scores.shape
        allowed = np.ones((n_q, n_k), bool)  # (L, S)
        if mask is not None:
            mask = np.broadcast_to(mask, (n_q, n_k))  # a (S,) key mask covers every query
            if mask.dtype == bool:
                if polarity == "+1":
                    scores = scores + mask
                elif polarity != "ignore":
                    allowed = mask if polarity == "attend" else ~mask
            elif floats == "refuse":
                raise TypeError("float masks are not accepted")
            elif floats == "added":
                scores = scores + mask
            elif floats != "ignore":
                allowed = (mask != 0) if floats == "nonzero attends" else (mask == 0)
        if causal:
            if alignment is None:
                raise NotImplementedError("no causal switch")
            if alignment == "refuse":
                raise ValueError("causal needs an explicit mask")
            if alignment != "ignore":
                offset = 0 if alignment == "top-left" else n_k - n_q
                allowed = allowed & np.tril(np.ones((n_q, n_k), bool), k=offset)
        filled = np.where(allowed, scores, fill)  # (L, S)
        with np.errstate(invalid="ignore"):
            e = np.exp(filled - filled.max(axis=-1, keepdims=True))  # NaN on rows of -inf
            weights = e / e.sum(axis=-1, keepdims=True)
        if empty_rows == "zeros":
            weights[~allowed.any(axis=-1)] = 0.0
        return weights @ value

    return attend


def conventions(result: P.MaskSemantics) -> tuple[str, str, str, str]:
    return tuple(getattr(result, name) for name in P.CONVENTION_FIELDS)


@pytest.mark.parametrize("settings, key_only, expected", [
    pytest.param({"empty_rows": "zeros"}, False,
                 ("attend", "added to scores", "top-left", "zeros"), id="like-torch-sdpa"),
    pytest.param({"polarity": "blocked", "floats": "nonzero attends", "alignment": "bottom-right", "fill": -1e30},
                 False, ("blocked", "read as boolean (nonzero = attend)", "bottom-right", "uniform"),
                 id="blocked-bottom-right-finite-fill"),
    pytest.param({"polarity": "+1", "alignment": None}, False,
                 ("added (True = +1)", "added to scores", "not built in", "nan"), id="additive-only"),
    pytest.param({"floats": "nonzero blocks", "alignment": "refuse"}, False,
                 ("attend", "read as boolean (nonzero = blocked)", "refused", "nan"), id="refuses-causal"),
    pytest.param({"polarity": "ignore", "floats": "ignore", "alignment": "ignore"}, False,
                 ("ignored", "ignored", "ignored", "not measured"), id="mask-ignored"),
    pytest.param({"floats": "refuse", "fill": -1e30}, False,
                 ("attend", "refused", "top-left", "uniform"), id="like-jax-mask"),
    pytest.param({"polarity": "blocked"}, True,
                 ("blocked", "added to scores", "top-left", "nan"), id="key-padding"),
    pytest.param({"empty_rows": "zeros"}, True,
                 ("attend", "added to scores", "top-left", "zeros"), id="key-padding-zeros"),
])
def test_probe_rediscovers_known_conventions(settings, key_only, expected):
    result = P.probe_mask_semantics(fake_attention(**settings), key_only=key_only)
    assert conventions(result) == expected


def test_probe_keeps_the_evidence():
    result = P.probe_mask_semantics(fake_attention(floats="refuse", alignment=None))
    np.testing.assert_allclose(result.evidence["boolean"], [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    assert result.evidence["float"] == "TypeError: float masks are not accepted"
    assert result.evidence["causal"] == "NotImplementedError: no causal switch"
    assert np.isnan(result.evidence["fully masked"][0]).all()  # row 0 had no allowed key
    np.testing.assert_allclose(result.evidence["fully masked"][1], [1.0, 0.0, 0.0])


def test_probe_reads_float_masks_exactly():
    """ln 3 added to one score of three zeros gives 3 / (1 + 1 + 3) = 0.6 on that key."""
    result = P.probe_mask_semantics(fake_attention())
    np.testing.assert_allclose(result.evidence["float"], [[0.2, 0.2, 0.6], [0.2, 0.6, 0.2]])


def test_probe_refuses_a_broken_adapter():
    def wrong_shape(query, key, value, *, mask=None, causal=False):
        return np.zeros((5, 5))

    with pytest.raises(ValueError, match=r"returned shape \(5, 5\) in the 'boolean' case, expected"):
        P.probe_mask_semantics(wrong_shape)


def test_differences_names_each_disagreeing_field():
    result = P.probe_mask_semantics(fake_attention(empty_rows="zeros"))
    row = L.MaskConvention("fake", "attend", "mask", "blocked", "added to scores", "top-left", "nan", "fake 1")
    assert result.differences(row) == {"true_means": ("blocked", "attend"), "fully_masked_row": ("nan", "zeros")}


def test_lessonlib_row_is_what_the_probe_measures():
    rows = [row for row in L.MASK_CONVENTIONS if row.library == "lessonlib"]
    assert len(rows) == 1
    result = L.probe_mask_semantics(lessonlib_attention())
    assert result.differences(rows[0]) == {}, result.evidence
    assert rows[0].measured_on == installed_version("lessonlib")
    assert "explicit align" in result.evidence["causal"]  # refused for a reason a reader can act on


def test_lessonlib_nan_policy_is_measured_as_nan():
    result = L.probe_mask_semantics(lessonlib_attention(fully_masked="nan"))
    assert result.fully_masked_row == "nan"


def test_every_table_row_uses_probe_words_and_has_an_adapter():
    vocabulary = dict(zip(P.CONVENTION_FIELDS, (P.TRUE_MEANS, P.FLOAT_MASK, P.CAUSAL_ALIGNMENT, P.FULLY_MASKED_ROW)))
    for row in L.MASK_CONVENTIONS:
        for name, words in vocabulary.items():
            assert getattr(row, name) in words, f"{row}: {name} is not a word the probe reports"
        target = probe_target(row)  # raises if a row could never be re-derived
        assert row.measured_on.startswith(f"{target.distribution} ")


def test_rows_are_unique():
    keys = [(row.library, row.api, row.argument) for row in L.MASK_CONVENTIONS]
    assert len(keys) == len(set(keys))


def test_unknown_row_has_no_adapter():
    row = L.MaskConvention("flax", "nn.dot_product_attention", "mask", "attend", "refused", "top-left",
                           "uniform", "flax 0")
    with pytest.raises(KeyError, match="no adapter for flax"):
        probe_target(row)


def test_precision_facts_cover_each_dtype_once_per_library():
    facts = L.PRECISION_FACTS
    for group in (facts.fills, facts.renormalised):
        pairs = [(fact.dtype, entry.split()[0]) for fact in group for entry in fact.measured_on]
        assert len(pairs) == len(set(pairs)), "a (dtype, library) pair is stated twice"
        for library in ("torch", "jax"):
            assert {d for d, lib in pairs if lib == library} == {"float16", "bfloat16", "float32", "float64"}


def test_precision_facts_agree_with_numpy_where_numpy_has_the_dtype():
    """A cheap local check; the libraries themselves are measured in tests/crosscheck."""
    with np.errstate(over="ignore"):
        for fact in L.PRECISION_FACTS.fills:
            if fact.dtype == "bfloat16":
                continue
            dtype = np.dtype(fact.dtype)
            assert float(np.array(-1e9).astype(dtype)) == fact.minus_1e9
            assert float(np.finfo(dtype).min) == fact.finfo_min
            assert float(np.finfo(dtype).min + np.finfo(dtype).min) == fact.finfo_min_doubled
    assert L.PRECISION_FACTS.renormalised_scores == MASKING.scores
    assert L.PRECISION_FACTS.renormalised_allowed == MASKING.allowed
