"""The generation explorer's pure functions (no browser): text, refusals and the first choice's distribution."""

from __future__ import annotations

import dataclasses
import html
import time

import numpy as np
import pytest

from lessonlib.explorers import generation


def test_the_default_view_writes_the_asked_length_and_answers_in_about_a_second():
    generation.compute(generation.Settings())  # loads the checkpoint once
    start = time.perf_counter()
    result = generation.compute(generation.Settings())
    elapsed = time.perf_counter() - start
    assert len(result.text) == 200 and not result.refusal
    assert elapsed < 5.0, f"one update took {elapsed:.1f} s"  # generous: the machine may be busy
    assert generation.describe(result).endswith("ROMEO:\n" + result.text)
    assert 0.0 < result.top_probs.sum() <= 1.0 + 1e-9 and np.all(np.diff(result.top_probs) <= 0)


def test_temperature_zero_puts_all_weight_on_one_character_and_ignores_the_seed():
    cold = generation.compute(generation.Settings(temperature=0.0))
    assert cold.top_probs[0] == 1.0
    other = generation.compute(generation.Settings(temperature=0.0, seed=3))
    assert cold.text == other.text


def test_a_prompt_outside_the_vocabulary_is_refused_in_the_readout():
    result = generation.compute(dataclasses.replace(generation.Settings(), prompt="naïve"))
    assert result.text == "" and "'ï' is not in the vocabulary" in generation.describe(result)
    assert "refused" in generation.alt_text(result)
    assert "empty" in generation.describe(generation.compute(dataclasses.replace(generation.Settings(), prompt="")))


def test_every_mechanism_writes():
    for mechanism in ("none", "learned", "alibi"):
        result = generation.compute(generation.Settings(mechanism=mechanism, length=50))
        assert len(result.text) == 50


def test_show_readout_follows_the_controls():
    pytest.importorskip("ipywidgets")
    box = generation.show()
    controls = {getattr(child, "description", None): child for child in box.children}
    readout = next(c for c in box.children if "lessonlib-readout" in c._dom_classes)
    assert html.escape(generation.describe(generation.compute(generation.Settings()))) in readout.value
    controls["position mechanism"].value = "alibi"
    controls["characters"].value = 50
    expected = generation.describe(generation.compute(generation.Settings(mechanism="alibi", length=50)))
    assert html.escape(expected) in readout.value
