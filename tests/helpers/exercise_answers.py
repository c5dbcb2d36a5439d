"""Answers for the exercise tests: correct ones in several styles, and deliberately wrong ones.

Each wrong answer carries exactly one misconception; the tests assert that ``check`` names it.
"""

from __future__ import annotations

import math

import numpy as np

from helpers import learner_answers as learner

# --- helpers shared by several answers ----------------------------------------------------------


def _softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attend(q, k, v, scale=None, axis=-1):
    scale = 1.0 / math.sqrt(k.shape[-1]) if scale is None else scale
    w = _softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=axis)  # (..., L, S)
    return w @ v, w


# --- scaled_dot_product_attention ---------------------------------------------------------------


def sdpa_matmul(query, key, value):
    d_k = key.shape[-1]
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(d_k)  # (..., L, S)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights


def sdpa_einsum(query, key, value):
    scores = np.einsum("...ld,...sd->...ls", query, key) / math.sqrt(query.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    if value.ndim == key.ndim - 1:  # one number per key
        return np.einsum("...ls,...s->...l", weights, value), weights
    return np.einsum("...ls,...sv->...lv", weights, value), weights


def sdpa_loops(query, key, value):
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    n_q, n_k = query.shape[-2], key.shape[-2]
    scalar = value.ndim == key.ndim - 1
    weights = np.zeros(batch + (n_q, n_k))
    output = np.zeros(batch + ((n_q,) if scalar else (n_q, value.shape[-1])))
    for b in np.ndindex(*batch):
        q, k, v = query[b], key[b], value[b]
        for i in range(n_q):
            scores = [float(np.dot(q[i], k[j])) / math.sqrt(k.shape[-1]) for j in range(n_k)]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps)
            for j in range(n_k):
                weights[b + (i, j)] = exps[j] / total
                output[b + (i,)] += weights[b + (i, j)] * v[j]
    return output, weights


def sdpa_global_shift(query, key, value):
    """Subtracts one maximum for the whole array (also valid: softmax ignores a shared constant)."""
    scores = np.matmul(query, np.swapaxes(key, -1, -2)) * key.shape[-1] ** -0.5
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return np.matmul(weights, value[..., None])[..., 0] if value.ndim == key.ndim - 1 else weights @ value, weights


def sdpa_missing_scale(query, key, value):
    return _attend(query, key, value, scale=1.0)


def sdpa_scaled_by_d_k(query, key, value):
    return _attend(query, key, value, scale=1.0 / key.shape[-1])


def sdpa_scaled_by_value_width(query, key, value):
    return _attend(query, key, value, scale=1.0 / math.sqrt(value.shape[-1]))


def sdpa_softmax_over_queries(query, key, value):
    return _attend(query, key, value, axis=-2)


def sdpa_no_max(query, key, value):
    e = np.exp(query @ np.swapaxes(key, -1, -2) / math.sqrt(key.shape[-1]))
    w = e / e.sum(-1, keepdims=True)
    return w @ value, w


def sdpa_transposed(query, key, value):
    out, w = _attend(query, key, value)
    return out, np.swapaxes(w, -1, -2)


# --- masked_softmax -----------------------------------------------------------------------------


def masked_where(scores, allowed):
    masked = np.where(allowed, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(masked - row_max)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_additive(scores, allowed):
    bias = np.where(allowed, 0.0, -np.inf)  # additive mask: 0 keeps a key, -inf removes it
    masked = scores + bias
    empty = np.isneginf(masked).all(axis=-1, keepdims=True)
    masked = np.where(empty, 0.0, masked)
    e = np.exp(masked - masked.max(axis=-1, keepdims=True))
    return np.where(empty, 0.0, e / e.sum(axis=-1, keepdims=True))


def masked_loops(scores, allowed):
    allowed = np.broadcast_to(allowed, scores.shape)
    out = np.zeros(scores.shape)
    for idx in np.ndindex(*scores.shape[:-1]):
        keep = [j for j in range(scores.shape[-1]) if allowed[idx + (j,)]]
        if not keep:
            continue
        top = max(scores[idx + (j,)] for j in keep)
        exps = {j: math.exp(scores[idx + (j,)] - top) for j in keep}
        total = sum(exps.values())
        for j, e in exps.items():
            out[idx + (j,)] = e / total
    return out


def masked_exp_times_mask(scores, allowed):
    """Exponentiate shifted scores, multiply by the mask, normalise: valid with the allowed maximum."""
    top = np.max(np.where(allowed, scores, -np.inf), axis=-1, keepdims=True)
    top = np.nan_to_num(top, neginf=0.0)
    e = np.exp(np.minimum(scores - top, 0.0)) * allowed
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def masked_zeroed_after(scores, allowed):
    return _softmax(scores) * allowed


def masked_renormalised_after(scores, allowed):
    p = _softmax(scores) * allowed
    return p / p.sum(axis=-1, keepdims=True)


def masked_times_mask(scores, allowed):
    return _softmax(scores * allowed)


def masked_inverted(scores, allowed):
    return masked_where(scores, ~np.asarray(allowed))


def masked_finite_fill(scores, allowed):
    return _softmax(np.where(allowed, scores, -1e9))


def masked_whole_array(scores, allowed):
    """One row's softmax on the whole array: the maximum and the sum over every element."""
    s = np.where(allowed, scores, -np.inf)
    e = np.exp(s - np.max(s))
    return e / np.sum(e)


def masked_nan_rows(scores, allowed):
    return _softmax(np.where(allowed, scores, -np.inf))


# --- causal_mask and padding_mask ---------------------------------------------------------------


def causal_tril(length):
    return np.tril(np.ones((length, length), dtype=bool))


def causal_compare(length):
    i = np.arange(length)
    return i[None, :] <= i[:, None]  # key j allowed for query i when j <= i


def causal_loops(length):
    return np.array([[j <= i for j in range(length)] for i in range(length)], dtype=bool)


def causal_not_triu(length):
    return ~np.triu(np.ones((length, length), dtype=bool), k=1)


def causal_upper(length):
    return np.triu(np.ones((length, length), dtype=bool))


def causal_strict(length):
    return np.tril(np.ones((length, length)), k=-1).astype(bool)


def causal_blocked(length):
    return np.triu(np.ones((length, length), dtype=bool), k=1)


def causal_float(length):
    return np.tril(np.ones((length, length)))


def padding_compare(lengths, max_length):
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]


def padding_loops(lengths, max_length):
    return np.array([[j < n for j in range(max_length)] for n in lengths], dtype=bool).reshape(len(lengths), max_length)


