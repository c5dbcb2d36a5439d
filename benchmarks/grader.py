"""How fast `lessonlib grade` is against executing each notebook with nbclient, with the same verdicts.

It generates learner folders (40 by default) from the released exercise notebooks: for each
learner and exercise, by a seeded draw, the solution (correct), an answer with one known
misconception (wrong), or the untouched stub (not attempted); some learners also write the
written answer. Then it

1. grades every folder with ``lessonlib grade`` (isolated workers, hidden cases included);
2. executes every notebook with nbclient, one fresh kernel per notebook, all cells, as nbgrader's
   autograder and otter-grader do, and reads each check cell's verdict from its output;

and prints both times, the speed-up, and whether the verdicts (passed / failed / not attempted)
agree for every learner and exercise. Both run with the same number of processes at once.

    python benchmarks/grader.py                  # 40 learners, 2 at a time (a few minutes)
    python benchmarks/grader.py --learners 8     # a quick look
    python benchmarks/grader.py --keep DIR       # keep the learner folders and the gradebook in DIR
    python benchmarks/grader.py --isolation limits   # without the bubblewrap sandbox (as root alone)

Timings depend on the machine and on what else runs on it: the script reports, it does not assert.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's lessonlib, installed or not

from lessonlib.grading.run.notebooks import ANSWER_TAG, course_notebooks  # noqa: E402
from lessonlib.grading.run.plans import bound_names, parse_cell  # noqa: E402

SOLUTIONS, RELEASED = ROOT / "solutions", ROOT / "exercises"

# One answer per exercise that carries a single misconception and fails the public cases.
WRONG = {
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2)  # no 1/sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights  # (..., L) or (..., L, d_v)
''',
    "q1_context": "q1_context = 6.0  # the larger value, as if one key won",
    "masked_softmax": '''
def masked_softmax(scores, allowed):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) * allowed  # zeroed after the softmax
''',
    "causal_mask": '''
def causal_mask(length):
    return np.triu(np.ones((length, length), dtype=bool))  # the future allowed instead of the past
''',
    "padding_mask": '''
def padding_mask(lengths, max_length):
    return np.arange(max_length)[None, :] <= np.asarray(lengths)[:, None]  # one too many
''',
    "cached_causal_mask": '''
def cached_causal_mask(lengths, n_queries):
    s = max(lengths)
    real = np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None]  # (B, S): left padding
    causal = np.tril(np.ones((n_queries, s), dtype=bool))  # top-left: the queries placed at the start
    return real[:, None, :] & causal[None]
''',
    "sinusoidal_positions": '''
def sinusoidal_positions(n_positions, d_model):
    angle = np.arange(n_positions)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    table = np.zeros((n_positions, d_model))
    table[:, 0::2] = np.cos(angle)  # sin and cos swapped
    table[:, 1::2] = np.sin(angle)
    return table
''',
    "apply_rope": '''
def apply_rope(x, positions):
    d = x.shape[-1]
    angle = np.asarray(positions)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    a, b = x[..., : d // 2], x[..., d // 2:]  # halves paired instead of neighbours
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)], axis=-1)
''',
    "score_matrix_bytes": '''
def score_matrix_bytes(batch, heads, length, bytes_per_element):
    return batch * heads * length * bytes_per_element  # one score per token, not per pair
''',
    "tiled_attention": '''
def tiled_attention(query, key, value, block_size):
    scale = 1.0 / math.sqrt(query.shape[-1])
    running_max, denom, acc = None, 0.0, 0.0
    for k0 in range(0, key.shape[-2], block_size):
        s = (query * scale) @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2)
        new_max = s.max(axis=-1) if running_max is None else np.maximum(running_max, s.max(axis=-1))
        p = np.exp(s - new_max[..., None])
        denom = denom + p.sum(axis=-1)  # the running sums are never rescaled
        acc = acc + p @ value[..., k0:k0 + block_size, :]
        running_max = new_max
    return acc / denom[..., None]
''',
    "leaks_future": '''
def leaks_future(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    changed = x.copy()
    changed[-1] += 1.0  # only the last token is ever changed
    return not np.allclose(layer(changed)[:-1], layer(x)[:-1])
''',
    "mask_polarity": '''
def mask_polarity(attention_fn):
    out = attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None], np.array([[0.0, -np.inf]]))
    return "attend" if out[0, 0, 0] < 1e-3 else "additive"  # 0 and -inf cannot tell additive from blocked
''',
    "is_order_sensitive": '''
def is_order_sensitive(layer, x):
    p = np.roll(np.arange(x.shape[0]), 1)
    return not np.allclose(layer(x[p]), layer(x))  # the permutation is not undone
''',
    "alibi_slopes": '''
def alibi_slopes(n_heads):
    return 2.0 ** (-8.0 * np.arange(n_heads) / n_heads)  # the first slope is 1, not 2^(-8/n)
''',
    "online_softmax": '''
def online_softmax(scores, values, block_size):
    m, acc = -np.inf, 0.0
    for k0 in range(0, scores.shape[-1], block_size):
        s = scores[k0:k0 + block_size]
        new_m = max(m, s.max())
        acc = acc * np.exp(m - new_m) + np.exp(s - new_m) @ values[k0:k0 + block_size]
        m = new_m
    return acc  # never divided by the sum of the weights
''',
    "exclusion_effects": '''
def exclusion_effects(query, keys, values, w_o):
    s = keys @ query / np.sqrt(query.shape[-1])
    w = np.exp(s - s.max())
    return w / w.sum()  # the weights, returned as if they were the effects
''',
    "alibi_weights": '''
def alibi_weights(scores, head, n_heads):
    n_queries, n_keys = scores.shape
    i = np.arange(n_keys - n_queries, n_keys)[:, None]
    j = np.arange(n_keys)[None, :]
    e = np.exp(np.where(j <= i, scores - scores.max(), -np.inf))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights - 2.0 ** (-8 * (head + 1) / n_heads) * (i - j) * (j <= i)  # the bias added after the softmax
''',
    "changed_predictions": '''
def changed_predictions(logits, logits_changed, targets, last_kept):
    changed = logits.argmax(-1) != logits_changed.argmax(-1)
    return float(changed[:, : last_kept + 1].mean())  # the unscored positions counted too
''',
    "heads_by_slices": '''
def heads_by_slices(x, w_q, w_k, w_v, w_o, n_heads):
    s = (x @ w_q) @ (x @ w_k).T / np.sqrt(w_q.shape[1])  # one head over every column
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ (x @ w_v) @ w_o
''',
    "saturated_share": '''
def saturated_share(query, key, threshold):
    s = query @ key.T  # not divided by sqrt(d_k)
    w = np.exp(s - s.max(-1, keepdims=True))
    return float(((w / w.sum(-1, keepdims=True)).max(-1) >= threshold).mean())
''',
    "t5_bucket": '''
def t5_bucket(distance, n_buckets, max_distance):
    return np.minimum(np.asarray(distance), n_buckets - 1)  # every distance exact: no log-spaced buckets
''',
    "cached_attention_step": '''
def cached_attention_step(query, key, value, cache_keys, cache_values, length):
    n = query.shape[-2]
    end = length + n
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:end, :], values[..., length:end, :] = key, value
    s = query @ np.swapaxes(keys[..., :end, :], -1, -2) / np.sqrt(query.shape[-1])
    s = np.where(np.tril(np.ones((n, end), dtype=bool)), s, -np.inf)  # aligned at the top left: the cache ignored
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    return w @ values[..., :end, :], w, keys, values
''',
}
WRITTEN = ("A weight says how much one head mixed in a value, not what that value did to the prediction; "
           "to test a causal claim, ablate the key and measure the change.")
VERDICTS = {"passed": "passed", "failed": "failed", "not attempted yet": "not_attempted"}


def _answer_sources(folder: Path) -> dict[str, str]:
    """exercise -> source of its answer cell in the notebooks of ``folder``."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and ANSWER_TAG in cell.metadata.get("tags", []):
                tree = parse_cell(cell.source)
                for name in bound_names(tree) if not isinstance(tree, str) else ():
                    found[name] = cell.source
    return found


