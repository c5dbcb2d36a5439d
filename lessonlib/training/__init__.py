"""Tiny attention models trained in NumPy: forward, hand-written backward, Adam, toy tasks.

What notebook 06 trains, to ask the lesson's questions of trained weights instead of random
ones: can a model without position learn an order-dependent task, what does a causal mask alone
give it, how does each position mechanism behave past its training length, and do attention
weights point at what a trained model uses. And what notebook 07, the capstone, trains: a small
decoder-only character language model (:mod:`lessonlib.training.lm`) on the bundled Tiny
Shakespeare text (:mod:`lessonlib.training.text`).
"""

from lessonlib.training.checkpoint import CheckpointError
from lessonlib.training.lm import CharModel, KVCache, Plugs
from lessonlib.training.loop import Adam, TrainingDiverged, accuracy, predictions, train
from lessonlib.training.model import POSITIONS, AttentionModel, BeyondTableError
from lessonlib.training.tasks import TASKS, CopyBack, Mode, check_task

__all__ = [
    "POSITIONS", "TASKS", "Adam", "AttentionModel", "BeyondTableError", "CharModel", "CheckpointError", "CopyBack",
    "KVCache", "Mode", "Plugs",
    "TrainingDiverged", "accuracy", "check_task", "predictions", "train",
]