def padding_fill(lengths, max_length):
    mask = np.zeros((len(lengths), max_length), dtype=bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    return mask


def padding_query_axis(lengths, max_length):
    return padding_compare(lengths, max_length)[:, :, None]  # (B, L, 1): broadcasts over keys


def padding_inverted(lengths, max_length):
    return np.arange(max_length)[None, :] >= np.asarray(lengths)[:, None]


def padding_off_by_one(lengths, max_length):
    return np.arange(max_length)[None, :] <= np.asarray(lengths)[:, None]


def padding_ints(lengths, max_length):
    return padding_compare(lengths, max_length).astype(int)


# --- cached_causal_mask --------------------------------------------------------------------------


def cached_compare(lengths, n_queries):
    lengths = np.asarray(lengths)
    if n_queries > lengths.min():
        raise ValueError(f"{n_queries} new tokens do not fit in a sequence of length {lengths.min()}")
    s = lengths.max()
    keys = np.arange(s)
    real = keys[None, :] >= s - lengths[:, None]  # (B, S): left padding
    query_pos = s - n_queries + np.arange(n_queries)  # (L,): the last positions
    return real[:, None, :] & (keys[None, :] <= query_pos[:, None])[None]  # (B, L, S)


def cached_tril(lengths, n_queries):
    lengths = np.asarray(lengths)
    s = int(lengths.max())
    causal = np.tril(np.ones((n_queries, s), dtype=bool), k=s - n_queries)  # (L, S) bottom-right
    pad = np.arange(s)[::-1][None, :] < lengths[:, None]  # (B, S): distance from the end < length
    return causal[None] & pad[:, None, :]


def cached_loops(lengths, n_queries):
    s = max(lengths)
    mask = np.zeros((len(lengths), n_queries, s), dtype=bool)
    for b, n in enumerate(lengths):
        for i in range(n_queries):
            for j in range(s):
                mask[b, i, j] = s - n <= j <= s - n_queries + i
    return mask


def cached_last_rows(lengths, n_queries):
    s = int(np.max(lengths))
    square = np.tri(s, dtype=bool)[s - n_queries:]  # the last L rows of the square causal mask
    rows = [square & (np.arange(s) >= s - n) for n in lengths]
    return np.stack(rows)


def _cached_parts(lengths, n_queries):
    lengths = np.asarray(lengths)
    s = lengths.max()
    return lengths, s, np.arange(s), s - n_queries + np.arange(n_queries)


def cached_top_left(lengths, n_queries):
    lengths, s, keys, _ = _cached_parts(lengths, n_queries)
    causal = np.tril(np.ones((n_queries, s), dtype=bool))  # top-left: the queries placed at the start
    return causal[None] & (keys[None, :] >= s - lengths[:, None])[:, None, :]


def cached_first_rows(lengths, n_queries):
    s = int(np.max(lengths))
    square = np.tri(s, dtype=bool)[:n_queries]  # the first L rows: the queries placed at the start
    return np.stack([square & (np.arange(s) >= s - n) for n in lengths])


def cached_strict(lengths, n_queries):
    lengths, s, keys, query_pos = _cached_parts(lengths, n_queries)
    real = keys[None, :] >= s - lengths[:, None]
    return real[:, None, :] & (keys[None, :] < query_pos[:, None])  # < where <= is meant


def cached_sees_next(lengths, n_queries):
    lengths, s, keys, query_pos = _cached_parts(lengths, n_queries)
    real = keys[None, :] >= s - lengths[:, None]
    return real[:, None, :] & (keys[None, :] <= query_pos[:, None] + 1)  # positions counted from 1


def cached_padding_right(lengths, n_queries):
    lengths, s, keys, query_pos = _cached_parts(lengths, n_queries)
    real = keys[None, :] < lengths[:, None]  # the padding at the end
    return real[:, None, :] & (keys[None, :] <= query_pos[:, None])


def cached_padding_ignored(lengths, n_queries):
    lengths, s, keys, query_pos = _cached_parts(lengths, n_queries)
    causal = keys[None, :] <= query_pos[:, None]  # (L, S), the same for every sequence
    return np.broadcast_to(causal, (len(lengths), n_queries, s)).copy()


def cached_new_keys_only(lengths, n_queries):
    lengths, s, keys, query_pos = _cached_parts(lengths, n_queries)
    mask = np.zeros((len(lengths), n_queries, s), dtype=bool)
    mask[:, :, s - n_queries:] = np.tri(n_queries, dtype=bool)  # the cached columns stay False
    return mask & (keys[None, :] >= s - lengths[:, None])[:, None, :]


def cached_keys_first(lengths, n_queries):
    return np.transpose(cached_compare(lengths, n_queries), (0, 2, 1))  # (B, S, L)


def cached_queries_first(lengths, n_queries):
    return np.transpose(cached_compare(lengths, n_queries), (1, 0, 2))  # (L, B, S)


def cached_float(lengths, n_queries):
    return cached_compare(lengths, n_queries).astype(float)


# --- sinusoidal_positions -----------------------------------------------------------------------


def sinusoid_slices(n_positions, d_model):
    pos = np.arange(n_positions)[:, None]
    angle = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)  # (n, d/2)
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def sinusoid_loops(n_positions, d_model):
    pe = np.zeros((n_positions, d_model))
    for p in range(n_positions):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            pe[p, 2 * i] = math.sin(angle)
            pe[p, 2 * i + 1] = math.cos(angle)
    return pe


def sinusoid_stack(n_positions, d_model):
    inv_freq = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    angle = np.outer(np.arange(n_positions), inv_freq)
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(n_positions, d_model)


def sinusoid_swapped(n_positions, d_model):
    pe = sinusoid_slices(n_positions, d_model)
    return pe[:, [j + 1 if j % 2 == 0 else j - 1 for j in range(d_model)]]


