"""A grade does not depend on the hidden cases' seed.

Every wrong answer (those of ``exercise_answers`` and the wrong ideas the exercises re-enact to
recognise a misconception) is judged on the public and hidden cases under 20 seeds, the way ``check``
and the grader judge it: the same diagnoses and the same points every time. Without ``--seed``,
``lessonlib grade`` uses the assignment's seed in any output folder.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import numpy as np
import pytest
from helpers.exercise_answers import WRONG

from lessonlib.exercises import EXERCISES, CheckResult, Outcome, check, judge, run_case, run_cases
from lessonlib.exercises.runner import probe_fields
from lessonlib.exercises.spec import Case, DetectFn, Exercise

SEEDS = range(20)


@functools.cache
def _cases(name: str, seed: int) -> tuple[Case, ...]:
    exercise = EXERCISES[name]
    return tuple(exercise.public_cases() + exercise.hidden_cases(seed))


# Outcomes of the cases that no seed changes: the public ones, and the hidden case where peak memory is
# measured (its inputs are fixed, see the test below). Each is run once per answer, not once per seed.
_FIXED: dict[tuple, Outcome] = {}


def _outcome(key: object, name: str, case: Case, run: Callable[[], Outcome]) -> Outcome:
    if not (case.id.startswith("public") or case.trace_memory):
        return run()
    if (key, name, case.id) not in _FIXED:
        _FIXED[key, name, case.id] = run()
    return _FIXED[key, name, case.id]


def _answer_result(name: str, answer: object, seed: int) -> CheckResult:
    """What ``check(name, answer, seed=seed)`` finds: the answer run here on every case, the cases judged."""
    cases = _cases(name, seed)
    outcomes = [_outcome(answer, name, c, lambda c=c: run_cases(answer, [c])[0]) for c in cases]
    return judge(EXERCISES[name], cases, outcomes)


def _model_result(exercise: Exercise, model: Callable, seed: int) -> CheckResult:
    """A wrong idea judged as an answer. It is called on the cases' own inputs, as the diagnosis calls
    it (a layer handed to it is the layer's description, which it builds itself)."""
    cases = _cases(exercise.name, seed)
    if exercise.kind == "value":
        outcomes = [run_case(model(), (), call=False) for _ in cases]
    else:
        outcomes = [_outcome(model, exercise.name, c, lambda c=c: run_case(
            functools.partial(model, *c.args), (), trace_memory=c.trace_memory)) for c in cases]
    return judge(exercise, cases, outcomes)


def _models(detect: DetectFn) -> list[Callable]:
    """The wrong ideas a diagnosis re-enacts (``matches_model``), through ``any_of`` and wrappers."""
    found = inspect.getclosurevars(detect).nonlocals
    models = list(found.get("models", ()))
    inner = list(found.get("detectors", ()))
    if callable(found.get("detect")):
        inner.append(found["detect"])
    for d in inner:
        models += _models(d)
    return models


MODELS = [
    (exercise, spec.name, model)
    for exercise in EXERCISES.values() for spec in exercise.diagnoses for model in _models(spec.detect)
]


def _same_under_every_seed(grade: Callable[[int], CheckResult], diagnosis: str) -> dict[int, CheckResult]:
    results = {seed: grade(seed) for seed in SEEDS}
    found = {seed: tuple(r.diagnosis_names) for seed, r in results.items()}
    points = {seed: r.points for seed, r in results.items()}
    assert all(diagnosis in names for names in found.values()), found
    assert len(set(found.values())) == 1, found
    assert len(set(points.values())) == 1, points
    return results


def _label(item: tuple) -> str:
    name = getattr(item[0], "name", item[0])
    return f"{name}-{item[1]}-{getattr(item[2], '__name__', repr(item[2]))}"


@pytest.mark.parametrize(("exercise", "diagnosis", "answer"), WRONG, ids=[_label(w) for w in WRONG])
def test_a_wrong_answer_gets_one_diagnosis_and_one_score_whatever_the_seed(exercise, diagnosis, answer):
    results = _same_under_every_seed(lambda seed: _answer_result(exercise, answer, seed), diagnosis)
    direct = check(exercise, answer, seed=SEEDS[-1], quiet=True)  # the learner's own path, once
    assert (direct.points, direct.diagnosis_names) == (results[SEEDS[-1]].points, results[SEEDS[-1]].diagnosis_names)


@pytest.mark.parametrize(("exercise", "diagnosis", "model"), MODELS, ids=[_label(m) for m in MODELS])
def test_a_wrong_idea_an_exercise_knows_gets_its_diagnosis_whatever_the_seed(exercise, diagnosis, model):
    _same_under_every_seed(lambda seed: _model_result(exercise, model, seed), diagnosis)


def test_the_wrong_ideas_are_found():
    named = {diagnosis for _, diagnosis, _ in MODELS}
    assert {"missing_scale", "inverted_polarity", "rope_half_pairing", "order_exact_equality",
            "online_not_rescaled", "exclusion_zeroed_key", "perturbs_only_last_token"} <= named
    assert len(MODELS) >= 40


def _order_by_sorting(layer, x):
    """The permutation not undone, and drawn from x: for some x it is the identity."""
    p = np.argsort(x[0, :, 0])
    return not np.allclose(layer(x[:, p]), layer(x))


def test_a_permutation_that_is_sometimes_the_identity_is_still_not_undone():
    """The learner's own check names the permutation not undone; every seed must say the same, even
    where the drawn permutation leaves an order-blind case unchanged (and that case comes out right)."""
    for seed in SEEDS:
        result = _answer_result("is_order_sensitive", _order_by_sorting, seed)
        assert result.diagnosis_names == ["permutation_not_undone"], (seed, result.diagnosis_names)


@pytest.mark.parametrize("name", [n for n, e in EXERCISES.items() if e.hidden is not None])
def test_every_seed_draws_the_same_kinds_of_hidden_case(name):
    """Hidden cases differ in their numbers (a layer's weights included), not in their shapes or kinds."""
    def kind(arg: object) -> object:
        if isinstance(arg, str):  # a layer or attention function: what it is, not its weights or sharpness
            return tuple(sorted((k, v) for k, v in probe_fields(arg).items() if k not in ("seed", "scale")))
        return np.shape(arg)

    def kinds(seed: int) -> list[tuple]:
        return sorted((tuple(sorted(c.tags)), tuple(kind(a) for a in c.args), c.trace_memory)
                      for c in EXERCISES[name].hidden_cases(seed))

    first = kinds(0)
    assert all(kinds(seed) == first for seed in SEEDS)


def test_the_hidden_memory_case_is_the_same_under_every_seed():
    """Where the grader reads peak memory, the inputs are fixed (the tests above run it once)."""
    def memory(seed: int) -> list[Case]:
        return [c for c in EXERCISES["tiled_attention"].hidden_cases(seed) if c.trace_memory]

    first = memory(0)
    assert len(first) == 1
    for seed in SEEDS:
        (case,) = memory(seed)
        assert case.id == first[0].id and case.description == first[0].description
        for a, b in zip(case.args, first[0].args):
            np.testing.assert_array_equal(a, b)
