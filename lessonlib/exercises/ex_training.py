"""Exercise of 06_training: did a later token change an earlier prediction?

A model is run twice, on ``tokens`` and on a copy whose tokens after ``last_kept`` were replaced.
The answer reports how many of the scored predictions at or before ``last_kept`` changed: zero
for every input is what a model that streams (predicts as tokens arrive) must guarantee.
"""

from __future__ import annotations

import numpy as np

from lessonlib.exercises.spec import Case, DiagnosisSpec, Exercise, NumberOutput, matches_model, numbered

NOTEBOOK = "06_training.ipynb"


def _fraction(changed: np.ndarray, counted: np.ndarray) -> float:
    return float(changed[counted].mean())


def changed_reference(logits: np.ndarray, logits_changed: np.ndarray, targets: np.ndarray, last_kept: int) -> float:
    """Fraction of scored positions i <= last_kept whose prediction (argmax over V) differs.

    logits, logits_changed (B, L, V); targets (B, L), -1 where a position is not scored.
    """
    changed = logits.argmax(axis=-1) != logits_changed.argmax(axis=-1)  # (B, L)
    kept = np.arange(logits.shape[1]) <= last_kept  # (L,) positions whose inputs are unchanged
    return _fraction(changed, kept[None, :] & (targets >= 0))


def _unscored_counted(logits, logits_changed, targets, last_kept):
    """Every position up to last_kept counted, the unscored ones (target -1) included."""
    return changed_reference(logits, logits_changed, np.zeros_like(targets), last_kept)


def _changed_inputs_counted(logits, logits_changed, targets, last_kept):
    """Every scored position counted, including those after last_kept whose own tokens changed."""
    return changed_reference(logits, logits_changed, targets, logits.shape[1] - 1)


def _own_position_left_out(logits, logits_changed, targets, last_kept):
    """Positions before last_kept only, as if the query at last_kept could see a changed token."""
    return changed_reference(logits, logits_changed, targets, last_kept - 1)


def _target_zero_skipped(logits, logits_changed, targets, last_kept):
    """Positions scored where target > 0: every position whose target is token 0 left out."""
    changed = logits.argmax(axis=-1) != logits_changed.argmax(axis=-1)  # (B, L)
    kept = np.arange(logits.shape[1]) <= last_kept  # (L,)
    counted = kept[None, :] & (targets > 0)
    return _fraction(changed, counted) if counted.any() else None


def _logits_for_predictions(logits, logits_changed, targets, last_kept):
    """A position counted as changed when any logit moved, although its argmax did not."""
    moved = np.any(logits != logits_changed, axis=-1)  # (B, L)
    kept = np.arange(logits.shape[1]) <= last_kept  # (L,)
    return _fraction(moved, kept[None, :] & (targets >= 0))


def _compared_with_targets_models():
    """Right-or-wrong compared with the targets, in each run, instead of the two runs' predictions."""

    def correctness_changed(logits, logits_changed, targets, last_kept):
        right = logits.argmax(axis=-1) == targets  # (B, L)
        right_changed = logits_changed.argmax(axis=-1) == targets
        kept = np.arange(logits.shape[1]) <= last_kept
        return _fraction(right != right_changed, kept[None, :] & (targets >= 0))

    def accuracy_gap(logits, logits_changed, targets, last_kept):
        counted = (np.arange(logits.shape[1]) <= last_kept)[None, :] & (targets >= 0)
        right = _fraction(logits.argmax(axis=-1) == targets, counted)
        return abs(right - _fraction(logits_changed.argmax(axis=-1) == targets, counted))

    def wrong_after(logits, logits_changed, targets, last_kept):
        counted = (np.arange(logits.shape[1]) <= last_kept)[None, :] & (targets >= 0)
        return _fraction(logits_changed.argmax(axis=-1) != targets, counted)

    return correctness_changed, accuracy_gap, wrong_after


