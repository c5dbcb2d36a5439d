"""Exercises of 04_cost: bytes of the dense score matrix, and tiled attention with an online softmax."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lessonlib.attention import scaled_dot_product_attention as _dense
from lessonlib.exercises.ex_scaling import large_score_inputs
from lessonlib.exercises.results import FailedCase
from lessonlib.exercises.spec import (
    ArrayOutput,
    Case,
    DetectFn,
    DiagnosisSpec,
    Exercise,
    NumberOutput,
    Record,
    Requirement,
    any_of,
    close,
    fails_only_on,
    matches_model,
    numbered,
    overflows_only_on,
    shows,
)

NOTEBOOK = "04_cost.ipynb"


# --- score_matrix_bytes -------------------------------------------------------------------------


def bytes_reference(batch: int, heads: int, length: int, bytes_per_element: int) -> int:
    """B * H * L * L * bytes per element."""
    return int(batch) * int(heads) * int(length) ** 2 * int(bytes_per_element)


def _factor_model(name: str):
    """Expected bytes divided by one factor, when that factor differs from the other three."""

    def model(batch, heads, length, bpe):
        factors = {"batch": batch, "heads": heads, "length": length, "dtype": bpe}
        own = factors.pop(name)
        if own == 1 or own in factors.values():
            return None  # this case cannot tell the factor apart
        return bytes_reference(batch, heads, length, bpe) // own

    return model


def _dtype_models():
    def squared(batch, heads, length, bpe):
        return None if bpe in (1, heads, batch, length) else bytes_reference(batch, heads, length, bpe) * bpe

    def bits(batch, heads, length, bpe):
        return None if 8 in (heads, batch, length) else bytes_reference(batch, heads, length, bpe) * 8

    return _factor_model("dtype"), squared, bits


# What the hidden cases draw from: four sets with no number in common and no 1, so every factor tells
# its own mistake apart in every case (and none is 8, the bits in a byte). Each case has its own
# element size; only the batch, heads and length differ between seeds.
HIDDEN_BATCHES, HIDDEN_HEADS, HIDDEN_LENGTHS = (3, 5, 6, 7), (12, 16, 32), (100, 512, 1000, 4096)
HIDDEN_BYTES_PER_ELEMENT = (2, 4, 8, 4)


def bytes_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for bpe in HIDDEN_BYTES_PER_ELEMENT:
        batch, heads, length = (int(rng.choice(c)) for c in (HIDDEN_BATCHES, HIDDEN_HEADS, HIDDEN_LENGTHS))
        cases.append(Case("", f"batch {batch}, {heads} heads, length {length}, {bpe} bytes per element",
                          (batch, heads, length, bpe)))
    return cases


SCORE_MATRIX_BYTES = Exercise(
    name="score_matrix_bytes",
    notebook=NOTEBOOK,
    signature="score_matrix_bytes(batch, heads, length, bytes_per_element) -> int",
    points=1,
    reference=bytes_reference,
    output=NumberOutput(integer=True),
    public=lambda: numbered([
        Case("", "batch 1, 1 head, length 4, float32 (4 bytes)", (1, 1, 4, 4)),
        Case("", "batch 2, 3 heads, length 5, float32 (4 bytes)", (2, 3, 5, 4)),
        Case("", "batch 4, 16 heads, length 1024, float16 (2 bytes)", (4, 16, 1024, 2)),
        Case("", "batch 3, 12 heads, length 2048, float64 (8 bytes)", (3, 12, 2048, 8)),
    ]),
    hidden=bytes_hidden,
    diagnoses=(
        DiagnosisSpec(
            "bytes_off_by_dtype", "Byte count off by the element size",
            "The count is off by the bytes per element: it counts elements rather than bytes, "
            "multiplies by the size twice, or counts bits.",
            "Elements in the matrix: batch * heads * length * length; bytes: times bytes_per_element, once.",
            "score-bytes", matches_model(*_dtype_models()),
        ),
        DiagnosisSpec(
            "bytes_missing_heads", "Heads left out",
            "The count is too small by a factor of the number of heads: every head has its own "
            "length x length score matrix.",
            "Multiply by heads.",
            "score-bytes", matches_model(_factor_model("heads")),
        ),
        DiagnosisSpec(
            "bytes_missing_batch", "Batch left out",
            "The count is too small by a factor of the batch size: every example has its own score matrices.",
            "Multiply by batch.",
            "score-bytes", matches_model(_factor_model("batch")),
        ),
        DiagnosisSpec(
            "bytes_linear_in_length", "Length counted once instead of squared",
            "The count grows like the length, not its square: the score matrix has one entry per "
            "(query, key) pair, length x length.",
            "Use length * length (or length ** 2).",
            "score-bytes", matches_model(_factor_model("length")),
        ),
    ),
    stub_hint="one score per (query, key) pair, per head and per example; return an int",
)


# --- tiled_attention ----------------------------------------------------------------------------

MEMORY_QUERIES = 128
MEMORY_KEYS = (1024, 4096)  # with 128 queries: an (L, S) array dwarfs every fixed overhead
MEMORY_BLOCK = 128
# The grader measures the resident memory of the process, which carries a few MB of noise (the
# allocator, the interpreter): its verdict is read on a hidden case where one (L, S) float16 score
# matrix is 16 MB, while a tiled answer holds its input copies (3 MB) and a few small blocks.
HIDDEN_MEMORY_KEYS = 65536
FULL_MATRIX_BYTES_PER_SCORE = 2  # float16: the smallest score matrix an answer could hold


REFERENCE_BLOCK = 8192  # keys per block when the reference itself works in blocks


def tiled_reference(query: np.ndarray, key: np.ndarray, value: np.ndarray, block_size: int) -> np.ndarray:
    """The dense result: softmax(q k^T / sqrt(d_k)) v (tiling must not change it).

    With more than REFERENCE_BLOCK keys it is computed over key blocks with an exact online
    softmax (the same numbers up to rounding), so checking an answer never holds a huge matrix.
    """
    if key.shape[-2] <= REFERENCE_BLOCK:
        return _dense(query, key, value).output
    return _online(query, key, value, REFERENCE_BLOCK, rescale_denom=True, rescale_acc=True)


def _online(query, key, value, block_size, *, rescale_denom: bool, rescale_acc: bool) -> np.ndarray:
    """Online softmax over key blocks with one of the running sums left unrescaled."""
    q = query / math.sqrt(query.shape[-1])
    shape = np.broadcast_shapes(q.shape[:-2], key.shape[:-2]) + (q.shape[-2],)
    m = np.full(shape, -np.inf)
    denom = np.zeros(shape)
    acc = np.zeros(shape + (value.shape[-1],))
    for k0 in range(0, key.shape[-2], block_size):
        s = np.matmul(q, np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2))  # (..., L, b)
        new_m = np.maximum(m, s.max(axis=-1))
        p = np.exp(s - new_m[..., None])
        factor = np.exp(m - new_m)
        denom = (denom * factor if rescale_denom else denom) + p.sum(axis=-1)
        acc = (acc * factor[..., None] if rescale_acc else acc) + np.matmul(p, value[..., k0:k0 + block_size, :])
        m = new_m
    return acc / denom[..., None]


def _not_rescaled_models():
    return tuple(
        lambda q, k, v, b, d=d, a=a: _online(q, k, v, b, rescale_denom=d, rescale_acc=a)
        for d, a in ((False, False), (True, False), (False, True))
    )


def _dropped_last_block(case: Case, got, expected) -> bool:
    """Rows of a last, partial query block, or keys of a last, partial key block, were skipped."""
    query, key, value, bs = case.args
    n_q, n_k = query.shape[-2], key.shape[-2]
    full_q, full_k = n_q - n_q % bs, n_k - n_k % bs
    models = [expected]
    if n_k % bs and full_k > 0:
        models.append(tiled_reference(query, key[..., :full_k, :], value[..., :full_k, :], bs))
    for model in models[1:]:
        if close(got, model):
            return True
    if n_q % bs == 0 or full_q == 0:
        return False
    for model in models:
        head = model[..., :full_q, :]
        if got.shape == head.shape and close(got, head):
            return True
        if got.shape == model.shape and close(got[..., :full_q, :], head):
            return not close(got[..., full_q:, :], model[..., full_q:, :])
    return False


def _memory_verdict(records: Sequence[Record]) -> tuple[bool | None, str, list[str]]:
    """(holds an (L, S) array?, explanation, case ids) from the peak memory of the memory cases.

    The verdict is read with the most keys, where one (L, S) score matrix (even in float16, 2
    bytes a score) is several times what a correct answer holds: a few (L, block) or
    (block, block) arrays, the output and running sums. The growth between the two sizes is
    reported, not judged: at small sizes fixed overheads hide it.
    """
    probes = sorted((r for r in records if "memory" in r.case.tags), key=lambda r: r.case.args[1].shape[-2])
    if not probes:
        return None, "", []
    large = probes[-1]
    if large.outcome.peak_bytes is None:
        return None, "peak memory was not measured (the call did not return)", [large.case.id]
    measured = [r for r in probes if r.outcome.peak_bytes is not None]
    small = measured[0]
    peaks = small.outcome.peak_bytes, large.outcome.peak_bytes
    n_small, n_large = small.case.args[1].shape[-2], large.case.args[1].shape[-2]
    n_queries = large.case.args[0].shape[-2]
    limit = n_queries * n_large * FULL_MATRIX_BYTES_PER_SCORE
    holds = peaks[1] >= limit
    matrix = f"one {n_queries} x {n_large} score matrix ({limit:,} bytes even in float16)"
    if large.case.hidden:  # a number measured on a hidden case is not shown
        text = f"With {n_large} keys (a hidden case) peak memory {'reached' if holds else 'stayed below'} {matrix}"
        if small is not large:
            text += f"; with {n_small} keys it was {peaks[0]:,} bytes"
    elif small is not large:  # the growth is reported, not judged
        growth = math.log(max(peaks[1], 1) / max(peaks[0], 1)) / math.log(n_large / n_small)
        text = (f"Peak memory was {peaks[0]:,} bytes with {n_small} keys and {peaks[1]:,} bytes with "
                f"{n_large} keys (grows like S^{growth:.1f}); it takes {matrix}")
    else:
        text = f"Peak memory was {peaks[1]:,} bytes with {n_large} keys; it takes {matrix}"
    text += "; a tiled answer stays well below that."
    return holds, text, [r.case.id for r in (small, large)] if small is not large else [large.case.id]


def _memory_requirement(records: Sequence[Record]) -> FailedCase | None:
    holds, text, _ = _memory_verdict(records)
    if holds is False:
        return None
    return FailedCase(
        "memory", "no (L, S) array: peak memory far below one (L, S) score matrix", "memory",
        "peak memory well below one (L, S) score matrix with the most keys",
        text if holds else f"not measurable: {text}", "",
    )


def _on_small_cases(detect: DetectFn) -> DetectFn:
    """``detect`` on every case but those where peak memory is measured: their values tell no mistake
    apart that the small cases do not, and re-enacting a mistake with 65,536 keys costs more than all
    the other cases together."""

    def small(records: Sequence[Record]) -> list[str]:
        return detect([r for r in records if "memory" not in r.case.tags])

    return small


def _builds_full_matrix(records: Sequence[Record]) -> list[str]:
    holds, _, ids = _memory_verdict(records)
    return ids if holds else []


def _memory_inputs(n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(4000 + n_keys)
    return (rng.normal(size=(MEMORY_QUERIES, 4)), rng.normal(size=(n_keys, 4)), rng.normal(size=(n_keys, 2)),
            MEMORY_BLOCK)


def _rising_inputs(rng: np.random.Generator, n_q: int, n_k: int, d: int):
    """Scores that grow along the keys, so each new key block raises the running maximum."""
    query = rng.normal(size=(n_q, d))
    query[:, 0] = np.abs(query[:, 0]) + 1.0
    key = rng.normal(size=(n_k, d)) * 0.5
    key[:, 0] = np.linspace(-2.0, 3.0, n_k)
    return query, key, rng.normal(size=(n_k, 3))


def tiled_public() -> list[Case]:
    rng = np.random.default_rng(404)
    q, k, v = _rising_inputs(rng, 8, 8, 4)
    large_q, large_k, large_v = large_score_inputs(None, n_keys=5)
    cases = [
        Case("", "8 queries, 8 keys, block 4; scores grow along the keys", (q, k, v, 4), frozenset({"rising"})),
        Case("", "10 queries, 10 keys, block 4: the last block is partial",
             (rng.normal(size=(10, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 3)), 4)),
        Case("", "6 queries, 9 keys, block 4, d_k 5, value width 2",
             (rng.normal(size=(6, 5)), rng.normal(size=(9, 5)), rng.normal(size=(9, 2)), 4)),
        Case("", "a batch of 2: 5 queries, 7 keys, block 3",
             (rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3)), 3)),
        Case("", "large scores (about 800), block 2", (large_q, large_k, large_v, 2), frozenset({"large-scores"})),
    ]
    for n in MEMORY_KEYS:
        cases.append(Case("", f"{MEMORY_QUERIES} queries, {n} keys, block {MEMORY_BLOCK}, peak memory traced",
                          _memory_inputs(n), frozenset({"memory"}), trace_memory=True))
    return numbered(cases)


# (batch, queries, keys, d_k, d_v, block) of the random hidden cases: whole blocks; a last partial
# block of keys and of queries; a block of one; one block larger than the keys. Every seed draws these.
TILED_HIDDEN = (((), 8, 12, 3, 2, 4), ((), 7, 10, 5, 3, 3), ((2,), 5, 9, 4, 1, 1), ((2,), 3, 5, 2, 4, 6))


def _random_inputs(rng: np.random.Generator, shape: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random query, key, value; the first query's scores rise along the keys, so that with more than
    one key block its running maximum rises after the first one whatever the numbers drawn."""
    batch, n_q, n_k, d_k, d_v = shape
    query, key = rng.normal(size=batch + (n_q, d_k)), rng.normal(size=batch + (n_k, d_k))
    query[..., 0, :] = 0.0
    query[..., 0, 0] = 1.0 + np.abs(rng.normal(size=batch))
    key[..., 0] = np.sort(key[..., 0], axis=-1)  # (..., S) rising
    return query, key, rng.normal(size=batch + (n_k, d_v))


