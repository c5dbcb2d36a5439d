"""Every exercise of the module, by name: the single source of points, cases and diagnoses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lessonlib.exercises.ex_capstone import CACHED_ATTENTION_STEP
from lessonlib.exercises.ex_cost import ONLINE_SOFTMAX, SCORE_MATRIX_BYTES, TILED_ATTENTION
from lessonlib.exercises.ex_interpretation import EXCLUSION_EFFECTS
from lessonlib.exercises.ex_masking import (
    CACHED_CAUSAL_MASK,
    CAUSAL_MASK,
    LEAKS_FUTURE,
    MASK_POLARITY,
    MASKED_SOFTMAX,
    PADDING_MASK,
)
from lessonlib.exercises.ex_position import (
    ALIBI_SLOPES,
    ALIBI_WEIGHTS,
    APPLY_ROPE,
    IS_ORDER_SENSITIVE,
    SINUSOIDAL_POSITIONS,
    T5_BUCKET,
)
from lessonlib.exercises.ex_scaling import (
    HEADS_BY_SLICES,
    Q1_CONTEXT,
    SATURATED_SHARE,
    SCALED_DOT_PRODUCT_ATTENTION,
)
from lessonlib.exercises.ex_training import CHANGED_PREDICTIONS
from lessonlib.exercises.sections import SECTIONS
from lessonlib.exercises.spec import Case, DiagnosisSpec, Exercise

EXERCISES: dict[str, Exercise] = {
    e.name: e
    for e in (
        SCALED_DOT_PRODUCT_ATTENTION, Q1_CONTEXT,
        MASKED_SOFTMAX, CAUSAL_MASK, PADDING_MASK, LEAKS_FUTURE, MASK_POLARITY, CACHED_CAUSAL_MASK,
        SINUSOIDAL_POSITIONS, APPLY_ROPE, IS_ORDER_SENSITIVE, ALIBI_SLOPES,
        SCORE_MATRIX_BYTES, ONLINE_SOFTMAX, TILED_ATTENTION,
        EXCLUSION_EFFECTS,
        ALIBI_WEIGHTS,
        CHANGED_PREDICTIONS,
        HEADS_BY_SLICES, SATURATED_SHARE, T5_BUCKET,
        CACHED_ATTENTION_STEP,
    )
}


@dataclass(frozen=True)
class RubricItem:
    """One thing a written answer is graded on, with what earns each score from 0 up to its maximum.

    anchors[k] describes an answer that earns k points on this item (anchors[0] is always given).
    """

    criterion: str
    anchors: tuple[str, ...]

    @property
    def points(self) -> int:
        return len(self.anchors) - 1


@dataclass(frozen=True)
class ManualQuestion:
    """A written answer graded by a person: a markdown answer cell tagged ``answer`` and ``manual``.

    cell_id is the cell's stable id in the exercise notebook; the model answer lives in the
    same cell of the solutions notebook. points is the sum of the rubric items' maxima.
    """

    name: str
    notebook: str
    cell_id: str
    points: float
    question: str
    section: str  # key of SECTIONS: where the topic is discussed
    rubric: tuple[RubricItem, ...] = ()

    def rubric_text(self) -> str:
        """The rubric as plain text, one item and its anchors after another."""
        lines = []
        for n, item in enumerate(self.rubric, start=1):
            lines.append(f"{n}. {item.criterion} (0-{item.points} points)")
            lines += [f"   {k}: {anchor}" for k, anchor in enumerate(item.anchors)]
        return "\n".join(lines)


Q2_RUBRIC = (
    RubricItem(
        "Why a weight is not the key's effect on the decision",
        (
            "No reason given, or the answer says a high weight means the key caused the decision.",
            "One valid reason, stated without showing how it breaks the link between weight and "
            "effect: e.g. 'there are other layers', or 'values matter too'.",
            "Explains that a weight is one intermediate combination: what excluding a key changes "
            "depends on its value compared with the others' (a large weight on a value close to the "
            "rest's weighted mean changes little), and the output then passes through other heads, "
            "the output projection, the residual stream, MLPs and later layers, so one map is not the "
            "model's dependence on its input.",
        ),
    ),
    RubricItem(
        "What would test a causal claim",
        (
            "No test, or only 'look at more attention maps'.",
            "Names an intervention (masking a key, changing an input) without saying what is held "
            "fixed or what is measured.",
            "A controlled change: exclude (ablate) a key before the softmax or change one input token, "
            "hold everything else fixed, and measure how much the output or prediction moves; rank "
            "keys by that effect, not by weight.",
        ),
    ),
)


Q6_RUBRIC = (
    RubricItem(
        "The choice, from measurements",
        (
            "No model named, or a model without a mask chosen because its accuracy is close to 1.",
            "Names the masked (causal) models, or one of them, without measurements on both kinds of "
            "future, or without weighing which of them also does the task.",
            "Chooses previous_alibi_causal: the three masked models are the only ones that changed no "
            "prediction under either future (random later tokens, one token repeated), and of them it "
            "does the task best (about 0.96 at length 16, against about 0.9 and 0.32).",
        ),
    ),
    RubricItem(
        "Whether the measurements settle the choice",
        (
            "No reason, or the answer says the unmasked models learned to ignore later tokens and so are safe.",
            "Says the mask prevents it, without saying how, or says accuracy is not enough without "
            "saying what goes wrong.",
            "The mask removes every later key before the softmax, so its weight is exactly 0 in every "
            "layer, whatever the input. The unmasked models give every later key a positive weight: "
            "their accuracy, and almost no change under random later tokens, describe inputs like the training "
            "data, while one token repeated changes some of their predictions; a measurement can show "
            "a change, never that none will happen.",
        ),
    ),
)


Q7_RUBRIC = (
    RubricItem(
        "Reading the measurements",
        (
            "No mechanism chosen, or one chosen by its loss at the training length alone.",
            "Chooses ALiBi, or says which mechanisms degrade, without the numbers that show it, without what "
            "happens to the others (learned, sinusoidal), or claiming that reading all 500 characters makes "
            "ALiBi predict better.",
            "Chooses ALiBi from the measurements: its loss stays flat from 1x to 8x (1.8 at each) while "
            "sinusoidal rises past the bigram's loss, RoPE and T5's buckets degrade from 2x on, the mask alone "
            "degrades from a worse start, and learned cannot be evaluated beyond its table; gives a reason "
            "(ALiBi's penalty is a fixed function of distance, defined at any distance; the others meet "
            "positions, offsets or spreads never seen in training); and says that reading all 500 characters "
            "is no better than reading the last 64 to 127 (about 1.79 against 1.78 on the same characters): "
            "no worse, not better.",
        ),
    ),
    RubricItem(
        "What a model this small can and cannot show",
        (
            "Takes every difference in the table as settled, or says nothing of its limits.",
            "Names one limit (one seed, a small model, one text) without saying what it does to the "
            "conclusions.",
            "Separates what holds from what does not: the order of the mechanisms beyond the training "
            "length and the shapes of the curves are large effects (tenths of a nat to nats); differences "
            "of a tenth of a nat or less at the training length (1.7 to 1.8), or of a hundredth between two "
            "contexts, could change with another seed; one small model on one text with 64-character "
            "windows says nothing certain about models a thousand times larger or trained on longer "
            "windows (Press et al.'s figure).",
        ),
    ),
)


MANUAL_QUESTIONS: dict[str, ManualQuestion] = {
    q.name: q
    for q in (
        ManualQuestion(
            "q2_attention_not_causal", "05_interpretation.ipynb", "q2-attention-not-causal", 4,
            "Why does an attention visualisation not by itself explain the final decision causally?",
            "interpretation", Q2_RUBRIC,
        ),
        ManualQuestion(
            "q6_streaming", "06_training.ipynb", "q6-streaming", 4,
            "Which stored previous-token model can stream, its predictions never changed by later tokens?",
            "training-causal", Q6_RUBRIC,
        ),
        ManualQuestion(
            "q7_length_table", "07_capstone.ipynb", "q7-length-table", 4,
            "Which mechanism would you choose to write texts of 500 characters, reading all of them at every "
            "step, would it predict better than from the last 64 to 127, and what can the table not tell you?",
            "capstone-length", Q7_RUBRIC,
        ),
    )
}


# exercise -> id of its answer cell in the released notebooks. Package data, so that a grader installed
# without the course checkout (`pip install`, Gradescope) finds answer cells as one run from a checkout
# does; `lessonlib exercises build` writes it from solutions/ and `verify` fails while it is stale.
ANSWER_CELLS_FILE = Path(__file__).with_name("answer_cells.json")


def released_answer_cells(path: Path = ANSWER_CELLS_FILE) -> dict[str, str]:
    """exercise -> id of the answer cell that defines it in the released notebooks."""
    return json.loads(path.read_text(encoding="utf-8"))


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
        if q.rubric and sum(item.points for item in q.rubric) != q.points:
            raise ValueError(f"question {q.name!r} is worth {q.points} points but its rubric adds up to "
                             f"{sum(item.points for item in q.rubric)}")


_check_sections()