def _count_models():
    """How many predictions changed, not which share of the counted ones."""

    def count(logits, logits_changed, targets, last_kept):
        changed = logits.argmax(axis=-1) != logits_changed.argmax(axis=-1)
        kept = np.arange(logits.shape[1]) <= last_kept
        return int(changed[kept[None, :] & (targets >= 0)].sum())

    def per_sequence(logits, logits_changed, targets, last_kept):
        return count(logits, logits_changed, targets, last_kept) / logits.shape[0]

    return count, per_sequence


def _pair(rng: np.random.Generator, batch: int, length: int, vocab: int, unscored: int,
          last_kept: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Logits of two runs and the targets (B, L): at each position the second run's logits are the
    first's, shifted by a constant (the prediction stays) or rotated (the prediction moves)."""
    logits = rng.normal(size=(batch, length, vocab)) * float(rng.uniform(1.0, 3.0))  # (B, L, V)
    zero = (0, unscored + 1)  # the one position whose target is token 0 (below): its prediction moves
    logits[zero][0] = logits[zero].min() - 1.0  # and the first run does not predict token 0 there
    changed = logits.copy()  # (B, L, V)
    assert batch >= 2 and 0 < unscored < last_kept < length - 1
    # Which positions keep, shift or move their prediction is fixed by the sizes, so that each wrong
    # idea gives its own fraction on every draw; the seed draws the numbers. The unscored, the last
    # kept and the later positions all move; the scored ones before last_kept cycle through the kinds.
    b_index, i_index = np.indices((batch, length))  # (B, L) each
    kinds = (b_index + i_index) % 3  # (B, L) 0 same, 1 shifted, 2 rotated
    kinds[:, :unscored] = kinds[:, last_kept:] = 2
    kinds[zero] = 2
    for b, i in zip(*np.nonzero(kinds == 1)):
        changed[b, i] += float(rng.uniform(0.5, 2.0))  # every logit moves; the argmax stays
    for b, i in zip(*np.nonzero(kinds == 2)):
        shift = int(rng.integers(1, vocab))
        if (b, i) == zero and (logits[zero].argmax() + shift) % vocab == 0:
            shift = shift % (vocab - 1) + 1  # another shift: the second run does not predict token 0 either
        changed[b, i] = np.roll(changed[b, i], shift)  # the argmax moves
    # Targets that neither run predicts, so right-or-wrong never changes and the second run is always
    # wrong: each idea that compares with the targets then gives one fraction on every draw. Exactly one
    # target is token 0, at a position whose prediction moves and where neither run predicts token 0.
    before, after = logits.argmax(axis=-1), changed.argmax(axis=-1)  # (B, L)
    targets = np.full((batch, length), -1)  # (B, L)
    for token in range(vocab - 1, 0, -1):  # the smallest token above 0 that neither run predicts
        targets = np.where((token != before) & (token != after), token, targets)
    targets[zero] = 0
    targets[:, :unscored] = -1  # the first positions have no target
    return logits, changed, targets, last_kept


def _hand_made() -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One sequence of 4 positions, 3 tokens; tokens after position 2 changed."""
    logits = np.array([[[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [1.0, 0.0, 0.5], [0.0, 0.0, 2.0]]])  # (1, 4, 3)
    changed = np.array([[[0.0, 2.0, 1.0], [1.0, 4.0, 2.0], [0.0, 1.0, 0.5], [0.0, 0.0, 3.0]]])  # (1, 4, 3)
    targets = np.array([[-1, 0, 1, 2]])  # (1, 4)
    return logits, changed, targets, 2


def changed_public() -> list[Case]:
    rng = np.random.default_rng(606)
    return numbered([
        Case("", "1 sequence of 4, vocabulary 3: position 0 unscored, tokens after position 2 replaced",
             _hand_made()),
        Case("", "2 sequences of 8, vocabulary 5: position 0 unscored, tokens after position 4 replaced",
             _pair(rng, 2, 8, 5, 1, 4)),
        Case("", "3 sequences of 10, vocabulary 6: positions 0 and 1 unscored, tokens after position 6 replaced",
             _pair(rng, 3, 10, 6, 2, 6)),
    ])


CHANGED_HIDDEN = ((4, 12, 16, 1, 6), (2, 16, 8, 2, 9), (3, 13, 4, 3, 6), (5, 20, 16, 1, 14))  # B, L, V, unscored, last


def changed_hidden(rng: np.random.Generator) -> list[Case]:
    return [Case("", f"random: {b} sequences of {n}, vocabulary {v}, {k} unscored, tokens after {p} replaced",
                 _pair(rng, b, n, v, k, p)) for b, n, v, k, p in CHANGED_HIDDEN]


CHANGED_PREDICTIONS = Exercise(
    name="changed_predictions",
    notebook=NOTEBOOK,
    signature="changed_predictions(logits, logits_changed, targets, last_kept) -> float",
    points=2,
    reference=changed_reference,
    output=NumberOutput(),
    public=changed_public,
    hidden=changed_hidden,
    diagnoses=(
        DiagnosisSpec(
            "unscored_counted", "Unscored positions counted",
            "The answer counts the positions whose target is -1. They have no right answer (at position "
            "0 there is no previous token), so a model's output there is not a prediction anyone scores.",
            "Count only positions whose target is not -1: combine targets >= 0 with the positions up to "
            "last_kept.",
            "training-task", matches_model(_unscored_counted),
        ),
        DiagnosisSpec(
            "changed_inputs_counted", "Positions after last_kept counted",
            "The answer also counts the positions after last_kept. Their own tokens were replaced, so their "
            "predictions may change in any model, masked or not: they say nothing about whether a later "
            "token reached an earlier position.",
            "Count only positions 0 to last_kept, the ones whose inputs (the token there and every token "
            "before it) are the same in both runs.",
            "causality-test", matches_model(_changed_inputs_counted),
        ),
        DiagnosisSpec(
            "target_zero_skipped", "Positions whose target is token 0 left out",
            "The answer counts a position when its target is greater than 0, where 'scored' means 'not "
            "-1', at least 0: every position whose target is token 0, a real token, is left out.",
            "A position is scored when targets >= 0 (or targets != -1).",
            "training-task", matches_model(_target_zero_skipped),
        ),
        DiagnosisSpec(
            "own_position_left_out", "Position last_kept left out",
            "The answer stops one position early. The token at last_kept is unchanged and a causal query "
            "sees its own key, so position last_kept belongs to the positions that must not change.",
            "Include last_kept: positions i with i <= last_kept.",
            "causality-test", matches_model(_own_position_left_out),
        ),
        DiagnosisSpec(
            "compared_with_targets", "Right-or-wrong compared, not the two predictions",
            "The answer compares each run with the targets (right or wrong) instead of comparing the "
            "two runs with each other. A prediction can change from one wrong token to another, and "
            "then right-or-wrong does not change: the question is whether later tokens moved the "
            "prediction at all, not whether it was correct.",
            "Compare the two predictions directly: logits.argmax(axis=-1) != logits_changed.argmax(axis=-1); "
            "use the targets only to know which positions are scored (target -1: not scored).",
            "training-causal", matches_model(*_compared_with_targets_models()),
        ),
        DiagnosisSpec(
            "count_not_fraction", "A count instead of a share",
            "The answer is the number of changed predictions (or that number per sequence), not their "
            "share among the counted positions. A count grows with the batch and the length, so two "
            "models or two lengths cannot be compared by it.",
            "Divide by the number of counted positions: the mean of the changed flags over the scored "
            "positions up to last_kept.",
            "training-causal", matches_model(*_count_models()),
        ),
        DiagnosisSpec(
            "logits_for_predictions", "Any moved logit counted as a changed prediction",
            "The answer counts a position whenever its logits moved. The prediction is the token with the "
            "largest logit: logits can all move (adding one constant to every logit moves them all) while "
            "the same token stays on top.",
            "Compare predictions: logits.argmax(axis=-1) against logits_changed.argmax(axis=-1).",
            "training-task", matches_model(_logits_for_predictions),
        ),
    ),
    stub_hint="a prediction is the argmax over the vocabulary; which positions count?",
)
