"""The stored checkpoints notebook 06 loads: what each one is, how it is made, what it scored.

Every model here has d_model 32 and 8 heads, so that ALiBi's slopes 2^(-8h/H) run from 1/2 to
1/256 as in the ALiBi paper's 8-head models (with 2 heads they would be 1/16 and 1/256). Even the
steepest of them does not single out one neighbour: trained with the causal mask, the slope-1/2
head puts about 0.28 of its weight on key i - 1 at length 16, and the model is right 96% of the
time all the same (notebook 06, section 4). Each model is trained at length 16 with batch 64,
Adam at 3e-3, seed 0.

Notebook 06 measures every accuracy itself, with ``accuracy`` and :func:`evaluate` (a few
seconds for all of them). ``python -m lessonlib.training.catalog`` (``make train``) trains the models again, writes
``checkpoints/<name>.npz`` and records the accuracies it measured in ``checkpoints/accuracies.json``,
which the tests compare with a fresh evaluation of each stored checkpoint.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from lessonlib._checks import check_choice
from lessonlib.training.loop import accuracy, train
from lessonlib.training.model import AttentionModel, BeyondTableError
from lessonlib.training.tasks import TASKS

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
ACCURACIES = CHECKPOINT_DIR / "accuracies.json"
TRAIN_LENGTH = 16
EVAL_LENGTHS = (16, 32, 64)  # 1x, 2x and 4x the training length
EVAL_SEQUENCES = 512
D_MODEL, N_HEADS = 32, 8


@dataclass(frozen=True)
class Spec:
    """One stored model: its task, its architecture and how long it trains."""

    name: str
    task: str
    position: str
    causal: bool = False
    n_layers: int = 1
    steps: int = 1000

    def build(self) -> AttentionModel:
        """The untrained model (the learned table has exactly the training length's rows)."""
        max_length = TRAIN_LENGTH if self.position == "learned" else max(EVAL_LENGTHS)
        return AttentionModel(TASKS[self.task].vocab_size, d_model=D_MODEL, n_heads=N_HEADS, n_layers=self.n_layers,
                              position=self.position, causal=self.causal, max_length=max_length, seed=0)

    @property
    def path(self) -> Path:
        return CHECKPOINT_DIR / f"{self.name}.npz"


SPECS = (
    *(Spec(f"previous_{p}", "previous", p) for p in ("none", "sinusoidal", "learned", "rope", "alibi", "relative")),
    Spec("previous_none_causal", "previous", "none", causal=True),
    Spec("previous_none_causal_2layers", "previous", "none", causal=True, n_layers=2, steps=1500),
    Spec("previous_alibi_causal", "previous", "alibi", causal=True, steps=1500),
    Spec("mode_none", "mode", "none"),
)
BY_NAME = {spec.name: spec for spec in SPECS}


def spec(name: str) -> Spec:
    """The spec of the stored model ``name``; an unknown name is refused, listing the stored ones."""
    return BY_NAME[check_choice(name, "name", tuple(BY_NAME))]


def load(name: str) -> AttentionModel:
    """The stored model ``name``, checked against the configuration its spec says it has (loaded once)."""
    return _load(spec(name).name)


@cache
def _load(name: str) -> AttentionModel:
    s = spec(name)
    if not s.path.exists():
        raise FileNotFoundError(f"{s.path.name} is missing; run `make train` to create the checkpoints")
    expected = s.build().config
    return AttentionModel.load(s.path, **expected)


def evaluate(model: AttentionModel, task: str) -> dict[str, float | None]:
    """Accuracy at 1x, 2x and 4x the training length; None where the model refuses the length."""
    task = check_choice(task, "task", tuple(TASKS))
    scores: dict[str, float | None] = {}
    for length in EVAL_LENGTHS:
        try:
            scores[str(length)] = accuracy(model, TASKS[task], length=length, n=EVAL_SEQUENCES)
        except BeyondTableError:
            scores[str(length)] = None
    return scores


def recorded() -> dict[str, dict]:
    """What ``make train`` measured and wrote beside the checkpoints: name -> spec, final loss, accuracies.

    For checking the stored checkpoints; the notebook measures with :func:`evaluate` instead.
    """
    return json.loads(ACCURACIES.read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the stored models of notebook 06 and record their accuracies.")
    parser.add_argument("names", nargs="*", help="checkpoints to retrain (default: all)")
    args = parser.parse_args(argv)
    chosen = [spec(n) for n in args.names] if args.names else list(SPECS)
    CHECKPOINT_DIR.mkdir(exist_ok=True)
    table = recorded() if ACCURACIES.exists() else {}
    for s in chosen:
        model = s.build()
        start = time.perf_counter()
        losses = train(model, TASKS[s.task], steps=s.steps, length=TRAIN_LENGTH, progress=False)
        seconds = time.perf_counter() - start
        model.save(s.path)
        scores = evaluate(model, s.task)
        table[s.name] = {"spec": asdict(s), "final_loss": float(losses[-1]), "accuracy": scores}
        shown = ", ".join(f"{k}: {'refused' if v is None else f'{v:.3f}'}" for k, v in scores.items())
        print(f"{s.name:30s} {seconds:6.1f} s  loss {losses[-1]:.4f}  accuracy by length {shown}", flush=True)
    ACCURACIES.write_text(json.dumps({k: table[k] for k in sorted(table)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
