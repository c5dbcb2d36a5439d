"""Training speed of the NumPy attention models: steps per second, and time to 95% accuracy.

For each position mechanism, a model as stored for notebook 06 (d_model 32, 8 heads, one layer,
batch 64, Adam at 3e-3, seed 0) is trained on the previous-token task at length 16. Every 25
steps training pauses and the accuracy on 512 fresh sequences is measured (that time is not
counted); the run stops at 95% or at the step limit. ALiBi is trained with the causal mask:
without it, its bias -m|j - i| cannot tell the key before from the key after.

    python benchmarks/training.py               # all mechanisms (about a minute each on two busy cores)
    python benchmarks/training.py rope learned  # some of them

Timings depend on the machine and on what else runs on it: the script reports, it does not assert.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from lessonlib.training import TASKS, accuracy, train
from lessonlib.training.catalog import BY_NAME

MODELS = {
    "none": "previous_none",
    "sinusoidal": "previous_sinusoidal",
    "learned": "previous_learned",
    "rope": "previous_rope",
    "relative": "previous_relative",
    "alibi (causal)": "previous_alibi_causal",
}
TARGET = 0.95
CHECK_EVERY = 25


def run(label: str, max_steps: int) -> dict[str, float | int | None]:
    """Train one model until 95% or ``max_steps``; training seconds only, accuracy checks excluded."""
    task = TASKS["previous"]
    model = BY_NAME[MODELS[label]].build()
    state = {"train": 0.0, "since": time.perf_counter(), "reached": None, "accuracy": 0.0}

    def check(step: int, loss: float) -> bool:
        if (step + 1) % CHECK_EVERY:
            return False
        state["train"] += time.perf_counter() - state["since"]
        state["accuracy"] = accuracy(model, task, length=16)
        state["since"] = time.perf_counter()
        if state["accuracy"] >= TARGET:
            state["reached"] = step + 1
            return True
        return False

    losses = train(model, task, steps=max_steps, length=16, progress=False, callback=check)
    state["train"] += time.perf_counter() - state["since"] if state["reached"] is None else 0.0
    steps = len(losses)
    return {"steps": steps, "seconds": state["train"], "steps_per_s": steps / state["train"],
            "reached": state["reached"], "accuracy": state["accuracy"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mechanisms", nargs="*", default=list(MODELS), help=f"some of: {', '.join(MODELS)}")
    parser.add_argument("--max-steps", type=int, default=1500)
    args = parser.parse_args()
    unknown = [m for m in args.mechanisms if m not in MODELS]
    if unknown:
        parser.error(f"unknown mechanism(s) {unknown}; choose from {', '.join(MODELS)}")
    print(f"numpy {np.__version__}, {platform.processor() or platform.machine()}; previous-token task, length 16")
    print(f"{'mechanism':16} {'steps/s':>8} {'steps to 95%':>13} {'seconds to 95%':>15} {'final accuracy':>15}")
    for label in args.mechanisms:
        r = run(label, args.max_steps)
        reached = "not reached" if r["reached"] is None else str(r["reached"])
        seconds = "-" if r["reached"] is None else f"{r['seconds']:.1f}"
        print(f"{label:16} {r['steps_per_s']:8.1f} {reached:>13} {seconds:>15} {r['accuracy']:15.3f}", flush=True)


if __name__ == "__main__":
    main()
