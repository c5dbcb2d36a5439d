"""lessonlib.training.text: the bundled corpus, its vocabulary and split, and the baselines it documents."""

from __future__ import annotations

import numpy as np
import pytest

from lessonlib.training import text


def test_the_corpus_is_the_published_file_with_65_characters():
    data = text.load()
    assert data.vocab.size == 65
    assert data.vocab.chars[:2] == "\n "
    assert data.train.size + data.validation.size == 1_115_394
    assert data.train.size == int(0.9 * 1_115_394)
    assert data.vocab.decode(data.train[:14]) == "First Citizen:"


def test_the_split_is_by_position_and_the_validation_text_is_the_end():
    data = text.load()
    whole = text.corpus()
    assert data.vocab.decode(data.validation[-20:]) == whole[-20:]
    assert data.vocab.decode(data.validation[:20]) == whole[data.train.size:data.train.size + 20]


def test_baselines_reproduce_the_provenance_note():
    scores = text.baselines()
    assert round(scores["unigram"], 2) == 3.35
    assert round(scores["bigram"], 2) == 2.48


def test_baselines_on_a_text_where_the_answer_is_known():
    train = np.array([0, 1] * 50)  # a b a b ...: the bigram is certain, the unigram a coin
    validation = np.array([0, 1, 0, 1, 0])
    assert text.unigram_loss(train, validation, 2) == pytest.approx(np.log(2))
    # add-one: p(b | a) = (50 + 1) / (50 + 2) for every scored pair
    assert text.bigram_loss(train, validation, 2) == pytest.approx(-np.log(51 / 52), rel=1e-2)
    with pytest.raises(ValueError, match="alpha must be positive"):
        text.bigram_loss(train, validation, 2, alpha=0.0)
    with pytest.raises(ValueError, match="never occurs in the training text"):
        text.unigram_loss(train, np.array([2]), 3)


def test_encode_and_decode_round_trip_and_refuse_unknown_characters():
    vocab = text.load().vocab
    line = "ROMEO:\nBut soft, what light!"
    assert vocab.decode(vocab.encode(line)) == line
    with pytest.raises(ValueError, match=r"character 'é' is not in the vocabulary of 65 characters"):
        vocab.encode("café")
    with pytest.raises(ValueError, match=r"id 65 is outside the vocabulary \(0..64\)"):
        vocab.decode([65])


def test_text_windows_give_the_next_character_as_target():
    data = text.load()
    task = text.TextWindows(data.train, data.vocab.size)
    tokens, targets = task.sample(4, 16, np.random.default_rng(0))
    assert tokens.shape == targets.shape == (4, 16)
    np.testing.assert_array_equal(tokens[:, 1:], targets[:, :-1])
    again, _ = task.sample(4, 16, np.random.default_rng(0))
    np.testing.assert_array_equal(tokens, again)