def tiled_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for *shape, bs in TILED_HIDDEN:
        batch, n_q, n_k = shape[:3]
        cases.append(Case("", f"random: batch {batch}, {n_q} queries, {n_k} keys, block {bs}",
                          (*_random_inputs(rng, tuple(shape)), bs)))
    q, k, v = _rising_inputs(rng, 5, 11, 4)
    cases.append(Case("", "scores that grow along the keys", (q, k, v, 3), frozenset({"rising"})))
    large = large_score_inputs(rng, n_keys=5)
    cases.append(Case("", "large scores (about 800)", large + (2,), frozenset({"large-scores"})))
    cases.append(Case("", f"{MEMORY_QUERIES} queries, {HIDDEN_MEMORY_KEYS} keys, block {MEMORY_BLOCK}, peak memory "
                      "measured", _memory_inputs(HIDDEN_MEMORY_KEYS), frozenset({"memory"}), trace_memory=True))
    return cases


TILED_ATTENTION = Exercise(
    name="tiled_attention",
    notebook=NOTEBOOK,
    signature="tiled_attention(query, key, value, block_size) -> output",
    points=3,
    reference=tiled_reference,
    output=ArrayOutput("float"),
    public=tiled_public,
    hidden=tiled_hidden,
    diagnoses=(
        DiagnosisSpec(
            "online_softmax_not_rescaled", "Running sums not rescaled",
            "The output is wrong whenever a later key block raises the running maximum: the sums "
            "kept so far were computed against the old maximum and were not rescaled.",
            "When the maximum moves from m to m_new, multiply both the running denominator and the "
            "running weighted sum of values by exp(m - m_new) before adding the new block.",
            "tiled", _on_small_cases(matches_model(*_not_rescaled_models())),
        ),
        DiagnosisSpec(
            "last_block_dropped", "Last partial block dropped",
            "When the length is not a multiple of block_size, the last, shorter block is skipped: "
            "its keys get no weight, or its queries get no output.",
            "Loop with range(0, n, block_size) and slice [start:start + block_size]; a slice past "
            "the end simply stops at n.",
            "tiled", shows(_dropped_last_block),
        ),
        DiagnosisSpec(
            "builds_full_score_matrix", "Still builds the whole score matrix",
            "With the most keys the peak memory reaches the size of the (L, S) score matrix: the answer "
            "holds all the scores at once (even if it then loops over blocks), so tiling saves nothing.",
            "Keep only one block of scores at a time (at most block_size x block_size, or "
            "L x block_size) together with running maxima, sums and outputs.",
            "tiled", _builds_full_matrix,
        ),
        DiagnosisSpec(
            "tiled_no_max_subtraction", "Blocks exponentiated without a running maximum",
            "Only the case with large scores goes wrong: exp(800) overflows. The answer returns NaN or "
            "inf there, or numbers a guard put in their place.",
            "Keep a running maximum per query and exponentiate scores minus that maximum.",
            "tiled", any_of(overflows_only_on("large-scores"), fails_only_on("large-scores")),
        ),
        DiagnosisSpec(
            "tiled_missing_scale", "No 1/sqrt(d_k) scaling",
            "The output matches attention on unscaled scores q.k.",
            "Scale the scores (or the queries) by 1/sqrt(d_k) as in dense attention.",
            "scaling", _on_small_cases(matches_model(lambda q, k, v, b: _dense(q, k, v, scale=1.0).output)),
        ),
    ),
    requirements=(
        Requirement("memory", "no (L, S) array: peak memory far below one (L, S) score matrix", _memory_requirement,
                    tags=frozenset({"memory"})),
    ),
    stub_hint="visit the keys block by block with a running maximum, denominator and weighted sum",
)


