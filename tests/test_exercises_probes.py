"""The functions handed to answers (layers, attention functions), the exclusion formula, the written question."""

from __future__ import annotations

import json

import nbformat
import numpy as np
import pytest
from test_exercises_check import ROOT

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS, hidden_cases, public_cases, runner
from lessonlib.exercises.ex_interpretation import exclusion_reference
from lessonlib.exercises.ex_masking import LEAKING_MASKS, _compare_exactly
from lessonlib.exercises.ex_position import _order_exact
from lessonlib.exercises.runner import ProbeAttention, build_probe, describe_value, probe, probe_fields, text_of
from lessonlib.grading.isolation import wire

SEEDS = range(6)


def _cases(name: str) -> list:
    return public_cases(name) + [c for seed in SEEDS for c in hidden_cases(name, seed)]


def test_every_layer_leaks_exactly_when_its_mask_says_so():
    """A leaking mask leaks when the step returns an earlier position; a one-position step cannot."""
    for case in _cases("leaks_future"):
        fields = probe_fields(case.args[0])
        leaks = fields["mask"] in LEAKING_MASKS and fields["queries"] > 1
        assert EXERCISES["leaks_future"].expected(case) == leaks, case.description
    assert any(probe_fields(c.args[0])["queries"] == 1 and probe_fields(c.args[0])["mask"] in LEAKING_MASKS
               for c in _cases("leaks_future")), "a one-position step with a leaking mask is among the cases"


def test_rounding_noise_is_visible_to_an_exact_comparison_but_not_a_leak():
    cases = [c for c in _cases("leaks_future") if "causal-rounding" in c.tags]
    assert cases
    for case in cases:
        assert _compare_exactly(*case.args)  # the exact_float_equality diagnosis has evidence
        assert EXERCISES["leaks_future"].expected(case) is False


def test_order_sensitivity_follows_the_position_scheme():
    for case in _cases("is_order_sensitive"):
        blind = "blind" in case.tags
        assert EXERCISES["is_order_sensitive"].expected(case) == (not blind), case.description
        if "rowwise" in case.tags:  # exactly equivariant: an exact comparison is right here
            assert not _order_exact(*case.args)
        if "plain" in case.tags:  # equivariant up to rounding: an exact comparison is fooled
            assert _order_exact(*case.args)


def test_a_probe_is_rebuilt_identically_from_its_description_after_the_wire():
    description = probe("layer", d=4, seed=3, mask="causal", position="rope")
    frames: list[bytes] = []
    encoded = wire.encode_args((description, 5, 4), frames)
    (back, length, width) = wire.decode_args(json.loads(json.dumps(encoded)), [])
    x = np.random.default_rng(0).normal(size=(length, width))
    np.testing.assert_array_equal(build_probe(back)(x), build_probe(description)(x))


def test_a_handle_calls_out_and_holds_nothing_but_the_handle(monkeypatch: pytest.MonkeyPatch):
    """In the grader a probe is a handle: each call goes to REMOTE_CALL (the worker's keeper)."""
    description = probe("layer", d=4, seed=3, mask="causal")
    handle = runner.probe_handle("layer", "t0k3n")
    calls = []

    def remote(h, arrays):
        calls.append(h)
        return runner.call_probe(description, arrays)

    monkeypatch.setattr(runner, "REMOTE_CALL", remote)
    layer = build_probe(handle)
    x = np.random.default_rng(0).normal(size=(5, 4))
    assert np.array_equal(layer(x), build_probe(description)(x)) and calls == [handle]
    held = [c.cell_contents for c in layer.__closure__]
    held += [c.cell_contents for h in held for c in getattr(h, "__closure__", None) or ()]
    assert not any("causal" in repr(h) or isinstance(h, runner.ProbeLayer) for h in held)
    with pytest.raises(TypeError, match="object array"):
        layer(np.array([[object()] * 4] * 5))
    monkeypatch.setattr(runner, "REMOTE_CALL", None)
    with pytest.raises(RuntimeError, match="only be called while grading"):
        layer(x)


def test_the_keeper_refuses_probe_inputs_far_beyond_any_exercise():
    layer = probe("layer", d=2, seed=1)
    with pytest.raises(ValueError, match="at most 512 positions"):
        runner.call_probe(layer, [np.zeros((600, 2))])
    with pytest.raises(ValueError, match="at most 65,536 numbers"):
        runner.call_probe(layer, [np.zeros((2, 40_000))])
    attend = probe("attention", polarity="attend")
    q = np.zeros((2048, 1))
    with pytest.raises(ValueError, match="scores while grading"):
        runner.call_probe(attend, [q, q, q, np.ones((2048, 2048), dtype=bool)[:1]])


def test_a_layer_refuses_the_wrong_width_with_the_width_it_takes():
    layer = build_probe(probe("layer", d=4, seed=1, mask="causal"))
    with pytest.raises(ValueError, match=r"\(length, 4\)"):
        layer(np.zeros((3, 5)))


