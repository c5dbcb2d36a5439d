"""The capstone's stored language models: re-measured against what `make train` recorded, and generation."""

from __future__ import annotations

import numpy as np
import pytest

from lessonlib.training import POSITIONS, BeyondTableError
from lessonlib.training import lm_catalog as catalog
from lessonlib.training.sampling import generate, sample_next
from lessonlib.training.text import baselines

MARGIN = 0.3  # nats per character below the bigram baseline, at the training length


@pytest.fixture(scope="module")
def table() -> dict[str, dict[int, float | None]]:
    return catalog.length_table()


def test_stored_checkpoints_reproduce_the_recorded_losses(table):
    recorded = catalog.recorded()
    assert set(recorded["models"]) == set(POSITIONS)
    for position, losses in table.items():
        expected = recorded["models"][position]["validation_loss"]
        assert set(expected) == {str(length) for length in losses}
        for length, loss in losses.items():
            if expected[str(length)] is None:
                assert loss is None, f"{position} at {length}"
            else:
                assert loss == pytest.approx(expected[str(length)], abs=2e-3), f"{position} at {length}"


@pytest.mark.parametrize("position", ["alibi", "none"])
def test_the_recorded_use_of_long_context_is_reproduced(position):
    """Notebook 07's reading: ALiBi scores late characters as well from 64-127 characters of context as from
    448 or more (no worse, no better); the mask alone scores them worse from the longer context."""
    measured = catalog.context_use(catalog.stored(position))
    recorded = catalog.recorded()["models"][position]["context_use"]
    assert measured == pytest.approx(recorded, abs=2e-3)
    if position == "alibi":
        assert abs(measured["long"] - measured["near"]) < 0.02
    else:
        assert measured["long"] > measured["near"] + 0.1 > measured["first"] + 0.1


def test_windows_are_cut_from_the_text_and_scored_on_the_next_character():
    ids = np.arange(20)
    tokens, targets = catalog.windows(ids, np.array([0, 5]), 4)
    np.testing.assert_array_equal(tokens, [[0, 1, 2, 3], [5, 6, 7, 8]])
    np.testing.assert_array_equal(targets, tokens + 1)
    with pytest.raises(ValueError, match=r"need characters 16 .. 20, but ids has 0 .. 19"):
        catalog.windows(ids, np.array([16]), 4)


def test_every_model_beats_the_bigram_baseline_by_a_clear_margin(table):
    bigram = baselines()["bigram"]
    assert catalog.recorded()["baselines"]["bigram"] == pytest.approx(bigram, abs=1e-4)
    for position, losses in table.items():
        assert losses[catalog.TRAIN_LENGTH] < bigram - MARGIN, position


def test_learned_positions_stop_at_their_table_and_the_others_are_measured(table):
    lengths = [catalog.TRAIN_LENGTH * f for f in catalog.EVAL_FACTORS]
    assert [table["learned"][n] is None for n in lengths] == [False, True, True, True]
    for position in set(POSITIONS) - {"learned"}:
        assert all(np.isfinite(table[position][n]) for n in lengths), position


def test_the_checkpoints_are_small():
    total = sum(catalog.path(p).stat().st_size for p in POSITIONS)
    assert total < 1600 * 1024, f"the language-model checkpoints take {total / 1024:.0f} KB"


@pytest.mark.parametrize("position", POSITIONS)
def test_generation_with_the_cache_equals_generation_by_recomputation(position):
    model = catalog.stored(position)
    prompt = np.array([1, 2, 3, 4, 5])
    cached = generate(model, prompt, 150, temperature=0.8, seed=1, window=catalog.TRAIN_LENGTH)
    recomputed = generate(model, prompt, 150, temperature=0.8, seed=1, window=catalog.TRAIN_LENGTH,
                          use_cache=False)
    np.testing.assert_array_equal(cached, recomputed)
    assert cached.shape == (150,)


def test_generated_text_depends_on_the_seed_and_temperature_zero_is_deterministic():
    first = catalog.generate_text("rope", "ROMEO:\n", 80, seed=0)
    assert len(first) == 80 and first == catalog.generate_text("rope", "ROMEO:\n", 80, seed=0)
    assert first != catalog.generate_text("rope", "ROMEO:\n", 80, seed=1)
    assert catalog.generate_text("rope", "ROMEO:\n", 40, temperature=0, seed=0) == catalog.generate_text(
        "rope", "ROMEO:\n", 40, temperature=0, seed=5)


def test_sampling_follows_the_softmax_and_refuses_a_negative_temperature():
    rng = np.random.default_rng(0)
    logits = np.log(np.array([0.7, 0.2, 0.1]))
    draws = np.bincount([sample_next(logits, 1.0, rng) for _ in range(4000)], minlength=3) / 4000
    np.testing.assert_allclose(draws, [0.7, 0.2, 0.1], atol=0.03)
    assert sample_next(logits, 0.0, rng) == 0
    with pytest.raises(ValueError, match="temperature must be 0"):
        sample_next(logits, -1.0, rng)


def test_unbounded_generation_with_learned_positions_stops_at_the_table():
    model = catalog.stored("learned")
    with pytest.raises(BeyondTableError, match="beyond the learned position table, which has 64 rows"):
        generate(model, np.array([1, 2]), 100, window=None)


def test_a_mask_that_lets_the_future_in_drives_the_training_loss_far_down():
    def leaky(n):
        return np.ones((n, n), dtype=bool)

    _, honest = catalog.train_briefly("rope", 120, batch_size=16, progress=False)
    _, leaked = catalog.train_briefly("rope", 120, batch_size=16, causal_mask=leaky, progress=False)
    _, again = catalog.train_briefly("rope", 120, batch_size=16, causal_mask=leaky, progress=False)
    np.testing.assert_array_equal(leaked, again)
    assert leaked[-10:].mean() < honest[-10:].mean() - 1.0
