"""The capstone's language model: training-step throughput against the floor, and generation time.

For each position mechanism, a model as stored for notebook 07 (d_model 64, 4 heads, 2 blocks,
MLP 256, float32) takes training steps on batches of 32 windows of 64 characters: forward,
backward and Adam, one BLAS thread, as ``make train`` runs them. The floor is the time of the
step's matrix products alone (the same shapes, forward and backward, timed in the same run): no
NumPy implementation of this step can be faster than its products. "of floor" is floor / step,
1.0 being a step that does nothing but its products.

Generation: 200 characters after a short prompt, at temperature 0.8, with the key/value cache
and with full recomputation of the context for every character (the context is bounded by the
training length, 64). The stored checkpoints are used when they exist, untrained models otherwise.

    python benchmarks/lm.py               # all mechanisms (about a minute on two busy cores)
    python benchmarks/lm.py rope alibi    # some of them

Timings depend on the machine and on what else runs on it: the script reports, it does not assert.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from lessonlib._machine import one_blas_thread
from lessonlib.training import POSITIONS, Adam
from lessonlib.training import lm_catalog as catalog
from lessonlib.training.sampling import generate
from lessonlib.training.text import TextWindows, load

BATCH, LENGTH, REPEATS = 32, catalog.TRAIN_LENGTH, 25
PROMPT = "ROMEO:\n"


def best_of_interleaved(fns: dict, repeats: int = REPEATS) -> dict[str, float]:
    """The fastest of ``repeats`` calls of each function, in seconds, the functions taking turns.

    Taking turns exposes each to the same load from other work on the machine; the fastest call is
    the least disturbed.
    """
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def step_products(d: int, heads: int, layers: int, f: int, vocab: int) -> list[tuple[tuple, tuple]]:
    """Operand shapes of every matrix product of one training step (forward and backward)."""
    n, dh = BATCH * LENGTH, d // heads
    weights = [(d, d)] * 4 + [(d, f), (f, d)]  # W_q, W_k, W_v, W_o, W_1, W_2 of one block
    heads_shape = (BATCH, heads, LENGTH)
    products = []
    for _ in range(layers):
        for w_in, w_out in weights:
            products += [((n, w_in), (w_in, w_out)),  # forward: x W
                         ((w_in, n), (n, w_out)),  # d W = x^T dy
                         ((n, w_out), (w_out, w_in))]  # d x = dy W^T
        products += [((*heads_shape, dh), (BATCH, heads, dh, LENGTH))] * 3  # q k^T; d w = do v^T
        products += [((*heads_shape, LENGTH), (*heads_shape, dh))] * 4  # w v; dv; dq = ds k; dk = ds^T q
    products += [((n, d), (d, vocab)), ((d, n), (n, vocab)), ((n, vocab), (vocab, d))]  # unembedding
    return products


def floor_call(model):
    """A call that runs the matrix products of one training step of ``model``, on random operands."""
    rng = np.random.default_rng(0)
    operands = [(rng.standard_normal(a, dtype=np.float32), rng.standard_normal(b, dtype=np.float32))
                for a, b in step_products(model.d_model, model.n_heads, model.n_layers, model.d_mlp,
                                          model.vocab_size)]

    def products() -> None:
        for a, b in operands:
            a @ b

    return products


def step_call(model):
    """A call that runs one training step of ``model`` (forward, backward, Adam) on one fixed batch."""
    data = load()
    tokens, targets = TextWindows(data.train, data.vocab.size).sample(BATCH, LENGTH, np.random.default_rng(0))
    optimiser = Adam(model.params, lr=1e-5)

    def step() -> None:
        _, grads = model.loss_and_grads(tokens, targets)
        optimiser.step(grads)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mechanisms", nargs="*", default=list(POSITIONS), help=f"some of: {', '.join(POSITIONS)}")
    args = parser.parse_args()
    unknown = [m for m in args.mechanisms if m not in POSITIONS]
    if unknown:
        parser.error(f"unknown mechanism(s) {unknown}; choose from {', '.join(POSITIONS)}")
    vocab = load().vocab
    print(f"numpy {np.__version__}, {platform.processor() or platform.machine()}; batch {BATCH} x length {LENGTH}, "
          "float32, one BLAS thread; best of", REPEATS)
    print(f"{'mechanism':11} {'step ms':>8} {'floor ms':>9} {'of floor':>9} {'chars/s':>9} "
          f"{'200 chars, cache':>17} {'recomputed':>11}")
    with one_blas_thread():
        for position in args.mechanisms:
            try:
                model, source = catalog.stored(position), "stored"
            except FileNotFoundError:
                model, source = catalog.build(position), "untrained"
            best = best_of_interleaved({"step": step_call(catalog.build(position)), "floor": floor_call(model)})
            step, floor = best["step"], best["floor"]
            prompt = vocab.encode(PROMPT)
            timings = []
            for use_cache in (True, False):
                start = time.perf_counter()
                generate(model, prompt, 200, temperature=0.8, window=LENGTH, use_cache=use_cache)
                timings.append(time.perf_counter() - start)
            print(f"{position:11} {step * 1e3:8.1f} {floor * 1e3:9.1f} {floor / step:9.2f} "
                  f"{BATCH * LENGTH / step:9.0f} {timings[0]:15.2f} s {timings[1]:9.2f} s  ({source})", flush=True)


if __name__ == "__main__":
    main()