def generate(folder: Path, n_learners: int, seed: int) -> dict[tuple[str, str], str]:
    """Write the learner folders; return the intended verdict of every (learner, exercise)."""
    rng = random.Random(seed)
    correct = _answer_sources(SOLUTIONS)
    intended: dict[tuple[str, str], str] = {}
    for i in range(n_learners):
        learner = f"learner{i + 1:02d}"
        (folder / learner).mkdir(parents=True)
        for course in course_notebooks():
            nb = nbformat.read(RELEASED / course.name, as_version=4)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            choice = {name: rng.choices(["passed", "failed", "not_attempted"], [5, 3, 2])[0]
                      for name in course.exercises}
            for cell in nb.cells:
                if cell.get("id") in course.answer_cells.values():
                    name = next(n for n, c in course.answer_cells.items() if c == cell.get("id"))
                    intended[learner, name] = choice[name]
                    if choice[name] == "passed":
                        cell.source = correct[name]
                    elif choice[name] == "failed":
                        cell.source = WRONG[name].strip("\n")
                if "manual" in cell.metadata.get("tags", []) and rng.random() < 0.6:
                    cell.source = WRITTEN
            nbformat.write(nb, folder / learner / course.name)
    return intended


def grade_with_lessonlib(folder: Path, out: Path, workers: int, isolation: str = "auto"
                         ) -> tuple[float, dict[tuple[str, str], str], str]:
    command = [sys.executable, "-m", "lessonlib.cli", "grade", *map(str, sorted(folder.iterdir())),
               "--out", str(out), "--workers", str(workers), "--isolation", isolation, "--quiet"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"lessonlib grade failed:\n{result.stderr}")
    with open(out / "grades.csv", newline="") as f:
        verdicts = {(row["learner"], row["exercise"]): row["status"] for row in csv.DictReader(f)}
    level = re.search(r"isolation: (\w+)", result.stdout)
    return seconds, verdicts, level.group(1) if level else "?"