def sinusoid_halves(n_positions, d_model):
    pos = np.arange(n_positions)[:, None]
    angle = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def sinusoid_wrong_exponent(n_positions, d_model):
    pos = np.arange(n_positions)[:, None]
    angle = pos / 10000 ** (np.arange(d_model // 2) / d_model)  # i/d: factor 2 forgotten
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def sinusoid_from_one(n_positions, d_model):
    return sinusoid_slices(n_positions + 1, d_model)[1:]


# --- apply_rope ---------------------------------------------------------------------------------


def _angles(positions, d):
    return np.asarray(positions, dtype=float)[:, None] / 10000 ** (np.arange(0, d, 2) / d)  # (n, d/2)


def rope_slices(x, positions):
    t = _angles(positions, x.shape[-1])
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * np.cos(t) - b * np.sin(t)
    out[..., 1::2] = a * np.sin(t) + b * np.cos(t)
    return out


def rope_complex(x, positions):
    z = x[..., 0::2] + 1j * x[..., 1::2]  # each pair as one complex number
    z = z * np.exp(1j * _angles(positions, x.shape[-1]))
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def rope_einsum(x, positions):
    t = _angles(positions, x.shape[-1])  # (n, d/2)
    c, s = np.cos(t), np.sin(t)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # (n, d/2, 2, 2)
    pairs = x.reshape(*x.shape[:-1], -1, 2)  # (..., n, d/2, 2)
    return np.einsum("npij,...npj->...npi", rot, pairs).reshape(x.shape)


def rope_loops(x, positions):
    out = np.array(x, dtype=float)
    d = x.shape[-1]
    for idx in np.ndindex(*x.shape[:-1]):
        p = positions[idx[-1]]
        for i in range(d // 2):
            t = p / 10000 ** (2 * i / d)
            a, b = x[idx + (2 * i,)], x[idx + (2 * i + 1,)]
            out[idx + (2 * i,)] = a * math.cos(t) - b * math.sin(t)
            out[idx + (2 * i + 1,)] = a * math.sin(t) + b * math.cos(t)
    return out


def rope_half(x, positions):
    d = x.shape[-1]
    t = _angles(positions, d)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * np.cos(t) - b * np.sin(t), a * np.sin(t) + b * np.cos(t)], axis=-1)


def rope_backwards(x, positions):
    return rope_slices(x, -np.asarray(positions))


def rope_wrong_frequency(x, positions):
    d = x.shape[-1]
    t = np.asarray(positions, dtype=float)[:, None] / 10000 ** (np.arange(d // 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * np.cos(t) - b * np.sin(t), a * np.sin(t) + b * np.cos(t)
    return out


def rope_from_one(x, positions):
    return rope_slices(x, np.asarray(positions) + 1)


# --- score_matrix_bytes -------------------------------------------------------------------------


def bytes_plain(batch, heads, length, bytes_per_element):
    return batch * heads * length * length * bytes_per_element


def bytes_prod(batch, heads, length, bytes_per_element):
    return math.prod([batch, heads, length, length, bytes_per_element])


def bytes_numpy(batch, heads, length, bytes_per_element):
    return np.int64(batch) * heads * length**2 * bytes_per_element


def bytes_elements(batch, heads, length, bytes_per_element):
    return batch * heads * length * length


def bytes_no_heads(batch, heads, length, bytes_per_element):
    return batch * length * length * bytes_per_element


def bytes_no_batch(batch, heads, length, bytes_per_element):
    return heads * length * length * bytes_per_element


def bytes_linear(batch, heads, length, bytes_per_element):
    return batch * heads * length * bytes_per_element


# --- tiled_attention ----------------------------------------------------------------------------


def tiled_online(query, key, value, block_size):
    """Query blocks x key blocks, online softmax (the FlashAttention loop)."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    n_q, n_k = query.shape[-2], key.shape[-2]
    out = np.zeros(batch + (n_q, value.shape[-1]))
    for q0 in range(0, n_q, block_size):
        q = query[..., q0:q0 + block_size, :] * scale  # (..., bq, d)
        m = np.full(q.shape[:-1], -np.inf)
        denom = np.zeros(q.shape[:-1])
        acc = np.zeros(q.shape[:-1] + (value.shape[-1],))
        for k0 in range(0, n_k, block_size):
            s = q @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2)  # (..., bq, bk)
            m_new = np.maximum(m, s.max(axis=-1))
            p = np.exp(s - m_new[..., None])
            factor = np.exp(m - m_new)
            denom = denom * factor + p.sum(axis=-1)
            acc = acc * factor[..., None] + p @ value[..., k0:k0 + block_size, :]
            m = m_new
        out[..., q0:q0 + block_size, :] = acc / denom[..., None]
    return out


def tiled_two_pass(query, key, value, block_size):
    """First pass: row maxima and sums block by block; second pass: accumulate the output."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    q = query * scale
    blocks = range(0, key.shape[-2], block_size)
    m = np.max([np.einsum("...ld,...sd->...ls", q, key[..., k0:k0 + block_size, :]).max(-1) for k0 in blocks], axis=0)
    denom = sum(np.exp(np.einsum("...ld,...sd->...ls", q, key[..., k0:k0 + block_size, :]) - m[..., None]).sum(-1)
                for k0 in blocks)
    acc = sum(np.exp(np.einsum("...ld,...sd->...ls", q, key[..., k0:k0 + block_size, :]) - m[..., None])
              @ value[..., k0:k0 + block_size, :] for k0 in blocks)
    return acc / denom[..., None]


def tiled_rows(query, key, value, block_size):
    """One query row at a time, keys in blocks, with an online softmax in plain Python floats."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    out = np.zeros(batch + (query.shape[-2], value.shape[-1]))
    for b in np.ndindex(*batch):
        q_all, k_all, v_all = query[b], key[b], value[b]
        for i in range(q_all.shape[0]):
            m, denom, acc = -math.inf, 0.0, np.zeros(value.shape[-1])
            for k0 in range(0, k_all.shape[0], block_size):
                s = k_all[k0:k0 + block_size] @ q_all[i] * scale  # (bk,)
                m_new = max(m, float(s.max()))
                p = np.exp(s - m_new)
                c = math.exp(m - m_new)
                denom = denom * c + float(p.sum())
                acc = acc * c + p @ v_all[k0:k0 + block_size]
                m = m_new
            out[b + (i,)] = acc / denom
    return out


def tiled_not_rescaled(query, key, value, block_size):
    scale = 1.0 / math.sqrt(query.shape[-1])
    m = np.full(query.shape[:-1], -np.inf)
    denom = np.zeros(query.shape[:-1])
    acc = np.zeros(query.shape[:-1] + (value.shape[-1],))
    for k0 in range(0, key.shape[-2], block_size):
        s = query @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2) * scale
        m = np.maximum(m, s.max(-1))
        p = np.exp(s - m[..., None])
        denom = denom + p.sum(-1)  # forgot: times exp(m_old - m_new)
        acc = acc + p @ value[..., k0:k0 + block_size, :]
    return acc / denom[..., None]


def tiled_drops_last_block(query, key, value, block_size):
    n_k = key.shape[-2]
    stop = n_k - n_k % block_size if n_k >= block_size else n_k
    return tiled_online(query, key[..., :stop, :], value[..., :stop, :], block_size)


def tiled_dense(query, key, value, block_size):
    return _attend(query, key, value)[0]


def tiled_no_max(query, key, value, block_size):
    scale = 1.0 / math.sqrt(query.shape[-1])
    denom = np.zeros(query.shape[:-1])
    acc = np.zeros(query.shape[:-1] + (value.shape[-1],))
    for k0 in range(0, key.shape[-2], block_size):
        p = np.exp(query @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2) * scale)
        denom = denom + p.sum(-1)
        acc = acc + p @ value[..., k0:k0 + block_size, :]
    return acc / denom[..., None]


def tiled_unscaled(query, key, value, block_size):
    return tiled_online(query * math.sqrt(query.shape[-1]), key, value, block_size)


def tiled_full_then_blocks(query, key, value, block_size):
    """Builds the whole (L, S) score matrix first, then loops over query blocks: exact, not tiled."""
    scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])  # (..., L, S)
    out = np.empty(scores.shape[:-1] + (value.shape[-1],))
    for q0 in range(0, scores.shape[-2], block_size):
        block = scores[..., q0:q0 + block_size, :]
        w = np.exp(block - block.max(-1, keepdims=True))
        out[..., q0:q0 + block_size, :] = (w / w.sum(-1, keepdims=True)) @ value
    return out


def tiled_full_float32(query, key, value, block_size):
    """The full score matrix again, kept in float32 to halve it: still (L, S)."""
    scores = (query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])).astype(np.float32)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)).astype(np.float64) @ value


# --- leaks_future ---------------------------------------------------------------------------------


def leaks_loop(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries  # the position of output row 0
    base = layer(x)
    for t in range(first + 1, length):
        changed = x.copy()
        changed[t] += 1.0
        if not np.allclose(layer(changed)[:t - first], base[:t - first]):
            return True
    return False


def leaks_max_difference(layer, length, n_queries, d_model):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(length, d_model))
    positions = np.arange(length - n_queries, length)  # (n_queries,): the position of each output row
    base = layer(x)
    for t in range(length - 1, 0, -1):
        changed = np.array(x)
        changed[t] = rng.normal(size=d_model) * 3
        before = positions < t
        if before.any() and np.abs(layer(changed)[before] - base[before]).max() > 1e-6:
            return True
    return False


def leaks_every_pair(layer, length, n_queries, d_model):
    x = np.ones((length, d_model)) + np.arange(length)[:, None] * 0.1
    base = layer(x)
    positions = np.arange(length)[-n_queries:]
    leaks = []
    for t in range(length):
        changed = x.copy()
        changed[t] = -changed[t]
        moved = ~np.isclose(layer(changed), base).all(axis=-1)  # (n_queries,) which outputs moved
        leaks.append(bool(moved[positions < t].any()))
    return any(leaks)


def leaks_only_last(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    changed = x.copy()
    changed[-1] += 1.0
    return not np.allclose(layer(changed)[:-1], layer(x)[:-1])


def leaks_last_output(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    changed = x.copy()
    changed[-1] += 1.0
    return not np.allclose(layer(changed)[-1], layer(x)[-1])


def leaks_rows_as_positions(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    base = layer(x)
    for t in range(1, length):
        changed = x.copy()
        changed[t] += 1.0
        if not np.allclose(layer(changed)[:t], base[:t]):  # row r taken for position r
            return True
    return False


def leaks_exact(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries
    base = layer(x)
    for t in range(first + 1, length):
        changed = x.copy()
        changed[t] += 1.0
        if (layer(changed)[:t - first] != base[:t - first]).any():
            return True
    return False


def leaks_in_place(layer, length, n_queries, d_model):
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries
    for t in range(first + 1, length):
        changed = x  # not a copy
        changed[t] += 1.0
        if not np.allclose(layer(changed)[:t - first], layer(x)[:t - first]):
            return True
    return False


# --- mask_polarity --------------------------------------------------------------------------------


def polarity_zeros(attention_fn):
    query, key = np.zeros((1, 1, 2)), np.zeros((1, 3, 2))
    key_mask = np.array([[0.0, 1.0, -np.inf]])  # (B, S)
    w = np.asarray(attention_fn(query, key, np.eye(3)[None], key_mask), dtype=float)[0, 0]  # (3,)
    if w[0] < 1e-3:
        return "attend"
    return "blocked" if w[1] < 1e-3 else "additive"


def polarity_compare_values(attention_fn):
    value = np.array([[[1.0], [100.0]]])  # (1, 2, 1)
    out = attention_fn(np.zeros((1, 1, 4)), np.zeros((1, 2, 4)), value, np.array([[0.0, 2.0]]))
    got = float(out[0, 0, 0])
    if abs(got - 100.0) < 0.5:
        return "attend"
    if abs(got - 1.0) < 0.5:
        return "blocked"
    return "additive"


def polarity_two_rows(attention_fn):
    key_mask = np.array([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])  # two sequences, (2, 4)
    w = np.asarray(attention_fn(np.zeros((2, 1, 3)), np.zeros((2, 4, 3)), np.tile(np.eye(4), (2, 1, 1)),
                                key_mask), dtype=float)[:, 0]  # (2, 4)
    nonzero = key_mask != 0
    if (w[~nonzero] < 1e-3).all():
        return "attend"
    if (w[nonzero] < 1e-3).all():
        return "blocked"
    return "additive"


def polarity_random(attention_fn):
    rng = np.random.default_rng(0)
    key_mask = np.array([[0.0, 0.0, 1.0, 1.0]])
    w = np.asarray(attention_fn(rng.normal(size=(1, 1, 4)), rng.normal(size=(1, 4, 4)), np.eye(4)[None],
                                key_mask), dtype=float)[0, 0]
    zero_kept = (w[:2] > 1e-3).all()
    one_kept = (w[2:] > 1e-3).all()
    if one_kept and not zero_kept:
        return "attend"
    if zero_kept and not one_kept:
        return "blocked"
    return "additive"


def polarity_inverted(attention_fn):
    return {"attend": "blocked", "blocked": "attend", "additive": "additive"}[polarity_zeros(attention_fn)]


def polarity_minus_inf(attention_fn):
    key_mask = np.array([[0.0, -np.inf]])  # 0 and -inf only
    w = np.asarray(attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None], key_mask),
                   dtype=float)[0, 0]
    return "attend" if w[0] < 1e-3 else "additive"


def polarity_larger_weight(attention_fn):
    key_mask = np.array([[0.0, 1.0]])
    w = np.asarray(attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None], key_mask),
                   dtype=float)[0, 0]
    return "attend" if w[1] > w[0] else "blocked"  # the key with more weight taken for the allowed one


# --- is_order_sensitive ---------------------------------------------------------------------------


def order_roll(layer, x):
    perm = np.roll(np.arange(x.shape[1]), 1)
    return not np.allclose(layer(x[:, perm]), layer(x)[:, perm])


def order_several(layer, x):
    rng = np.random.default_rng(3)
    base = layer(x)
    for _ in range(4):
        perm = rng.permutation(x.shape[1])
        if np.abs(layer(x[:, perm]) - base[:, perm]).max() > 1e-8:
            return True
    return False


def order_flip(layer, x):
    """Only the reversal: it keeps every distance |i - j|, so a bias on distance alone passes it."""
    return not np.allclose(np.flip(layer(np.flip(x, axis=1)), axis=1), layer(x), atol=1e-10)


def order_roll_and_flip(layer, x):
    base = layer(x)
    for perm in (np.arange(x.shape[1])[::-1], np.roll(np.arange(x.shape[1]), 2)):
        if not np.allclose(layer(x[:, perm]), base[:, perm], atol=1e-10):
            return True
    return False


def order_not_undone(layer, x):
    perm = np.roll(np.arange(x.shape[1]), 1)
    return not np.allclose(layer(x[:, perm]), layer(x))


def order_exact(layer, x):
    perm = np.roll(np.arange(x.shape[1]), 1)
    return not np.array_equal(layer(x[:, perm]), layer(x)[:, perm])


def order_batch_axis(layer, x):
    """The lesson's one-sequence test used as is: x[perm] reorders the sequences of the batch."""
    perm = np.random.default_rng(5).permutation(len(x))
    return not np.allclose(layer(x[perm]), layer(x)[perm])


# --- alibi_slopes ---------------------------------------------------------------------------------


def alibi_formula(n_heads):
    return 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)


def alibi_ratio(n_heads):
    ratio = 2.0 ** (-8.0 / n_heads)
    return np.cumprod(np.full(n_heads, ratio))


def alibi_loop(n_heads):
    return np.array([math.pow(2, -8 * (h + 1) / n_heads) for h in range(n_heads)])


def alibi_from_zero(n_heads):
    return 2.0 ** (-8.0 * np.arange(n_heads) / n_heads)


def alibi_base_e(n_heads):
    return np.exp(-8.0 * np.arange(1, n_heads + 1) / n_heads)


def alibi_negative(n_heads):
    return -(2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads))


# --- alibi_weights --------------------------------------------------------------------------------


def _alibi_positions(scores):
    n_q, n_k = scores.shape
    return np.arange(n_k - n_q, n_k)[:, None], np.arange(n_k)[None, :]  # (L, 1) queries, (1, S) keys


def alibi_w_where(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    biased = np.where(j <= i, scores - 2.0 ** (-8 * (head + 1) / n_heads) * (i - j), -np.inf)
    return _softmax(biased)


def alibi_w_loops(scores, head, n_heads):
    n_q, n_k = scores.shape
    slope = math.pow(2, -8 * (head + 1) / n_heads)
    weights = np.zeros((n_q, n_k))
    for r in range(n_q):
        i = n_k - n_q + r
        exps = [math.exp(scores[r, j] - slope * (i - j)) for j in range(i + 1)]
        weights[r, :i + 1] = np.array(exps) / sum(exps)
    return weights


def alibi_w_key_form(scores, head, n_heads):
    """+m j instead of -m (i - j): a constant per row, which the softmax ignores."""
    i, j = _alibi_positions(scores)
    slope = alibi_formula(n_heads)[head]
    e = np.exp(scores + slope * j) * (j <= i)
    return e / e.sum(axis=-1, keepdims=True)


def alibi_w_sign(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    return _softmax(np.where(j <= i, scores + 2.0 ** (-8 * (head + 1) / n_heads) * (i - j), -np.inf))


def alibi_w_key_minus_query(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    return _softmax(np.where(j <= i, scores - 2.0 ** (-8 * (head + 1) / n_heads) * (j - i), -np.inf))


def alibi_w_after_softmax(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    weights = _softmax(np.where(j <= i, scores, -np.inf))
    return weights + np.where(j <= i, -2.0 ** (-8 * (head + 1) / n_heads) * (i - j), 0.0)


def alibi_w_one_based(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    return _softmax(np.where(j <= i, scores - 2.0 ** (-8 * head / n_heads) * (i - j), -np.inf))


def alibi_w_top_left(scores, head, n_heads):
    i, j = np.arange(scores.shape[0])[:, None], np.arange(scores.shape[1])[None, :]
    return _softmax(np.where(j <= i, scores - 2.0 ** (-8 * (head + 1) / n_heads) * (i - j), -np.inf))


def alibi_w_query_form(scores, head, n_heads):
    """+m i, the query's position, where the key form uses +m j."""
    i, j = _alibi_positions(scores)
    return _softmax(np.where(j <= i, scores + 2.0 ** (-8 * (head + 1) / n_heads) * i, -np.inf))


def alibi_w_unmasked(scores, head, n_heads):
    i, j = _alibi_positions(scores)
    return _softmax(scores - 2.0 ** (-8 * (head + 1) / n_heads) * np.abs(i - j))


# --- online_softmax -------------------------------------------------------------------------------


def online_arrays(scores, values, block_size):
    m, denom, acc = -np.inf, 0.0, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]
        m_new = max(m, s.max())
        c = np.exp(m - m_new)
        p = np.exp(s - m_new)
        denom, acc, m = denom * c + p.sum(), acc * c + p @ values[k0:k0 + block_size], m_new
    return acc / denom


def online_floats(scores, values, block_size):
    m, denom = -math.inf, 0.0
    acc = [0.0] * values.shape[1]
    for k0 in range(0, len(scores), block_size):
        block = [float(s) for s in scores[k0:k0 + block_size]]
        m_new = max([m] + block)
        c = math.exp(m - m_new)
        denom *= c
        acc = [a * c for a in acc]
        for j, s in enumerate(block):
            p = math.exp(s - m_new)
            denom += p
            acc = [a + p * float(v) for a, v in zip(acc, values[k0 + j])]
        m = m_new
    return np.array(acc) / denom


def online_log_sum_exp(scores, values, block_size):
    """Keeps log(denominator) instead of the denominator itself."""
    log_d, out = -np.inf, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]
        block_log = np.logaddexp.reduce(s)
        new_log = np.logaddexp(log_d, block_log)
        w = np.exp(s - new_log)
        out = out * np.exp(log_d - new_log) + w @ values[k0:k0 + block_size]
        log_d = new_log
    return out


def online_not_rescaled(scores, values, block_size):
    m, denom, acc = -np.inf, 0.0, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]
        m = max(m, s.max())
        p = np.exp(s - m)
        denom, acc = denom + p.sum(), acc + p @ values[k0:k0 + block_size]
    return acc / denom


def online_no_max(scores, values, block_size):
    denom, acc = 0.0, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        p = np.exp(scores[k0:k0 + block_size])
        denom, acc = denom + p.sum(), acc + p @ values[k0:k0 + block_size]
    return acc / denom


def online_per_block(scores, values, block_size):
    outs = []
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]
        p = np.exp(s - s.max())
        outs.append(p / p.sum() @ values[k0:k0 + block_size])
    return np.mean(outs, axis=0)


def online_not_divided(scores, values, block_size):
    m, denom, acc = -np.inf, 0.0, np.zeros(values.shape[-1])
    for k0 in range(0, len(scores), block_size):
        s = scores[k0:k0 + block_size]
        m_new = max(m, s.max())
        c = np.exp(m - m_new)
        p = np.exp(s - m_new)
        denom, acc, m = denom * c + p.sum(), acc * c + p @ values[k0:k0 + block_size], m_new
    return acc


# --- exclusion_effects ----------------------------------------------------------------------------


def _attend_one(query, keys, values):
    s = keys @ query / math.sqrt(len(query))
    w = np.exp(s - s.max())
    w = w / w.sum()
    return w @ values, w


def exclusion_delete(query, keys, values, w_o):
    out, _ = _attend_one(query, keys, values)
    return np.array([np.linalg.norm((_attend_one(query, np.delete(keys, j, 0), np.delete(values, j, 0))[0] - out) @ w_o)
                     for j in range(len(keys))])


def exclusion_minus_inf(query, keys, values, w_o):
    scores = keys @ query / np.sqrt(query.shape[-1])  # (S,)
    def out(s):
        w = np.exp(s - s.max())
        return (w / w.sum()) @ values @ w_o
    base = out(scores)
    effects = []
    for j in range(len(scores)):
        s = scores.copy()
        s[j] = -np.inf
        effects.append(np.linalg.norm(out(s) - base))
    return np.array(effects)


def exclusion_formula(query, keys, values, w_o):
    """o_(-j) - o = w_j / (1 - w_j) (o - v_j), then through W_o: NaN or inf where w_j rounds to 1."""
    out, w = _attend_one(query, keys, values)
    return w / (1 - w) * np.linalg.norm((out - values) @ w_o, axis=-1)


def exclusion_project_values_first(query, keys, values, w_o):
    """W_o is linear: project every value first, then exclude."""
    return exclusion_delete(query, keys, values @ w_o, np.eye(w_o.shape[1]))


def exclusion_weights(query, keys, values, w_o):
    return _attend_one(query, keys, values)[1]


def exclusion_no_projection(query, keys, values, w_o):
    return exclusion_delete(query, keys, values, np.eye(values.shape[1]))


def exclusion_norm_difference(query, keys, values, w_o):
    out, _ = _attend_one(query, keys, values)
    return np.array([np.linalg.norm(out @ w_o)
                     - np.linalg.norm(_attend_one(query, np.delete(keys, j, 0), np.delete(values, j, 0))[0] @ w_o)
                     for j in range(len(keys))])


def exclusion_abs_norm_difference(query, keys, values, w_o):
    return np.abs(exclusion_norm_difference(query, keys, values, w_o))


def exclusion_zero_weight(query, keys, values, w_o):
    out, w = _attend_one(query, keys, values)
    effects = []
    for j in range(len(w)):
        w2 = w.copy()
        w2[j] = 0.0  # after the softmax, not renormalised
        effects.append(np.linalg.norm((w2 @ values - out) @ w_o))
    return np.array(effects)


def exclusion_zero_value(query, keys, values, w_o):
    out, w = _attend_one(query, keys, values)
    effects = []
    for j in range(len(w)):
        v2 = values.copy()
        v2[j] = 0.0
        effects.append(np.linalg.norm((w @ v2 - out) @ w_o))
    return np.array(effects)


def exclusion_zero_key(query, keys, values, w_o):
    out, _ = _attend_one(query, keys, values)
    effects = []
    for j in range(len(keys)):
        k2 = keys.copy()
        k2[j] = 0.0
        effects.append(np.linalg.norm((_attend_one(query, k2, values)[0] - out) @ w_o))
    return np.array(effects)


def exclusion_unscaled(query, keys, values, w_o):
    return exclusion_delete(query * math.sqrt(len(query)), keys, values, w_o)


# --- changed_predictions --------------------------------------------------------------------------


def changed_masks(logits, logits_changed, targets, last_kept):
    changed = logits.argmax(-1) != logits_changed.argmax(-1)
    counted = (np.arange(logits.shape[1]) <= last_kept) & (targets >= 0)
    return float(changed[counted].mean())


def changed_loops(logits, logits_changed, targets, last_kept):
    moved = scored = 0
    for b in range(logits.shape[0]):
        for i in range(last_kept + 1):
            if targets[b, i] == -1:
                continue
            scored += 1
            moved += int(np.argmax(logits[b, i]) != np.argmax(logits_changed[b, i]))
    return moved / scored


def changed_slices(logits, logits_changed, targets, last_kept):
    before = logits[:, : last_kept + 1].argmax(axis=2)
    after = logits_changed[:, : last_kept + 1].argmax(axis=2)
    scored = targets[:, : last_kept + 1] != -1
    return np.sum((before != after) & scored) / np.sum(scored)


def changed_unscored_counted(logits, logits_changed, targets, last_kept):
    return float(np.mean(logits[:, : last_kept + 1].argmax(-1) != logits_changed[:, : last_kept + 1].argmax(-1)))


def changed_every_position(logits, logits_changed, targets, last_kept):
    scored = targets >= 0
    return float((logits.argmax(-1) != logits_changed.argmax(-1))[scored].mean())


def changed_stops_early(logits, logits_changed, targets, last_kept):
    return changed_masks(logits, logits_changed, targets, last_kept - 1)


def changed_any_logit(logits, logits_changed, targets, last_kept):
    moved = ~np.isclose(logits, logits_changed).all(axis=-1)
    counted = (np.arange(logits.shape[1]) <= last_kept) & (targets >= 0)
    return float(moved[counted].mean())



CORRECT = {
    "scaled_dot_product_attention": [sdpa_matmul, sdpa_einsum, sdpa_loops, sdpa_global_shift],
    "q1_context": [4, 4.0, np.float64(4.0), 0.5 * 2 + 0.5 * 6],
    "masked_softmax": [masked_where, masked_additive, masked_loops, masked_exp_times_mask],
    "causal_mask": [causal_tril, causal_compare, causal_loops, causal_not_triu],
    "padding_mask": [padding_compare, padding_loops, padding_fill],
    "cached_causal_mask": [cached_compare, cached_tril, cached_loops, cached_last_rows],
    "sinusoidal_positions": [sinusoid_slices, sinusoid_loops, sinusoid_stack],
    "apply_rope": [rope_slices, rope_complex, rope_einsum, rope_loops],
    "score_matrix_bytes": [bytes_plain, bytes_prod, bytes_numpy],
    "tiled_attention": [tiled_online, tiled_two_pass, tiled_rows],
    "leaks_future": [leaks_loop, leaks_max_difference, leaks_every_pair],
    "mask_polarity": [polarity_zeros, polarity_compare_values, polarity_two_rows],
    "is_order_sensitive": [order_roll, order_several, order_roll_and_flip],
    "alibi_slopes": [alibi_formula, alibi_ratio, alibi_loop],
    "online_softmax": [online_arrays, online_floats, online_log_sum_exp],
    "exclusion_effects": [exclusion_delete, exclusion_minus_inf, exclusion_project_values_first],
    "alibi_weights": [alibi_w_where, alibi_w_loops, alibi_w_key_form],
    "changed_predictions": [changed_masks, changed_loops, changed_slices],
    "heads_by_slices": [learner.heads_loop, learner.heads_reshape, learner.heads_project_per_head],
    "saturated_share": [learner.saturated_vectorised, learner.saturated_loop, learner.saturated_from_gap],
    "t5_bucket": [learner.t5_vectorised, learner.t5_loop, learner.t5_floor_float],
}

# (exercise, diagnosis name, wrong answer)
WRONG = [
    ("q1_context", "q1_larger_value_wins", 6.0),
    ("mask_polarity", "polarity_from_empty_rows", learner.polarity_all_zero_row),
    ("mask_polarity", "polarity_from_empty_rows", learner.polarity_two_empty_rows),
    ("cached_causal_mask", "cache_causal_part_missing", learner.cached_padding_only),
    ("cached_causal_mask", "cache_padding_off_by_one", learner.cached_first_real_blocked),
    ("cached_causal_mask", "cache_positions_unpadded", learner.cached_positions_per_sequence),
    ("exclusion_effects", "closed_form_at_full_weight", exclusion_formula),
    ("exclusion_effects", "excluded_output_returned", learner.exclusion_without_subtracting),
    ("alibi_weights", "alibi_own_key_excluded", learner.alibi_strictly_before),
    ("alibi_weights", "alibi_after_softmax", learner.alibi_weights_times_bias),
    ("alibi_weights", "alibi_scores_not_weights", learner.alibi_returns_scores),
    ("changed_predictions", "compared_with_targets", learner.changed_right_or_wrong),
    ("changed_predictions", "count_not_fraction", learner.changed_count),
    ("heads_by_slices", "heads_not_split", learner.heads_one_big_head),
    ("heads_by_slices", "heads_split_strided", learner.heads_reshape_wrong_order),
    ("heads_by_slices", "heads_scaled_by_width", learner.heads_scale_d_model),
    ("heads_by_slices", "heads_unscaled", learner.heads_unscaled),
    ("heads_by_slices", "output_projection_missing", learner.heads_no_w_o),
    ("saturated_share", "saturation_unscaled", learner.saturated_unscaled),
    ("saturated_share", "saturation_over_queries", learner.saturated_over_queries),
    ("saturated_share", "saturation_count", learner.saturated_count),
    ("saturated_share", "saturation_strict_threshold", learner.saturated_strict),
    ("t5_bucket", "bucket_offset_sign", learner.t5_lesson_offset),
    ("t5_bucket", "bucket_halved", learner.t5_bidirectional_half),
    ("t5_bucket", "bucket_log_rounded", learner.t5_rounded),
    ("t5_bucket", "bucket_not_clipped", learner.t5_unclipped),
    ("t5_bucket", "bucket_log_range", learner.t5_log_of_max),
    ("scaled_dot_product_attention", "missing_scale", sdpa_missing_scale),
    ("scaled_dot_product_attention", "scaled_by_d_k", sdpa_scaled_by_d_k),
    ("scaled_dot_product_attention", "scaled_by_value_width", sdpa_scaled_by_value_width),
    ("scaled_dot_product_attention", "softmax_over_queries", sdpa_softmax_over_queries),
    ("scaled_dot_product_attention", "no_max_subtraction", sdpa_no_max),
    ("scaled_dot_product_attention", "weights_transposed", sdpa_transposed),
    ("q1_context", "q1_weights_not_normalised", 8.0),
    ("q1_context", "q1_weight_not_context", 0.5),
    ("masked_softmax", "zeroed_after_softmax", masked_zeroed_after),
    ("masked_softmax", "renormalised_after_softmax", masked_renormalised_after),
    ("masked_softmax", "scores_times_mask", masked_times_mask),
    ("masked_softmax", "inverted_polarity", masked_inverted),
    ("masked_softmax", "finite_fill_uniform_row", masked_finite_fill),
    ("masked_softmax", "nan_for_empty_row", masked_nan_rows),
    ("masked_softmax", "normalised_over_whole_array", masked_whole_array),
    ("causal_mask", "causal_upper_triangle", causal_upper),
    ("causal_mask", "causal_diagonal_excluded", causal_strict),
    ("causal_mask", "causal_inverted", causal_blocked),
    ("causal_mask", "mask_not_boolean", causal_float),
    ("padding_mask", "padding_on_query_axis", padding_query_axis),
    ("padding_mask", "padding_inverted", padding_inverted),
    ("padding_mask", "padding_off_by_one", padding_off_by_one),
    ("padding_mask", "mask_not_boolean", padding_ints),
    ("cached_causal_mask", "cache_top_left", cached_top_left),
    ("cached_causal_mask", "cache_top_left", cached_first_rows),
    ("cached_causal_mask", "cache_off_by_one", cached_strict),
    ("cached_causal_mask", "cache_off_by_one", cached_sees_next),
    ("cached_causal_mask", "cache_padding_on_right", cached_padding_right),
    ("cached_causal_mask", "cache_padding_ignored", cached_padding_ignored),
    ("cached_causal_mask", "cache_keys_blocked", cached_new_keys_only),
    ("cached_causal_mask", "cache_axes_order", cached_keys_first),
    ("cached_causal_mask", "cache_axes_order", cached_queries_first),
    ("cached_causal_mask", "mask_not_boolean", cached_float),
    ("sinusoidal_positions", "sin_cos_swapped", sinusoid_swapped),
    ("sinusoidal_positions", "halves_concatenated", sinusoid_halves),
    ("sinusoidal_positions", "wrong_frequency_exponent", sinusoid_wrong_exponent),
    ("sinusoidal_positions", "positions_from_one", sinusoid_from_one),
    ("apply_rope", "rope_half_pairing", rope_half),
    ("apply_rope", "rope_wrong_direction", rope_backwards),
    ("apply_rope", "rope_wrong_frequency", rope_wrong_frequency),
    ("apply_rope", "rope_positions_from_one", rope_from_one),
    ("score_matrix_bytes", "bytes_off_by_dtype", bytes_elements),
    ("score_matrix_bytes", "bytes_missing_heads", bytes_no_heads),
    ("score_matrix_bytes", "bytes_missing_batch", bytes_no_batch),
    ("score_matrix_bytes", "bytes_linear_in_length", bytes_linear),
    ("tiled_attention", "online_softmax_not_rescaled", tiled_not_rescaled),
    ("tiled_attention", "last_block_dropped", tiled_drops_last_block),
    ("tiled_attention", "builds_full_score_matrix", tiled_dense),
    ("tiled_attention", "tiled_no_max_subtraction", tiled_no_max),
    ("tiled_attention", "tiled_missing_scale", tiled_unscaled),
    ("tiled_attention", "builds_full_score_matrix", tiled_full_then_blocks),
    ("tiled_attention", "builds_full_score_matrix", tiled_full_float32),
    ("q1_context", "q1_masked_key_included", 8 / 3),
    ("leaks_future", "perturbs_only_last_token", leaks_only_last),
    ("leaks_future", "compares_last_output", leaks_last_output),
    ("leaks_future", "exact_float_equality", leaks_exact),
    ("leaks_future", "input_changed_in_place", leaks_in_place),
    ("leaks_future", "output_rows_as_positions", leaks_rows_as_positions),
    ("mask_polarity", "polarity_from_random_inputs", polarity_random),
    ("mask_polarity", "polarity_read_inverted", polarity_inverted),
    ("mask_polarity", "additive_blocked_alike", polarity_minus_inf),
    ("mask_polarity", "additive_called_attend", polarity_larger_weight),
    ("is_order_sensitive", "permutation_not_undone", order_not_undone),
    ("is_order_sensitive", "order_exact_equality", order_exact),
    ("is_order_sensitive", "sequences_reordered", order_batch_axis),
    ("is_order_sensitive", "reversal_only", order_flip),
    ("alibi_slopes", "alibi_off_by_one_head", alibi_from_zero),
    ("alibi_slopes", "alibi_wrong_base", alibi_base_e),
    ("alibi_slopes", "alibi_sign_confused", alibi_negative),
    ("online_softmax", "online_not_rescaled", online_not_rescaled),
    ("online_softmax", "online_no_running_max", online_no_max),
    ("online_softmax", "online_normalised_per_block", online_per_block),
    ("online_softmax", "online_not_divided", online_not_divided),
    ("exclusion_effects", "effects_are_weights", exclusion_weights),
    ("exclusion_effects", "exclusion_before_projection", exclusion_no_projection),
    ("exclusion_effects", "difference_of_norms", exclusion_norm_difference),
    ("exclusion_effects", "difference_of_norms", exclusion_abs_norm_difference),
    ("exclusion_effects", "exclusion_not_renormalised", exclusion_zero_weight),
    ("exclusion_effects", "exclusion_not_renormalised", exclusion_zero_value),
    ("exclusion_effects", "exclusion_zeroed_key", exclusion_zero_key),
    ("exclusion_effects", "exclusion_missing_scale", exclusion_unscaled),
    ("alibi_weights", "alibi_bias_rewards_distance", alibi_w_sign),
    ("alibi_weights", "alibi_bias_rewards_distance", alibi_w_key_minus_query),
    ("alibi_weights", "alibi_after_softmax", alibi_w_after_softmax),
    ("alibi_weights", "alibi_wrong_head", alibi_w_one_based),
    ("alibi_weights", "alibi_queries_at_start", alibi_w_top_left),
    ("alibi_weights", "alibi_no_causal_mask", alibi_w_unmasked),
    ("alibi_weights", "alibi_bias_per_query", alibi_w_query_form),
    ("changed_predictions", "unscored_counted", changed_unscored_counted),
    ("changed_predictions", "changed_inputs_counted", changed_every_position),
    ("changed_predictions", "own_position_left_out", changed_stops_early),
    ("changed_predictions", "logits_for_predictions", changed_any_logit),
]


# --- cached_attention_step ---------------------------------------------------------------------------


def step_vectorised(query, key, value, cache_keys, cache_values, length):
    n = query.shape[-2]
    end = length + n
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:end, :], values[..., length:end, :] = key, value
    s = query @ np.swapaxes(keys[..., :end, :], -1, -2) / math.sqrt(query.shape[-1])
    s = np.where(np.arange(end) <= length + np.arange(n)[:, None], s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ values[..., :end, :], w, keys, values


def step_query_by_query(query, key, value, cache_keys, cache_values, length):
    """In place into the given buffer, then one new query at a time over the keys it may see."""
    n = query.shape[2]
    cache_keys[:, :, length:length + n] = key
    cache_values[:, :, length:length + n] = value
    out = np.zeros(query.shape)
    weights = np.zeros(query.shape[:3] + (length + n,))
    for r in range(n):
        seen = length + r + 1
        s = np.einsum("bhd,bhkd->bhk", query[:, :, r], cache_keys[:, :, :seen]) / np.sqrt(query.shape[3])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        weights[:, :, r, :seen] = e / e.sum(axis=-1, keepdims=True)
        out[:, :, r] = np.einsum("bhk,bhkd->bhd", weights[:, :, r, :seen], cache_values[:, :, :seen])
    return out, weights, cache_keys, cache_values


def step_large_negative_fill(query, key, value, cache_keys, cache_values, length):
    """A fill of -1e30 (the softmax of a causal row always keeps one key, so it is exact here)."""
    n = query.shape[-2]
    ck = np.concatenate([cache_keys[..., :length, :], key, cache_keys[..., length + n:, :]], axis=-2)
    cv = np.concatenate([cache_values[..., :length, :], value, cache_values[..., length + n:, :]], axis=-2)
    k, v = ck[..., :length + n, :], cv[..., :length + n, :]
    s = np.matmul(query, k.transpose(0, 1, 3, 2)) * query.shape[-1] ** -0.5
    s = s + np.triu(np.full((n, length + n), -1e30), k=length + 1)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    return np.matmul(w, v), w, ck, cv


def step_written_late(query, key, value, cache_keys, cache_values, length):
    n = query.shape[-2]
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length + 1:length + 1 + n, :], values[..., length + 1:length + 1 + n, :] = key, value
    end = length + 1 + n
    s = query @ np.swapaxes(keys[..., :end, :], -1, -2) / math.sqrt(query.shape[-1])
    s = np.where(np.arange(end) <= length + 1 + np.arange(n)[:, None], s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ values[..., :end, :], w, keys, values


def step_one_key_ahead(query, key, value, cache_keys, cache_values, length):
    n = query.shape[-2]
    end = length + n
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:end, :], values[..., length:end, :] = key, value
    s = query @ np.swapaxes(keys[..., :end, :], -1, -2) / math.sqrt(query.shape[-1])
    s = np.where(np.arange(end) <= length + 1 + np.arange(n)[:, None], s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ values[..., :end, :], w, keys, values


def step_whole_buffer_unmasked(query, key, value, cache_keys, cache_values, length):
    n = query.shape[-2]
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:length + n, :], values[..., length:length + n, :] = key, value
    s = query @ np.swapaxes(keys, -1, -2) / math.sqrt(query.shape[-1])
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ values, w, keys, values


CORRECT["cached_attention_step"] = [step_vectorised, step_query_by_query, step_large_negative_fill]
WRONG += [
    ("cached_attention_step", "cache_position_off_by_one", step_written_late),
    ("cached_attention_step", "cache_position_off_by_one", learner.step_one_based),
    ("cached_attention_step", "stale_key", learner.step_scores_first),
    ("cached_attention_step", "stale_key", learner.step_only_the_past),
    ("cached_attention_step", "cache_mask_off_by_one", step_one_key_ahead),
    ("cached_attention_step", "cache_mask_off_by_one", learner.step_tril_shifted),
    ("cached_attention_step", "cache_mask_top_left", learner.step_plain_tril),
    ("cached_attention_step", "whole_cache_scored", learner.step_mask_the_buffer),
    ("cached_attention_step", "whole_cache_scored", step_whole_buffer_unmasked),
]

# The diagnoses that name the slips of learner_answers.KIND_WRONG, each with one answer that carries it.
WRONG += [
    ("masked_softmax", "normalised_over_wrong_axis", learner.masked_axis_zero),
    ("apply_rope", "rope_output_in_halves", learner.rope_split_joined_in_halves),
    ("is_order_sensitive", "order_tolerance_too_loose", learner.order_loose_tolerance),
    ("alibi_weights", "alibi_over_queries", learner.alibi_softmax_over_queries),
    ("leaks_future", "perturbations_accumulate", learner.leaks_copy_that_is_not),
    ("leaks_future", "leak_tolerance_too_loose", learner.leaks_loose_tolerance),
    ("heads_by_slices", "heads_softmax_over_queries", learner.heads_softmax_axis_one),
    ("online_softmax", "online_last_block_skipped", learner.online_last_block_skipped),
    ("exclusion_effects", "exclusions_accumulate", learner.exclusion_scores_not_copied),
    ("changed_predictions", "target_zero_skipped", learner.changed_targets_above_zero),
    ("cached_attention_step", "step_softmax_over_queries", learner.step_softmax_over_new_queries),
]