# --- online_softmax: one query, scores read a block at a time ------------------------------------


def online_reference(scores: np.ndarray, values: np.ndarray, block_size: int) -> np.ndarray:
    """softmax(scores) @ values for one query: scores (S,), values (S, d_v) -> (d_v,)."""
    e = np.exp(scores - scores.max())  # (S,)
    return e / e.sum() @ values  # (d_v,)


def _online_one(scores, values, block_size, *, rescale_denom: bool = True, rescale_acc: bool = True,
                divide: bool = True) -> np.ndarray:
    """The online softmax of one query with one chosen step left out."""
    m, denom, acc = -np.inf, 0.0, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]  # (b,)
        new_m = max(m, float(s.max()))
        p = np.exp(s - new_m)  # (b,)
        factor = math.exp(m - new_m)
        denom = (denom * factor if rescale_denom else denom) + p.sum()
        acc = (acc * factor if rescale_acc else acc) + p @ values[k0:k0 + block_size]
        m = new_m
    return acc / denom if divide else acc


def _online_not_rescaled_models():
    return tuple(
        lambda s, v, b, d=d, a=a: _online_one(s, v, b, rescale_denom=d, rescale_acc=a)
        for d, a in ((False, False), (True, False), (False, True))
    )


def _last_block_skipped_models():
    """Every block but the last read; with one block, nothing read (the result zeros, or NaN from 0 / 0)."""

    def skipped(scores, values, b, empty):
        stop = (len(scores) - 1) // b * b  # the start of the last block
        if stop == 0:
            return np.zeros(values.shape[-1]) if empty == "zeros" else np.full(values.shape[-1], np.nan)
        return online_reference(scores[:stop], values[:stop], b)

    return tuple(lambda s, v, b, e=e: skipped(s, v, b, e) for e in ("zeros", "nan"))


