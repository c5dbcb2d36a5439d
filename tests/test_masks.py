"""Unit tests of lessonlib.masks: padding, causal, window, combining, and bad input."""

import numpy as np
import pytest

import lessonlib as L


def test_padding_mask_marks_real_tokens():
    m = L.padding_mask([3, 1, 0], 4)
    assert m.dtype == bool and m.shape == (3, 4)
    assert m.tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]


@pytest.mark.parametrize(
    "lengths, error, message",
    [([5], ValueError, r"0\.\.4"), ([-1], ValueError, r"0\.\.4"), ([1.5], TypeError, "integers"),
     ([[1, 2]], ValueError, "1-D")],
)
def test_padding_mask_bad_lengths(lengths, error, message):
    with pytest.raises(error, match=message):
        L.padding_mask(np.array(lengths), 4)


def test_square_causal_mask_is_lower_triangle():
    np.testing.assert_array_equal(L.causal_mask(4), np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(L.causal_mask(3, 3, align="bottom-right"), np.tril(np.ones((3, 3), bool)))


def test_causal_alignments_for_unequal_lengths():
    top_left = L.causal_mask(2, 4, align="top-left")
    bottom_right = L.causal_mask(2, 4, align="bottom-right")
    assert top_left.tolist() == [[True, False, False, False], [True, True, False, False]]
    assert bottom_right.tolist() == [[True, True, True, False], [True, True, True, True]]
    np.testing.assert_array_equal(top_left, np.tril(np.ones((2, 4), bool)))
    np.testing.assert_array_equal(bottom_right, np.tril(np.ones((2, 4), bool), k=2))


def test_offsets_are_key_minus_query_and_causal_keeps_the_past():
    offsets = L.key_offsets(2, 4, align="bottom-right")  # queries at positions 2 and 3
    assert offsets.tolist() == [[-2, -1, 0, 1], [-3, -2, -1, 0]]
    np.testing.assert_array_equal(L.causal_mask(2, 4, align="bottom-right"), offsets <= 0)
    np.testing.assert_array_equal(L.key_offsets(3), np.arange(3)[None, :] - np.arange(3)[:, None])
    window = L.sliding_window_mask(4, window=2)
    np.testing.assert_array_equal(window, (L.key_offsets(4) <= 0) & (L.key_offsets(4) > -2))


def test_causal_mask_for_unequal_lengths_needs_alignment():
    with pytest.raises(ValueError, match="2 queries and 4 keys needs an explicit align"):
        L.causal_mask(2, 4)
    with pytest.raises(ValueError, match="align must be one of"):
        L.causal_mask(2, 4, align="left")
    with pytest.raises(ValueError, match="sliding-window mask for 2 queries and 4 keys needs an explicit align"):
        L.sliding_window_mask(2, 4, window=2)


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_causal_mask_refuses_bad_lengths(bad):
    with pytest.raises((ValueError, TypeError), match="n_queries"):
        L.causal_mask(bad)


def test_sliding_window():
    causal = L.sliding_window_mask(5, window=2)
    expected = np.tril(np.ones((5, 5), bool)) & ~np.tril(np.ones((5, 5), bool), k=-2)
    np.testing.assert_array_equal(causal, expected)
    both = L.sliding_window_mask(5, window=2, causal=False)
    assert both[2].tolist() == [False, True, True, True, False]
    np.testing.assert_array_equal(L.sliding_window_mask(4, window=10), L.causal_mask(4))
    with pytest.raises(ValueError, match="window must be at least 1"):
        L.sliding_window_mask(4, window=0)


def test_combine_puts_key_padding_on_the_key_axis():
    pad = L.padding_mask([2, 3], 3)  # (B=2, S=3)
    combined = L.combine_masks(L.causal_mask(3), pad)  # (2, 3, 3)
    assert combined.shape == (2, 3, 3)
    for b, length in enumerate([2, 3]):
        expected = np.tril(np.ones((3, 3), bool))
        expected[:, length:] = False  # every query loses the padded keys, no query row is removed
        np.testing.assert_array_equal(combined[b], expected)
    assert L.combine_masks(key_padding=pad).shape == (2, 1, 3)
    assert L.combine_masks(L.causal_mask(3), pad, heads=True).shape == (2, 1, 3, 3)


def test_combine_masks_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        L.combine_masks()
    with pytest.raises(ValueError, match=r"S=4 keys.*S=3"):
        L.combine_masks(L.causal_mask(4), L.padding_mask([1], 3))
    with pytest.raises(TypeError, match="key_padding must be a boolean"):
        L.combine_masks(key_padding=np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"key_padding must be \(batch, S\)"):
        L.combine_masks(key_padding=np.ones(3, bool))


def test_conventions_table_rows_are_complete():
    assert any(row.library == "lessonlib" for row in L.MASK_CONVENTIONS)
    for row in L.MASK_CONVENTIONS:
        assert row.true_means in L.probe.TRUE_MEANS  # the probe's words (tests/test_probe.py checks all fields)
        assert row.measured_on
