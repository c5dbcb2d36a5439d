"""Exercises of 07_capstone: one step of decoding with a key/value cache, and the length table.

The cache is a preallocated buffer per sequence and head, as serving libraries keep it: rows
``0 .. length-1`` hold the keys and values of the text so far, the rows after them are not
written yet (they hold whatever was there: the cases fill them with other numbers). A step
writes the ``n`` new keys and values at rows ``length .. length+n-1`` and attends each new
query to the rows at or before its own position. Its work is the ``n x (length + n)`` scores
it returns as ``weights``: it grows with the text, not with the buffer, and an answer that scores
every slot, or reads an unwritten one, returns other weights.
"""

from __future__ import annotations

import math

import numpy as np

from lessonlib.exercises.spec import ArrayOutput, Case, DiagnosisSpec, Exercise, TupleOutput, matches_model, numbered

NOTEBOOK = "07_capstone.ipynb"


def _softmax_allowed(scores: np.ndarray, allowed: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax over the last axis (or ``axis``) of (..., n, S) scores, over the allowed (n, S) entries
    only; a slice with none allowed gets zeros."""
    s = np.where(allowed, scores, -np.inf)
    top = s.max(axis=axis, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _step(query, key, value, cache_keys, cache_values, length, *, write_at=None, read_end=None, offset=0,
          top_left=False, write=True, attend_before_write=False, axis=-1):
    """One cached step with each choice a misconception can get wrong (the defaults are right).

    write_at: first row the new keys go to; read_end: rows [0, read_end) are scored; offset: query r
    sees rows <= length + r + offset; top_left: query r sees rows <= r (the cache ignored).
    """
    n = query.shape[-2]
    write_at = length if write_at is None else write_at
    read_end = length + n if read_end is None else read_end
    new_keys, new_values = cache_keys.copy(), cache_values.copy()  # (B, H, C, d_h) each
    if write:
        new_keys[..., write_at:write_at + n, :] = key
        new_values[..., write_at:write_at + n, :] = value
    k, v = (cache_keys, cache_values) if attend_before_write else (new_keys, new_values)
    k, v = k[..., :read_end, :], v[..., :read_end, :]  # (B, H, S, d_h)
    scores = query @ np.swapaxes(k, -1, -2) / math.sqrt(query.shape[-1])  # (B, H, n, S)
    last = np.arange(n)[:, None] + (0 if top_left else length + offset)  # (n, 1) last row each query sees
    weights = _softmax_allowed(scores, np.arange(read_end)[None, :] <= last, axis)  # (B, H, n, S)
    return weights @ v, weights, new_keys, new_values


def step_reference(query, key, value, cache_keys, cache_values, length):
    """(output (B, H, n, d_h), weights (B, H, n, length+n), cache_keys, cache_values (B, H, C, d_h)).

    query, key, value (B, H, n, d_h): the n new tokens; cache rows [0, length) hold the text so far.
    """
    return _step(query, key, value, cache_keys, cache_values, length)


# --- misconceptions --------------------------------------------------------------------------------


def _position_models():
    """The new keys written one row late (a gap of one unwritten row) or one row early (over the last key)."""

    def late(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, write_at=length + 1, read_end=length + 1 + q.shape[-2], offset=1)

    def early(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, write_at=length - 1, read_end=length - 1 + q.shape[-2], offset=-1)

    return late, early


def _stale_models():
    """Attended before the new keys were written (the unwritten rows read), or never written at all."""

    def attend_then_write(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, attend_before_write=True)

    def never_written(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, write=False, read_end=length)

    return attend_then_write, never_written


def _mask_models():
    """Each new query one row short (not its own key) or one row long (the next new key)."""

    def short(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, offset=-1)

    def long(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, offset=1)

    return short, long


def _top_left(q, k, v, ck, cv, length):
    """Query r sees rows 0..r: the causal mask of a whole text, aligned at the top left."""
    return _step(q, k, v, ck, cv, length, top_left=True)


def _whole_buffer_models():
    """Every slot of the buffer scored: masked right but of the buffer's width, or not masked at all."""

    def masked(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, read_end=ck.shape[-2])

    def unmasked(q, k, v, ck, cv, length):
        return _step(q, k, v, ck, cv, length, read_end=ck.shape[-2], offset=ck.shape[-2])

    return masked, unmasked


# --- cases -----------------------------------------------------------------------------------------


def _inputs(rng: np.random.Generator, batch: int, heads: int, d_head: int, length: int, n: int,
            capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """New q, k, v (B, H, n, d_h) and a buffer (B, H, capacity, d_h) whose rows from ``length`` on are unwritten."""
    assert length + n <= capacity - 1  # one spare row, so a key written one row late still fits
    shape = (batch, heads, n, d_head)
    q, k, v = (rng.normal(0.0, 1.5, shape) for _ in range(3))
    cache_keys = rng.normal(0.0, 1.5, (batch, heads, capacity, d_head))  # (B, H, C, d_h)
    cache_values = rng.normal(0.0, 1.0, (batch, heads, capacity, d_head))
    # unwritten rows: left-overs unlike any real key, so reading one moves the output
    cache_keys[..., length:, :] = rng.normal(2.0, 2.0, (batch, heads, capacity - length, d_head))
    cache_values[..., length:, :] = rng.normal(5.0, 1.0, (batch, heads, capacity - length, d_head))
    return q, k, v, cache_keys, cache_values, length


def _hand_made() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One sequence, one head of width 2: three cached rows, one new token, a buffer of 6 rows."""
    q = np.array([[[[1.0, 0.0]]]])  # (1, 1, 1, 2)
    k = np.array([[[[2.0, 0.0]]]])
    v = np.array([[[[0.0, 4.0]]]])
    cache_keys = np.array([[[[0.0, 1.0], [1.0, 0.0], [-1.0, 0.0], [9.0, 9.0], [9.0, 9.0], [9.0, 9.0]]]])  # (1, 1, 6, 2)
    cache_values = np.array([[[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [7.0, 7.0], [7.0, 7.0], [7.0, 7.0]]]])
    return q, k, v, cache_keys, cache_values, 3


def step_public() -> list[Case]:
    rng = np.random.default_rng(707)
    return numbered([
        Case("", "1 sequence, 1 head of width 2: 3 cached positions, 1 new token, a buffer of 6 rows", _hand_made()),
        Case("", "1 sequence, 2 heads of width 4: 5 cached positions, 1 new token, a buffer of 8 rows",
             _inputs(rng, 1, 2, 4, 5, 1, 8)),
        Case("", "2 sequences, 2 heads of width 4: 4 cached positions, 3 new tokens at once, a buffer of 10 rows",
             _inputs(rng, 2, 2, 4, 4, 3, 10)),
        Case("", "1 sequence, 1 head of width 4: 6 cached positions, 1 new token, a buffer of 512 rows",
             _inputs(rng, 1, 1, 4, 6, 1, 512)),
    ])


STEP_HIDDEN = ((1, 4, 8, 17, 1, 64), (3, 2, 6, 9, 2, 16), (2, 4, 4, 30, 1, 1024), (1, 2, 8, 1, 5, 12),
               (2, 1, 2, 12, 4, 40))  # B, H, d_h, length, n, capacity


def step_hidden(rng: np.random.Generator) -> list[Case]:
    return [Case("", f"random: {b} sequence(s), {h} head(s) of width {d}, {s} cached, {n} new, a buffer of {c} rows",
                 _inputs(rng, b, h, d, s, n, c)) for b, h, d, s, n, c in STEP_HIDDEN]


CACHED_ATTENTION_STEP = Exercise(
    name="cached_attention_step",
    may_change=frozenset({3, 4}),  # the buffers: "of a copy, or in place"
    notebook=NOTEBOOK,
    signature="cached_attention_step(query, key, value, cache_keys, cache_values, length) "
              "-> (output, weights, cache_keys, cache_values)",
    points=3,
    reference=step_reference,
    output=TupleOutput(("output", "weights", "cache_keys", "cache_values"), (ArrayOutput(),) * 4),
    public=step_public,
    hidden=step_hidden,
    diagnoses=(
        DiagnosisSpec(
            "cache_position_off_by_one", "New keys written one row off",
            "The new keys and values go one row late (leaving an unwritten row inside the text, which is "
            "then attended) or one row early (over the last cached key, which is lost). Row `length` is the "
            "first free one: rows 0 to length-1 already hold the text so far.",
            "Write the n new keys and values at rows length to length+n-1: "
            "cache_keys[..., length:length + n, :] = key.",
            "capstone-cache", matches_model(*_position_models()),
        ),
        DiagnosisSpec(
            "stale_key", "Attended to the cache before (or without) adding the new keys",
            "The answer scores the queries against the cache as it was before this step: the new tokens' own "
            "keys are either missing or read from rows not yet written. A causal query always sees its own "
            "key, so the new keys must be in the cache before the scores are computed.",
            "First write the new keys and values into rows length to length+n-1, then score the queries "
            "against rows 0 to length+n-1, and return the cache with the new rows in it.",
            "capstone-cache", matches_model(*_stale_models()),
        ),
        DiagnosisSpec(
            "cache_mask_off_by_one", "The causal mask one key off",
            "Each new query sees one key too few (not its own) or one too many (the next new token's, a "
            "future key). New query r sits at position length + r and sees keys 0 to length + r.",
            "Allow key j for new query r when j <= length + r.",
            "capstone-cache", matches_model(*_mask_models()),
        ),
        DiagnosisSpec(
            "cache_mask_top_left", "The cache ignored by the mask",
            "The mask is a whole text's causal mask, aligned at the top left: new query r sees keys 0 to r, "
            "as if it were at position r, not at position length + r after the cached text.",
            "Align the mask at the bottom right: the new queries are the last n positions of length + n.",
            "alignment", matches_model(_top_left),
        ),
        DiagnosisSpec(
            "step_softmax_over_queries", "Softmax over the new queries",
            "The weights of each key sum to one over the new queries (axis -2), not those of each query "
            "over the keys: with one new token every allowed key gets weight 1.",
            "Take the softmax over the keys, the last axis: axis=-1, keepdims=True.",
            "capstone-cache", matches_model(lambda *a: _step(*a, axis=-2)),
        ),
        DiagnosisSpec(
            "whole_cache_scored", "Every slot of the buffer scored",
            "The answer computes a score for every row of the buffer, the unwritten ones included: the work of "
            "the longest text the buffer can hold, at every step, instead of the length + n keys this text has. "
            "Over a whole generation that is as much work as recomputing everything, and an unwritten row "
            "that is not masked brings numbers that are no key into the softmax.",
            "Slice the buffer to the rows written so far (cache_keys[..., :length + n, :]) and score only those: "
            "weights of shape (B, H, n, length + n).",
            "capstone-cache", matches_model(*_whole_buffer_models()),
        ),
    ),
    stub_hint="write the new rows first, then score the queries against rows 0 .. length+n-1 only",
)