def _per_block_models():
    def blocks(scores, values, b):
        return [online_reference(scores[k0:k0 + b], values[k0:k0 + b], b) for k0 in range(0, len(scores), b)]

    return (
        lambda s, v, b: np.mean(blocks(s, v, b), axis=0),  # each block normalised, then averaged
        lambda s, v, b: np.sum(blocks(s, v, b), axis=0),  # each block normalised, then added
    )


def _falling(rng: np.random.Generator, n: int, d_v: int) -> tuple[np.ndarray, np.ndarray]:
    return np.linspace(2.0, -2.0, n) + 0.1 * rng.normal(size=n), rng.normal(size=(n, d_v))


def online_public() -> list[Case]:
    rng = np.random.default_rng(405)
    rising = np.linspace(-2.0, 3.0, 9) + 0.1 * rng.normal(size=9)
    large = 800.0 - np.arange(6.0)
    return numbered([
        Case("", "9 scores that grow, block 3: each block raises the maximum",
             (rising, rng.normal(size=(9, 2)), 3), frozenset({"rising"})),
        Case("", "10 scores, block 4: the last block is partial", (rng.normal(size=10), rng.normal(size=(10, 3)), 4)),
        Case("", "scores that fall, block 2", (*_falling(rng, 7, 2), 2)),
        Case("", "5 scores, block 8: one block holds them all", (rng.normal(size=5), rng.normal(size=(5, 2)), 8)),
        Case("", "large scores (800, 799, ...), block 2", (large, rng.normal(size=(6, 2)), 2),
             frozenset({"large-scores"})),
    ])