def _quiet() -> None:
    """Kernels inherit stderr: keep their start-up warnings out of the table."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)


def _execute(path: str) -> list[str]:
    """Run one notebook in a fresh kernel (cwd = its folder); return its check cells' first lines."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True, record_timing=False,
                            resources={"metadata": {"path": str(Path(path).parent)}})
    client.execute()
    heads = []
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.lstrip().startswith("check("):
            text = "".join(o.get("data", {}).get("text/plain", "") or o.get("text", "") for o in cell.outputs)
            heads.append(text.splitlines()[0] if text else "(no output)")
    return heads


def execute_with_nbclient(folder: Path, workers: int) -> tuple[float, dict[tuple[str, str], str]]:
    paths = [str(p) for p in sorted(folder.glob("*/*.ipynb"))]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, initializer=_quiet) as pool:
        outputs = list(pool.map(_execute, paths))
    seconds = time.perf_counter() - start
    verdicts = {}
    for path, heads in zip(paths, outputs):
        learner = Path(path).parent.name
        for head in heads:
            match = re.match(r"(\w+): (passed|failed|not attempted yet)", head)
            if match:
                verdicts[learner, match.group(1)] = VERDICTS[match.group(2)]
            else:
                name = head.split(":")[0]
                verdicts[learner, name] = f"unreadable: {head[:60]}"
    return seconds, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="processes at once, for both methods")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", type=Path, default=None, help="write the folders and the gradebook here")
    parser.add_argument("--isolation", default="auto", help="passed to lessonlib grade (auto, bubblewrap, limits)")
    args = parser.parse_args(argv)
    base = args.keep or Path(tempfile.mkdtemp(prefix="lessonlib-grader-bench-"))
    folder, out = base / "submissions", base / "gradebook"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    intended = generate(folder, args.learners, args.seed)
    n_notebooks = len(list(folder.glob("*/*.ipynb")))
    counts = {v: sum(1 for x in intended.values() if x == v) for v in ("passed", "failed", "not_attempted")}
    print(f"{args.learners} learners, {n_notebooks} notebooks, {len(intended)} graded exercises "
          f"({counts['passed']} correct, {counts['failed']} wrong, {counts['not_attempted']} not attempted); "
          f"{args.workers} at a time")
    ours, ours_verdicts, level = grade_with_lessonlib(folder, out, args.workers, args.isolation)
    print(f"lessonlib grade: {ours:.1f} s (isolation: {level})")
    theirs, nbclient_verdicts = execute_with_nbclient(folder, args.workers)
    print(f"nbclient:        {theirs:.1f} s")
    keys = sorted(intended)
    agree = sum(ours_verdicts.get(k) == nbclient_verdicts.get(k) for k in keys)
    as_intended = sum(ours_verdicts.get(k) == intended[k] for k in keys)
    print()
    print("| method | notebooks | processes | seconds | per notebook |")
    print("|---|---:|---:|---:|---:|")
    print(f"| `lessonlib grade` (isolated workers, hidden cases) | {n_notebooks} | {args.workers} | {ours:.1f} | "
          f"{ours / n_notebooks:.3f} |")
    print(f"| nbclient, one kernel per notebook | {n_notebooks} | {args.workers} | {theirs:.1f} | "
          f"{theirs / n_notebooks:.3f} |")
    print()
    print(f"speed-up: {theirs / ours:.1f}x (target: at least 5x)")
    print(f"verdicts agree: {agree} of {len(keys)} (passed / failed / not attempted); "
          f"as generated: {as_intended} of {len(keys)}")
    for k in keys:
        if ours_verdicts.get(k) != nbclient_verdicts.get(k):
            print(f"  differs: {k[0]} {k[1]}: lessonlib {ours_verdicts.get(k)}, nbclient {nbclient_verdicts.get(k)}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"learner folders in {folder}, gradebook in {out}")
    return 0 if agree == len(keys) else 1


if __name__ == "__main__":
    sys.exit(main())