@pytest.mark.parametrize("polarity", ["attend", "blocked"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_attention_functions_follow_their_polarity_in_every_precision(polarity, dtype):
    fn = ProbeAttention(polarity, scale=60.0, dtype=dtype, empty="zeros")
    mask = np.array([[True, False, False]])
    weights = fn(np.zeros((1, 2)), np.zeros((3, 2)), np.eye(3), mask)[0]
    assert weights.dtype == np.dtype(dtype)
    expected = [1.0, 0.0, 0.0] if polarity == "attend" else [0.0, 0.5, 0.5]
    np.testing.assert_allclose(weights.astype(float), expected, atol=1e-3)
    with pytest.raises(TypeError, match="boolean"):
        fn(np.zeros((1, 2)), np.zeros((3, 2)), np.eye(3), mask.astype(int))


def test_a_returned_word_crosses_as_plain_data():
    value = describe_value("attend")
    assert value.type_name == "str" and value.data.dtype == np.uint8 and text_of(value) == "attend"


def test_exclusion_effect_is_the_weight_times_the_gap_to_the_others_mean_through_w_o():
    rng = np.random.default_rng(11)
    for _ in range(20):
        s, d, d_v, d_out = rng.integers(2, 7), rng.integers(1, 5), rng.integers(1, 4), rng.integers(1, 4)
        q, k, v = rng.normal(size=d) * 2, rng.normal(size=(s, d)), rng.normal(size=(s, d_v))
        w_o = rng.normal(size=(d_v, d_out))
        scores = k @ q / np.sqrt(d)
        w = np.exp(scores - scores.max())
        w /= w.sum()
        o = w @ v
        rest_mean = np.array([(w @ v - w[j] * v[j]) / (1 - w[j]) for j in range(s)])  # (S, d_v)
        effects = exclusion_reference(q, k, v, w_o)
        np.testing.assert_allclose(effects, w * np.linalg.norm((rest_mean - v) @ w_o, axis=-1), rtol=1e-9)
        np.testing.assert_allclose(effects, w / (1 - w) * np.linalg.norm((o - v) @ w_o, axis=-1), rtol=1e-9)
        np.testing.assert_allclose(exclusion_reference(q, k, v, np.eye(d_v)),
                                   w * np.linalg.norm(rest_mean - v, axis=-1), rtol=1e-9)


def test_a_move_that_w_o_ignores_has_no_effect_after_it():
    """The first public case: the key with the largest weight moves o, but only along a direction W_o maps to 0."""
    q, k, v, w_o = public_cases("exclusion_effects")[0].args
    before = exclusion_reference(q, k, v, np.eye(v.shape[1]))
    after = exclusion_reference(q, k, v, w_o)
    assert np.argmax(before) == 0 and before[0] > 0.5
    assert after[0] < 1e-12 and after[1:].min() > 0.1


def test_a_large_weight_on_a_small_value_is_not_harmless():
    """The claim the model answer must not make: here the top-weighted key has value 0 and matters most."""
    q = np.array([3.0, 0.0])
    k = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    v = np.array([[0.0], [10.0], [10.0]])
    effects = exclusion_reference(q, k, v, np.eye(1))
    assert np.argmax(effects) == 0 and effects[0] > 1.0


def _cell(folder: str, cell_id: str) -> str:
    nb = nbformat.read(ROOT / folder / "05_interpretation.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def test_the_written_question_has_a_rubric_with_anchors_for_every_score():
    q = MANUAL_QUESTIONS["q2_attention_not_causal"]
    assert q.notebook == "05_interpretation.ipynb" and len(q.rubric) == 2
    assert all(len(item.anchors) == 3 for item in q.rubric)  # 0, 1 and 2 points
    assert q.points == sum(item.points for item in q.rubric)
    prompt = _cell("exercises", "q2-prompt")
    assert all(item.criterion in prompt for item in q.rubric)  # learners know what is graded


def test_the_model_answer_lives_only_in_the_solutions_and_uses_the_exclusion_formula():
    model = _cell("solutions", "q2-attention-not-causal")
    assert "w_j (m_{-j} - v_j)" in model and "is not harmless" in model  # new minus old, as in 05
    released = nbformat.read(ROOT / "exercises" / "05_interpretation.ipynb", as_version=4)
    text = "\n".join(c.source for c in released.cells)
    assert "Model answer" not in text and "For graders" not in text and "m_{-j}" not in text
    assert "For graders" in _cell("solutions", "q2-rubric")


@pytest.mark.parametrize("name, field", [("leaks_future", "mask"), ("mask_polarity", "polarity"),
                                         ("is_order_sensitive", "position")])
def test_where_a_hidden_probe_stands_says_nothing_of_its_kind(name: str, field: str):
    """Hidden probe cases come in an order drawn from the seed: an answer cannot count its calls."""
    orders = {tuple(probe_fields(c.args[0])[field] for c in hidden_cases(name, seed)) for seed in SEEDS}
    assert len(orders) > 1
    kinds = {tuple(sorted(order)) for order in orders}
    assert len(kinds) == 1  # the same kinds every time, in another order
