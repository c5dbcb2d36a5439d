"""Every exercise of the module, by name: the single source of points, cases and diagnoses."""

from __future__ import annotations

from dataclasses import dataclass

from lessonlib.exercises.ex_cost import SCORE_MATRIX_BYTES, TILED_ATTENTION
from lessonlib.exercises.ex_masking import CAUSAL_MASK, MASKED_SOFTMAX, PADDING_MASK
from lessonlib.exercises.ex_position import APPLY_ROPE, SINUSOIDAL_POSITIONS
from lessonlib.exercises.ex_scaling import Q1_CONTEXT, SCALED_DOT_PRODUCT_ATTENTION
from lessonlib.exercises.sections import SECTIONS
from lessonlib.exercises.spec import Case, DiagnosisSpec, Exercise

EXERCISES: dict[str, Exercise] = {
    e.name: e
    for e in (
        SCALED_DOT_PRODUCT_ATTENTION, Q1_CONTEXT,
        MASKED_SOFTMAX, CAUSAL_MASK, PADDING_MASK,
        SINUSOIDAL_POSITIONS, APPLY_ROPE,
        SCORE_MATRIX_BYTES, TILED_ATTENTION,
    )
}


@dataclass(frozen=True)
class ManualQuestion:
    """A written answer graded by a person: a markdown answer cell tagged ``answer`` and ``manual``.

    cell_id is the cell's stable id in the exercise notebook; the model answer lives in the
    same cell of the solutions notebook.
    """

    name: str
    notebook: str
    cell_id: str
    points: float
    question: str
    section: str  # key of SECTIONS: where the topic is discussed


MANUAL_QUESTIONS: dict[str, ManualQuestion] = {
    q.name: q
    for q in (
        ManualQuestion(
            "q2_attention_not_causal", "04_cost.ipynb", "q2-attention-not-causal", 2,
            "Why does an attention visualisation not by itself explain the final decision causally?",
            "interpretation",
        ),
    )
}


def get_exercise(name: str) -> Exercise:
    """The exercise called ``name``; a KeyError lists the known names."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"no exercise called {name!r}; known exercises: {', '.join(EXERCISES)}") from None


def public_cases(name: str) -> list[Case]:
    """The public cases of exercise ``name`` (the ones ``check`` runs)."""
    return get_exercise(name).public_cases()


def hidden_cases(name: str, seed: int) -> list[Case]:
    """Hidden cases of exercise ``name`` drawn from ``seed``: the same seed gives the same cases."""
    return get_exercise(name).hidden_cases(seed)


def all_diagnoses() -> dict[str, DiagnosisSpec]:
    """Every diagnosis by name (a name shared by two exercises means the same misconception)."""
    found: dict[str, DiagnosisSpec] = {}
    for exercise in EXERCISES.values():
        for spec in exercise.diagnoses:
            found.setdefault(spec.name, spec)
    return found


def _check_sections() -> None:
    for exercise in EXERCISES.values():
        for spec in exercise.diagnoses:
            if spec.section not in SECTIONS:
                raise KeyError(f"diagnosis {spec.name!r} points to unknown section {spec.section!r}")
    for q in MANUAL_QUESTIONS.values():
        if q.section not in SECTIONS:
            raise KeyError(f"question {q.name!r} points to unknown section {q.section!r}")


_check_sections()