# (scores, value width, block, where the largest score is) of the random hidden cases: "later" (after
# the first block: the running maximum rises) or "first" (it never rises). Every seed draws these.
ONLINE_HIDDEN = ((10, 3, 3, "later"), (8, 1, 2, "first"), (5, 2, 8, "first"), (13, 4, 1, "later"))


def _largest_at(rng: np.random.Generator, scores: np.ndarray, block: int, where: str) -> np.ndarray:
    """``scores`` with its largest entry moved into the first block or after it (at a drawn place)."""
    n = len(scores)
    place = int(rng.integers(0, min(block, n))) if where == "first" else int(rng.integers(block, n))
    top = int(np.argmax(scores))
    scores[[top, place]] = scores[[place, top]]
    return scores


def online_hidden(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d_v, b, where in ONLINE_HIDDEN:
        scores = _largest_at(rng, rng.normal(size=n) * float(rng.uniform(0.5, 3.0)), b, where)
        cases.append(Case("", f"random: {n} scores, value width {d_v}, block {b}",
                          (scores, rng.normal(size=(n, d_v)), b)))
    n = 11
    cases.append(Case("", f"{n} scores that grow", (np.linspace(-3.0, 3.0, n), rng.normal(size=(n, 2)), 3),
                      frozenset({"rising"})))
    n = 6
    large = _largest_at(rng, 800.0 - rng.permutation(n).astype(float), 2, "later")
    cases.append(Case("", "large scores (about 800)", (large, rng.normal(size=(n, 2)), 2), frozenset({"large-scores"})))
    return cases


ONLINE_SOFTMAX = Exercise(
    name="online_softmax",
    notebook=NOTEBOOK,
    signature="online_softmax(scores, values, block_size) -> (d_v,)",
    points=2,
    reference=online_reference,
    output=ArrayOutput("float"),
    public=online_public,
    hidden=online_hidden,
    diagnoses=(
        DiagnosisSpec(
            "online_not_rescaled", "Running sum or output not rescaled",
            "The result is wrong whenever a later block raises the running maximum: the sum and the "
            "weighted values kept so far were computed against the old maximum and were not rescaled.",
            "When the maximum moves from m to m_new, multiply the running sum and the running output "
            "by exp(m - m_new) before adding the new block.",
            "tiled", matches_model(*_online_not_rescaled_models()),
        ),
        DiagnosisSpec(
            "online_no_running_max", "No running maximum",
            "Only the case with large scores goes wrong: exp(800) overflows, and the answer returns NaN "
            "or inf there, or numbers a guard put in their place. Without a running maximum there is "
            "nothing to subtract before exponentiating.",
            "Keep the largest score seen so far, m, and exponentiate scores minus m.",
            "tiled", any_of(overflows_only_on("large-scores"), fails_only_on("large-scores")),
        ),
        DiagnosisSpec(
            "online_last_block_skipped", "The last block never read",
            "The result is the online softmax of every block but the last: the loop stops while the "
            "last block, whole or partial, is still to come (while start + block_size < len(scores), or "
            "range(0, len(scores) - block_size, block_size)). With a single block nothing is read at all.",
            "Loop over every start: for start in range(0, len(scores), block_size); a slice past the end "
            "stops at the end by itself.",
            "tiled", matches_model(*_last_block_skipped_models()),
        ),
        DiagnosisSpec(
            "online_normalised_per_block", "Each block normalised on its own",
            "The answer takes a softmax inside each block and then averages or adds the blocks' "
            "results: a block with small scores gets as much say as a block with large ones.",
            "Do not divide inside the loop: keep the unnormalised running sum and output, and divide "
            "once, at the end.",
            "tiled", matches_model(*_per_block_models()),
        ),
        DiagnosisSpec(
            "online_not_divided", "The final division is missing",
            "The answer returns the running weighted sum of values without dividing by the running sum "
            "of exponentials, so its weights do not add up to one.",
            "Return acc / denom at the end.",
            "tiled", matches_model(lambda s, v, b: _online_one(s, v, b, divide=False)),
        ),
    ),
    stub_hint="keep a running maximum, a running sum of exponentials and a running weighted sum of values",
)
