"""Answers for the exercise tests: correct ones in several styles, and deliberately wrong ones.

Each wrong answer carries exactly one misconception; the tests assert that ``check`` names it.
"""

from __future__ import annotations

import math

import numpy as np

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


CORRECT = {
    "scaled_dot_product_attention": [sdpa_matmul, sdpa_einsum, sdpa_loops, sdpa_global_shift],
    "q1_context": [4, 4.0, np.float64(4.0), 0.5 * 2 + 0.5 * 6],
    "masked_softmax": [masked_where, masked_additive, masked_loops, masked_exp_times_mask],
    "causal_mask": [causal_tril, causal_compare, causal_loops, causal_not_triu],
    "padding_mask": [padding_compare, padding_loops, padding_fill],
    "sinusoidal_positions": [sinusoid_slices, sinusoid_loops, sinusoid_stack],
    "apply_rope": [rope_slices, rope_complex, rope_einsum, rope_loops],
    "score_matrix_bytes": [bytes_plain, bytes_prod, bytes_numpy],
    "tiled_attention": [tiled_online, tiled_two_pass, tiled_rows],
}

# (exercise, diagnosis name, wrong answer)
WRONG = [
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
    ("causal_mask", "causal_upper_triangle", causal_upper),
    ("causal_mask", "causal_diagonal_excluded", causal_strict),
    ("causal_mask", "causal_inverted", causal_blocked),
    ("causal_mask", "mask_not_boolean", causal_float),
    ("padding_mask", "padding_on_query_axis", padding_query_axis),
    ("padding_mask", "padding_inverted", padding_inverted),
    ("padding_mask", "padding_off_by_one", padding_off_by_one),
    ("padding_mask", "mask_not_boolean", padding_ints),
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
]
