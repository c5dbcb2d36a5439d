"""Wrong answers written from each exercise's prompt alone, as a learner would write them.

They are not the checker's models: each is what someone who read only the prompt plausibly
writes, in their own style. ``LEARNER_WRONG`` pairs each with the diagnoses it must get: the
name of its mistake, or nothing ("no known misconception") when no diagnosis fits it.
"""

from __future__ import annotations

import math

import numpy as np

# --- scaled_dot_product_attention ------------------------------------------------------------------


def sdpa_axis_one(query, key, value):
    """Softmax along axis=1, right for one (L, S) matrix, the query axis once a batch axis comes first."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(key.shape[-1])
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return w @ value, w


def sdpa_scale_by_length(query, key, value):
    """Divided by the square root of the number of keys."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(key.shape[-2])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ value, w


def sdpa_order_swapped(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(key.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w, w @ value  # (weights, output)


def sdpa_plain_exp(query, key, value):
    """No shift before exp."""
    w = np.exp(np.matmul(query, np.swapaxes(key, -1, -2)) / key.shape[-1] ** 0.5)
    w = w / np.sum(w, axis=-1, keepdims=True)
    return np.matmul(w, value), w


# --- masked_softmax --------------------------------------------------------------------------------


def masked_big_negative(scores, allowed):
    s = np.where(allowed, scores, -1e4)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def masked_where_swapped(scores, allowed):
    s = np.where(allowed, -np.inf, scores)  # the arguments of np.where in the wrong order
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_multiply_probabilities(scores, allowed):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return p * allowed


def masked_nan_left(scores, allowed):
    s = np.where(allowed, scores, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def masked_one_row_softmax(scores, allowed):
    """The lesson's one-row code, -inf added and then a softmax, run on the whole array at once."""
    excluded = scores + np.where(allowed, 0.0, -np.inf)
    e = np.exp(excluded - excluded.max())
    return e / e.sum()


def masked_row_max_total_sum(scores, allowed):
    """The maximum taken per row, but the sum over every element."""
    s = np.where(allowed, scores, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m[np.isinf(m)] = 0.0
    e = np.exp(s - m)
    return e / np.sum(e)


# --- causal_mask -----------------------------------------------------------------------------------


def causal_sees_next(length):
    return np.tril(np.ones((length, length)), k=1).astype(bool)


def causal_upper_compare(length):
    i = np.arange(length)
    return i[:, None] <= i[None, :]  # key j allowed when j >= i


def causal_strict_compare(length):
    i = np.arange(length)
    return i[None, :] < i[:, None]


def causal_identity(length):
    return np.eye(length, dtype=bool)


# --- padding_mask ----------------------------------------------------------------------------------


def padding_left_aligned(lengths, max_length):
    """The real tokens taken to be the last ones (left padding)."""
    return np.arange(max_length)[None, :] >= max_length - np.asarray(lengths)[:, None]


def padding_lists_of_ints(lengths, max_length):
    return np.array([[1] * n + [0] * (max_length - n) for n in lengths])


def padding_marks_pads(lengths, max_length):
    mask = np.zeros((len(lengths), max_length), dtype=bool)
    for b, n in enumerate(lengths):
        mask[b, n:] = True
    return mask


# --- cached_causal_mask ----------------------------------------------------------------------------


def cached_first_real_blocked(lengths, n_queries):
    lengths = np.asarray(lengths)
    s = lengths.max()
    keys = np.arange(s)
    real = keys[None, :] > s - lengths[:, None]  # > where >= is meant
    causal = keys[None, :] <= (s - n_queries + np.arange(n_queries))[:, None]
    return real[:, None, :] & causal[None]


def cached_positions_per_sequence(lengths, n_queries):
    """Each query at its position in its own sequence, lengths[b] - n_queries + i."""
    s = int(max(lengths))
    out = np.zeros((len(lengths), n_queries, s), dtype=bool)
    for b, n in enumerate(lengths):
        for i in range(n_queries):
            pos = n - n_queries + i
            for j in range(s):
                out[b, i, j] = j >= s - n and j <= pos
    return out


def cached_padding_only(lengths, n_queries):
    s = int(np.max(lengths))
    real = np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None]  # (B, S)
    return np.repeat(real[:, None, :], n_queries, axis=1)


def cached_square_tail_no_padding(lengths, n_queries):
    s = int(np.max(lengths))
    rows = np.tril(np.ones((s, s), dtype=bool))[-n_queries:]
    return np.stack([rows] * len(lengths))


# --- sinusoidal_positions --------------------------------------------------------------------------


def sinusoid_per_dimension_frequency(n_positions, d_model):
    """Each dimension j gets its own frequency 10000^(-j/d): the cosines one step off."""
    j = np.arange(d_model)
    angle = np.arange(n_positions)[:, None] / 10000 ** (j / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def sinusoid_sine_only(n_positions, d_model):
    angle = np.arange(n_positions)[:, None] / 10000 ** (2 * (np.arange(d_model) // 2) / d_model)
    return np.sin(angle)


def sinusoid_cos_first(n_positions, d_model):
    pe = np.zeros((n_positions, d_model))
    for p in range(n_positions):
        for i in range(0, d_model, 2):
            pe[p, i] = math.cos(p / 10000 ** (i / d_model))
            pe[p, i + 1] = math.sin(p / 10000 ** (i / d_model))
    return pe


# --- apply_rope ------------------------------------------------------------------------------------


def rope_clockwise(x, positions):
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    even, odd = x[..., ::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., ::2] = even * np.cos(theta) + odd * np.sin(theta)
    out[..., 1::2] = -even * np.sin(theta) + odd * np.cos(theta)
    return out


def rope_rotate_half(x, positions):
    """The rotate_half form of the Llama code: pairs (i, i + d/2)."""
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    cos, sin = np.concatenate([np.cos(theta)] * 2, -1), np.concatenate([np.sin(theta)] * 2, -1)
    rotated = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)
    return x * cos + rotated * sin


def rope_no_frequencies(x, positions):
    theta = np.asarray(positions, dtype=float)[:, None] * np.ones(x.shape[-1] // 2)
    even, odd = x[..., ::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., ::2] = even * np.cos(theta) - odd * np.sin(theta)
    out[..., 1::2] = even * np.sin(theta) + odd * np.cos(theta)
    return out


# --- score_matrix_bytes ----------------------------------------------------------------------------


def bytes_true_division(batch, heads, length, bytes_per_element):
    return batch * heads * length**2 * bytes_per_element / 1


def bytes_without_dtype(batch, heads, length, bytes_per_element):
    return batch * heads * length**2


def bytes_in_bits(batch, heads, length, bytes_per_element):
    return batch * heads * length**2 * bytes_per_element * 8


def bytes_one_head(batch, heads, length, bytes_per_element):
    return int(batch * length * length * bytes_per_element)


# --- tiled_attention -------------------------------------------------------------------------------


def _tiled(query, key, value, block_size, *, stop=None, scale=None, rescale=True):
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    n_k = key.shape[-2]
    stop = n_k if stop is None else stop
    m = np.full(query.shape[:-1], -np.inf)
    denom = np.zeros(query.shape[:-1])
    acc = np.zeros(query.shape[:-1] + (value.shape[-1],))
    for k0 in range(0, stop, block_size):
        s = query @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(-1))
        p = np.exp(s - m_new[..., None])
        c = np.exp(m - m_new) if rescale else 1.0
        denom = denom * c + p.sum(-1)
        acc = acc * (c[..., None] if rescale else 1.0) + p @ value[..., k0:k0 + block_size, :]
        m = m_new
    return acc / denom[..., None]


def tiled_whole_blocks_only(query, key, value, block_size):
    """range(0, S - block_size + 1, block_size): the last, shorter block never read."""
    n_k = key.shape[-2]
    return _tiled(query, key, value, block_size, stop=max(n_k - block_size + 1, 1))


def tiled_sums_not_rescaled(query, key, value, block_size):
    return _tiled(query, key, value, block_size, rescale=False)


def tiled_no_scale(query, key, value, block_size):
    return _tiled(query, key, value, block_size, scale=1.0)


# --- leaks_future ----------------------------------------------------------------------------------


def leaks_all_equal(layer, length, n_queries, d_model):
    x = np.random.default_rng(1).standard_normal((length, d_model))
    out = layer(x)
    start = length - n_queries
    for t in range(length):
        x2 = x.copy()
        x2[t] = x2[t] * 2 + 1
        out2 = layer(x2)
        earlier = [r for r in range(n_queries) if start + r < t]
        if earlier and not (out2[earlier] == out[earlier]).all():
            return True
    return False


def leaks_whole_output(layer, length, n_queries, d_model):
    """Any change of the output after a change of the input at t > 0."""
    x = np.random.default_rng(1).standard_normal((length, d_model))
    out = layer(x)
    for t in range(1, length):
        x2 = x.copy()
        x2[t] += 1
        if not np.allclose(layer(x2), out):
            return True
    return False


def leaks_rows_from_zero(layer, length, n_queries, d_model):
    x = np.random.default_rng(2).standard_normal((length, d_model))
    out = layer(x)
    for t in range(length):
        x2 = x.copy()
        x2[t] = 0.0
        if t > 0 and np.abs(layer(x2)[:t] - out[:t]).max() > 1e-9:
            return True
    return False


def leaks_first_position_only(layer, length, n_queries, d_model):
    """Changes position 0 only: nothing is before it, so no leak is ever found."""
    x = np.random.default_rng(1).standard_normal((length, d_model))
    x2 = x.copy()
    x2[0] += 1
    first = length - n_queries
    return not np.allclose(layer(x2)[:max(0 - first, 0)], layer(x)[:max(0 - first, 0)])


# --- mask_polarity ---------------------------------------------------------------------------------


def polarity_all_zero_row(attention_fn):
    """A row of zeros: NaN or zeros back means zero blocks every key, so nonzero attends."""
    out = attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.array([[[1.0], [3.0]]]), np.zeros((1, 2)))
    out = np.asarray(out, dtype=float)
    if np.isnan(out).any() or np.all(out == 0):
        return "attend"
    return "blocked"


def polarity_all_one_row(attention_fn):
    out = np.asarray(attention_fn(np.ones((1, 1, 4)), np.ones((1, 3, 4)), np.ones((1, 3, 2)), np.ones((1, 3))),
                     dtype=float)
    if np.isnan(out).any() or np.abs(out).max() < 1e-6:
        return "blocked"
    return "attend"


def polarity_two_empty_rows(attention_fn):
    """Zeros, then ones: whichever row comes back empty says what the number means."""
    def empty(number):
        out = np.asarray(attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None],
                                      np.full((1, 2), number)), dtype=float)
        return bool(np.isnan(out).any() or np.allclose(out, 0))
    if empty(0.0):
        return "attend"
    if empty(1.0):
        return "blocked"
    return "additive"


def polarity_boolean_only(attention_fn):
    """Never considers an additive mask."""
    w = np.asarray(attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.eye(2)[None], np.array([[0.0, 1.0]])),
                   dtype=float)[0, 0]
    return "attend" if w[1] > w[0] else "blocked"


# --- is_order_sensitive ----------------------------------------------------------------------------


def order_permuted_twice(layer, x):
    """The permutation applied to the output again instead of undone (its inverse is argsort(perm))."""
    perm = np.array([1, 2, 0] + list(range(3, x.shape[1]))) if x.shape[1] >= 3 else np.arange(x.shape[1])[::-1]
    return not np.allclose(layer(x[:, perm])[:, perm], layer(x))


def order_not_undone_flip(layer, x):
    return not np.allclose(layer(x[:, ::-1]), layer(x))


def order_dog_bites_man(layer, x):
    """The lesson's pair, "dog bites man" against "man bites dog": the tokens reversed, and back."""
    out = layer(x)
    reversed_back = layer(x[:, ::-1])[:, ::-1]
    return bool(np.abs(out - reversed_back).max() > 1e-6)


def order_array_equal(layer, x):
    perm = np.random.default_rng(0).permutation(x.shape[1])
    return not np.array_equal(layer(x[:, perm]), layer(x)[:, perm])


# --- alibi_slopes ----------------------------------------------------------------------------------


def alibi_start_at_one(n_heads):
    return np.array([2 ** (-8 * h / n_heads) for h in range(n_heads)])


def alibi_half_base(n_heads):
    return 0.5 ** (np.arange(1, n_heads + 1) * 8 / n_heads) * -1


def alibi_eight_over(n_heads):
    return 2.0 ** (-np.arange(1, n_heads + 1) / n_heads)


# --- online_softmax --------------------------------------------------------------------------------


def online_running_max_no_rescale(scores, values, block_size):
    m, total, acc = -np.inf, 0.0, 0.0
    for start in range(0, len(scores), block_size):
        block = scores[start:start + block_size]
        m = max(m, block.max())
        e = np.exp(block - m)
        total += e.sum()
        acc = acc + e @ values[start:start + block_size]
    return acc / total


def online_average_of_blocks(scores, values, block_size):
    results = []
    for start in range(0, len(scores), block_size):
        block = scores[start:start + block_size]
        e = np.exp(block - block.max())
        results.append((e / e.sum()) @ values[start:start + block_size])
    return sum(results) / len(results)


def online_forgot_division(scores, values, block_size):
    m, total, acc = -np.inf, 0.0, np.zeros(values.shape[1])
    for start in range(0, len(scores), block_size):
        block = scores[start:start + block_size]
        new_m = max(m, block.max())
        acc = acc * np.exp(m - new_m) + np.exp(block - new_m) @ values[start:start + block_size]
        total = total * np.exp(m - new_m) + np.exp(block - new_m).sum()
        m = new_m
    return acc


# --- exclusion_effects -----------------------------------------------------------------------------


def _attend_one(query, keys, values):
    s = keys @ query / math.sqrt(query.shape[0])
    w = np.exp(s - s.max())
    return (w / w.sum()) @ values


def exclusion_without_subtracting(query, keys, values, w_o):
    """The length of the output without key j, the full output never subtracted."""
    effects = []
    for j in range(len(keys)):
        keep = [i for i in range(len(keys)) if i != j]
        effects.append(np.linalg.norm(_attend_one(query, keys[keep], values[keep]) @ w_o))
    return np.array(effects)


def exclusion_no_w_o(query, keys, values, w_o):
    full = _attend_one(query, keys, values)
    return np.array([np.linalg.norm(_attend_one(query, np.delete(keys, j, 0), np.delete(values, j, 0)) - full)
                     for j in range(len(keys))])


def exclusion_weight_times_value(query, keys, values, w_o):
    s = keys @ query / math.sqrt(query.shape[0])
    w = np.exp(s - s.max())
    w /= w.sum()
    return np.array([np.linalg.norm(w[j] * values[j] @ w_o) for j in range(len(keys))])


def exclusion_notebook_formula(query, keys, values, w_o):
    """The lesson's closed form, every key at once: w / (1 - w) (o - v_j), then through W_o."""
    s = keys @ query / np.sqrt(len(query))
    w = np.exp(s - s.max())
    w /= w.sum()
    o = w @ values
    moves = (w / (1 - w))[:, None] * (o[None, :] - values)
    return np.linalg.norm(moves @ w_o, axis=1)


def exclusion_squared(query, keys, values, w_o):
    full = _attend_one(query, keys, values) @ w_o
    return np.array([np.sum((_attend_one(query, np.delete(keys, j, 0), np.delete(values, j, 0)) @ w_o - full) ** 2)
                     for j in range(len(keys))])


# --- alibi_weights ---------------------------------------------------------------------------------


def _alibi_parts(scores, head, n_heads):
    n_q, n_k = scores.shape
    i = np.arange(n_k - n_q, n_k)[:, None]
    j = np.arange(n_k)[None, :]
    return i, j, 2.0 ** (-8.0 * (head + 1) / n_heads)


def alibi_strictly_before(scores, head, n_heads):
    i, j, m = _alibi_parts(scores, head, n_heads)
    s = np.where(j < i, scores - m * (i - j), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.nan_to_num(e / e.sum(axis=-1, keepdims=True))


def alibi_weights_times_bias(scores, head, n_heads):
    i, j, m = _alibi_parts(scores, head, n_heads)
    s = np.where(j <= i, scores, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return w * np.exp(-m * np.maximum(i - j, 0))


def alibi_returns_scores(scores, head, n_heads):
    i, j, m = _alibi_parts(scores, head, n_heads)
    return np.where(j <= i, scores - m * (i - j), -np.inf)


def alibi_square_mask(scores, head, n_heads):
    i, j, m = _alibi_parts(scores, head, n_heads)
    rows = np.arange(scores.shape[0])[:, None]
    s = np.where(j <= rows, scores - m * (i - j), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- changed_predictions ---------------------------------------------------------------------------


def changed_right_or_wrong(logits, logits_changed, targets, last_kept):
    right_before = logits.argmax(-1) == targets
    right_after = logits_changed.argmax(-1) == targets
    n = m = 0
    for b in range(targets.shape[0]):
        for i in range(last_kept + 1):
            if targets[b, i] >= 0:
                n += 1
                m += right_before[b, i] != right_after[b, i]
    return m / n


def changed_accuracy_drop(logits, logits_changed, targets, last_kept):
    scored = targets[:, : last_kept + 1] >= 0
    acc = (logits[:, : last_kept + 1].argmax(-1) == targets[:, : last_kept + 1])[scored].mean()
    acc2 = (logits_changed[:, : last_kept + 1].argmax(-1) == targets[:, : last_kept + 1])[scored].mean()
    return float(abs(acc - acc2))


def changed_count(logits, logits_changed, targets, last_kept):
    before = logits[:, : last_kept + 1].argmax(-1)
    after = logits_changed[:, : last_kept + 1].argmax(-1)
    return int(np.sum((before != after) & (targets[:, : last_kept + 1] != -1)))


def changed_slice_short_unscored(logits, logits_changed, targets, last_kept):
    """Two slips at once: the slice stops before last_kept, and unscored positions count."""
    return float(np.mean(logits[:, :last_kept].argmax(-1) != logits_changed[:, :last_kept].argmax(-1)))


# (exercise, the diagnoses it must get: a set of names, empty for "no known misconception", answer)
LEARNER_WRONG = [
    ("scaled_dot_product_attention", {"softmax_over_queries"}, sdpa_axis_one),
    ("scaled_dot_product_attention", set(), sdpa_scale_by_length),
    ("scaled_dot_product_attention", set(), sdpa_order_swapped),
    ("scaled_dot_product_attention", {"no_max_subtraction"}, sdpa_plain_exp),
    ("q1_context", {"q1_larger_value_wins"}, 6),
    ("q1_context", {"q1_larger_value_wins"}, 6.0),
    ("q1_context", set(), 2.0),
    ("q1_context", set(), 3.0),
    ("masked_softmax", {"finite_fill_uniform_row"}, masked_big_negative),
    ("masked_softmax", {"inverted_polarity"}, masked_where_swapped),
    ("masked_softmax", {"zeroed_after_softmax"}, masked_multiply_probabilities),
    ("masked_softmax", {"nan_for_empty_row"}, masked_nan_left),
    ("masked_softmax", {"normalised_over_whole_array"}, masked_one_row_softmax),
    ("masked_softmax", {"normalised_over_whole_array"}, masked_row_max_total_sum),
    ("causal_mask", set(), causal_sees_next),
    ("causal_mask", {"causal_upper_triangle"}, causal_upper_compare),
    ("causal_mask", {"causal_diagonal_excluded"}, causal_strict_compare),
    ("causal_mask", set(), causal_identity),
    ("padding_mask", set(), padding_left_aligned),
    ("padding_mask", {"mask_not_boolean"}, padding_lists_of_ints),
    ("padding_mask", {"padding_inverted"}, padding_marks_pads),
    ("cached_causal_mask", {"cache_padding_off_by_one"}, cached_first_real_blocked),
    ("cached_causal_mask", {"cache_positions_unpadded"}, cached_positions_per_sequence),
    ("cached_causal_mask", {"cache_causal_part_missing"}, cached_padding_only),
    ("cached_causal_mask", {"cache_padding_ignored"}, cached_square_tail_no_padding),
    ("sinusoidal_positions", {"wrong_frequency_exponent"}, sinusoid_per_dimension_frequency),
    ("sinusoidal_positions", set(), sinusoid_sine_only),
    ("sinusoidal_positions", {"sin_cos_swapped"}, sinusoid_cos_first),
    ("apply_rope", {"rope_wrong_direction"}, rope_clockwise),
    ("apply_rope", {"rope_half_pairing"}, rope_rotate_half),
    ("apply_rope", set(), rope_no_frequencies),
    ("score_matrix_bytes", set(), bytes_true_division),
    ("score_matrix_bytes", {"bytes_off_by_dtype"}, bytes_without_dtype),
    ("score_matrix_bytes", {"bytes_off_by_dtype"}, bytes_in_bits),
    ("score_matrix_bytes", {"bytes_missing_heads"}, bytes_one_head),
    ("tiled_attention", {"last_block_dropped"}, tiled_whole_blocks_only),
    ("tiled_attention", {"online_softmax_not_rescaled"}, tiled_sums_not_rescaled),
    ("tiled_attention", {"tiled_missing_scale"}, tiled_no_scale),
    ("leaks_future", {"exact_float_equality"}, leaks_all_equal),
    ("leaks_future", {"compares_last_output"}, leaks_whole_output),
    ("leaks_future", {"output_rows_as_positions"}, leaks_rows_from_zero),
    ("leaks_future", {"input_changed_in_place"}, leaks_first_position_only),
    ("mask_polarity", {"polarity_from_empty_rows"}, polarity_all_zero_row),
    ("mask_polarity", {"polarity_from_empty_rows"}, polarity_all_one_row),
    ("mask_polarity", {"polarity_from_empty_rows"}, polarity_two_empty_rows),
    ("mask_polarity", {"additive_called_attend"}, polarity_boolean_only),
    ("is_order_sensitive", {"permutation_not_undone"}, order_permuted_twice),
    ("is_order_sensitive", {"permutation_not_undone"}, order_not_undone_flip),
    ("is_order_sensitive", {"order_exact_equality"}, order_array_equal),
    ("is_order_sensitive", {"reversal_only"}, order_dog_bites_man),
    ("alibi_slopes", {"alibi_off_by_one_head"}, alibi_start_at_one),
    ("alibi_slopes", {"alibi_sign_confused"}, alibi_half_base),
    ("alibi_slopes", {"alibi_wrong_base"}, alibi_eight_over),
    ("online_softmax", {"online_not_rescaled"}, online_running_max_no_rescale),
    ("online_softmax", {"online_normalised_per_block"}, online_average_of_blocks),
    ("online_softmax", {"online_not_divided"}, online_forgot_division),
    ("exclusion_effects", {"closed_form_at_full_weight"}, exclusion_notebook_formula),
    ("exclusion_effects", {"excluded_output_returned"}, exclusion_without_subtracting),
    ("exclusion_effects", {"exclusion_before_projection"}, exclusion_no_w_o),
    ("exclusion_effects", {"exclusion_not_renormalised"}, exclusion_weight_times_value),
    ("exclusion_effects", set(), exclusion_squared),
    ("alibi_weights", {"alibi_own_key_excluded"}, alibi_strictly_before),
    ("alibi_weights", {"alibi_after_softmax"}, alibi_weights_times_bias),
    ("alibi_weights", {"alibi_scores_not_weights"}, alibi_returns_scores),
    ("alibi_weights", {"alibi_queries_at_start"}, alibi_square_mask),
    ("changed_predictions", {"compared_with_targets"}, changed_right_or_wrong),
    ("changed_predictions", {"compared_with_targets"}, changed_accuracy_drop),
    ("changed_predictions", {"count_not_fraction"}, changed_count),
    ("changed_predictions", set(), changed_slice_short_unscored),
]


# --- heads_by_slices (new) -------------------------------------------------------------------------


def heads_loop(x, w_q, w_k, w_v, w_o, n_heads):
    d_head = w_q.shape[1] // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = q @ k.T / math.sqrt(d_head)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        heads.append((w / w.sum(axis=1, keepdims=True)) @ v)
    return np.concatenate(heads, axis=1) @ w_o


def heads_reshape(x, w_q, w_k, w_v, w_o, n_heads):
    n = x.shape[0]

    def split(m):
        return (x @ m).reshape(n, n_heads, -1).transpose(1, 0, 2)  # (H, n, d_head)

    q, k, v = split(w_q), split(w_k), split(w_v)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return (w @ v).transpose(1, 0, 2).reshape(n, -1) @ w_o


def heads_project_per_head(x, w_q, w_k, w_v, w_o, n_heads):
    """Each head's output times its own rows of W_o, summed: the same as concatenating first."""
    d_head = w_q.shape[1] // n_heads
    out = 0.0
    for h in range(n_heads):
        c = slice(h * d_head, (h + 1) * d_head)
        s = np.einsum("id,jd->ij", x @ w_q[:, c], x @ w_k[:, c]) / d_head ** 0.5
        w = np.exp(s - s.max(-1, keepdims=True))
        out = out + (w / w.sum(-1, keepdims=True)) @ (x @ w_v[:, c]) @ w_o[c]
    return out


def heads_one_big_head(x, w_q, w_k, w_v, w_o, n_heads):
    s = (x @ w_q) @ (x @ w_k).T / math.sqrt(w_q.shape[1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ (x @ w_v) @ w_o


def heads_reshape_wrong_order(x, w_q, w_k, w_v, w_o, n_heads):
    """reshape(n, d_head, H): each head gets every H-th column."""
    n = x.shape[0]

    def split(m):
        return (x @ m).reshape(n, -1, n_heads).transpose(2, 0, 1)  # (H, n, d_head)

    q, k, v = split(w_q), split(w_k), split(w_v)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return (w @ v).transpose(1, 2, 0).reshape(n, -1) @ w_o


def heads_scale_d_model(x, w_q, w_k, w_v, w_o, n_heads):
    d_head = w_q.shape[1] // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        s = (x @ w_q[:, cols]) @ (x @ w_k[:, cols]).T / math.sqrt(w_q.shape[1])
        w = np.exp(s - s.max(axis=1, keepdims=True))
        heads.append((w / w.sum(axis=1, keepdims=True)) @ (x @ w_v[:, cols]))
    return np.concatenate(heads, axis=1) @ w_o


def heads_no_w_o(x, w_q, w_k, w_v, w_o, n_heads):
    return heads_reshape(x, w_q, w_k, w_v, np.eye(w_q.shape[1]), n_heads)


def heads_averaged(x, w_q, w_k, w_v, w_o, n_heads):
    """The heads' weights averaged into one map, then applied to all of V."""
    d_head = w_q.shape[1] // n_heads
    maps = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        s = (x @ w_q[:, cols]) @ (x @ w_k[:, cols]).T / math.sqrt(d_head)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        maps.append(w / w.sum(axis=1, keepdims=True))
    return np.mean(maps, axis=0) @ (x @ w_v) @ w_o


# --- saturated_share: the share of queries the scaling rescues -------------------------------------


def _largest(scores):
    w = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)).max(axis=1)


def saturated_vectorised(query, key, threshold):
    raw = query @ key.T
    return float(np.mean((_largest(raw) >= threshold) & (_largest(raw / np.sqrt(key.shape[1])) < threshold)))


def saturated_loop(query, key, threshold):
    rescued = 0
    for q in query:
        for scale, want in ((1.0, True), (1.0 / math.sqrt(len(q)), False)):
            s = [float(q @ k) * scale for k in key]
            e = [math.exp(x - max(s)) for x in s]
            if (max(e) / sum(e) >= threshold) != want:
                break
        else:
            rescued += 1
    return rescued / len(query)


def saturated_from_gap(query, key, threshold):
    """Largest weight = 1 / sum exp(s_j - s_max), computed from the gaps to the top score."""
    raw = query @ key.T

    def top(s):
        return 1.0 / np.exp(s - s.max(-1, keepdims=True)).sum(-1)

    rescued = (top(raw) >= threshold) & ~(top(raw / math.sqrt(key.shape[-1])) >= threshold)
    return np.count_nonzero(rescued) / len(rescued)


def saturated_unscaled(query, key, threshold):
    """Every query saturated without the scaling, rescued or not."""
    return float((_largest(query @ key.T) >= threshold).mean())


def saturated_count(query, key, threshold):
    raw = query @ key.T
    return int(((_largest(raw) >= threshold) & (_largest(raw / np.sqrt(key.shape[1])) < threshold)).sum())


def saturated_all_weights(query, key, threshold):
    """The share of all raw weights at or above the threshold, not of queries."""
    s = query @ key.T
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return float((w >= threshold).mean())


def saturated_entropy(query, key, threshold):
    """Low entropy taken for saturation: the share of rows with entropy below 1 - threshold, raw."""
    s = query @ key.T
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    h = -(w * np.log(np.maximum(w, 1e-300))).sum(axis=1)
    return float((h <= 1 - threshold).mean())


# --- t5_bucket (new) -------------------------------------------------------------------------------


def t5_vectorised(distance, n_buckets, max_distance):
    d = np.asarray(distance)
    exact = n_buckets // 2
    log = exact + (np.log(np.maximum(d, 1) / exact) / math.log(max_distance / exact) * (n_buckets - exact)).astype(int)
    return np.where(d < exact, d, np.minimum(log, n_buckets - 1))


def t5_loop(distance, n_buckets, max_distance):
    d = np.asarray(distance)
    out = np.zeros(d.shape, dtype=int)
    exact = n_buckets // 2
    for idx in np.ndindex(*d.shape):
        n = int(d[idx])
        if n < exact:
            out[idx] = n
        else:
            b = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (n_buckets - exact))
            out[idx] = min(b, n_buckets - 1)
    return out


def t5_floor_float(distance, n_buckets, max_distance):
    """np.floor without a cast: the right buckets as floats."""
    d = np.asarray(distance, dtype=float)
    half = n_buckets // 2
    with np.errstate(divide="ignore"):
        log = half + np.floor(np.log(d / half) / np.log(max_distance / half) * (n_buckets - half))
    return np.where(d < half, d, np.clip(log, None, n_buckets - 1))


def t5_lesson_offset(distance, n_buckets, max_distance):
    """The lesson's offset convention, key - query, applied to a distance that is query - key."""
    d = np.maximum(-np.asarray(distance), 0)
    return t5_vectorised(d, n_buckets, max_distance)


def t5_bidirectional_half(distance, n_buckets, max_distance):
    return t5_vectorised(distance, n_buckets // 2, max_distance)


def t5_rounded(distance, n_buckets, max_distance):
    d = np.asarray(distance)
    exact = n_buckets // 2
    log = exact + np.round(np.log(np.maximum(d, 1) / exact) / math.log(max_distance / exact) * (n_buckets - exact))
    return np.where(d < exact, d, np.minimum(log, n_buckets - 1)).astype(int)


def t5_unclipped(distance, n_buckets, max_distance):
    d = np.asarray(distance)
    exact = n_buckets // 2
    log = exact + (np.log(np.maximum(d, 1) / exact) / math.log(max_distance / exact) * (n_buckets - exact)).astype(int)
    return np.where(d < exact, d, log)


def t5_log_of_max(distance, n_buckets, max_distance):
    d = np.asarray(distance)
    exact = n_buckets // 2
    log = exact + (np.log(np.maximum(d, 1) / exact) / math.log(max_distance) * (n_buckets - exact)).astype(int)
    return np.where(d < exact, d, np.minimum(log, n_buckets - 1))


def t5_linear(distance, n_buckets, max_distance):
    """Evenly spaced buckets up to max_distance: no log scale at all."""
    d = np.asarray(distance)
    return np.minimum(d * n_buckets // max_distance, n_buckets - 1)


def t5_exact_all_the_way(distance, n_buckets, max_distance):
    return np.minimum(np.asarray(distance), n_buckets - 1)


LEARNER_WRONG += [
    ("heads_by_slices", {"heads_not_split"}, heads_one_big_head),
    ("heads_by_slices", {"heads_split_strided"}, heads_reshape_wrong_order),
    ("heads_by_slices", {"heads_scaled_by_width"}, heads_scale_d_model),
    ("heads_by_slices", {"output_projection_missing"}, heads_no_w_o),
    ("heads_by_slices", set(), heads_averaged),
    ("saturated_share", {"saturation_unscaled"}, saturated_unscaled),
    ("saturated_share", {"saturation_count"}, saturated_count),
    ("saturated_share", set(), saturated_all_weights),
    ("saturated_share", set(), saturated_entropy),
    ("t5_bucket", {"bucket_offset_sign"}, t5_lesson_offset),
    ("t5_bucket", {"bucket_halved"}, t5_bidirectional_half),
    ("t5_bucket", {"bucket_log_rounded"}, t5_rounded),
    ("t5_bucket", {"bucket_not_clipped"}, t5_unclipped),
    ("t5_bucket", {"bucket_log_range"}, t5_log_of_max),
    ("t5_bucket", set(), t5_linear),
    ("t5_bucket", set(), t5_exact_all_the_way),
]


def heads_unscaled(x, w_q, w_k, w_v, w_o, n_heads):
    d_head = w_q.shape[1] // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        s = (x @ w_q[:, cols]) @ (x @ w_k[:, cols]).T
        w = np.exp(s - s.max(axis=1, keepdims=True))
        heads.append((w / w.sum(axis=1, keepdims=True)) @ (x @ w_v[:, cols]))
    return np.concatenate(heads, axis=1) @ w_o


def saturated_over_queries(query, key, threshold):
    def top(scores):
        w = np.exp(scores - scores.max(axis=0, keepdims=True))
        return (w / w.sum(axis=0, keepdims=True)).max(axis=1)

    raw = query @ key.T
    return float(((top(raw) >= threshold) & (top(raw / np.sqrt(key.shape[1])) < threshold)).mean())


# --- cached_attention_step ---------------------------------------------------------------------------


def _softmax_last(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def step_one_based(query, key, value, cache_keys, cache_values, length):
    """Positions counted from 1: the new token "is at" length + 1, so it is written there."""
    n = query.shape[2]
    pos = length + 1
    ck, cv = np.array(cache_keys), np.array(cache_values)
    ck[:, :, pos:pos + n] = key
    cv[:, :, pos:pos + n] = value
    s = np.einsum("bhqd,bhkd->bhqk", query, ck[:, :, :pos + n]) / math.sqrt(query.shape[3])
    j = np.arange(pos + n)
    s[..., j[None, :] > (pos + np.arange(n))[:, None]] = -np.inf
    w = _softmax_last(s)
    return np.einsum("bhqk,bhkd->bhqd", w, cv[:, :, :pos + n]), w, ck, cv


def step_scores_first(query, key, value, cache_keys, cache_values, length):
    """Keys and values sliced (copied) before the new rows are written."""
    n = query.shape[-2]
    K, V = cache_keys[..., :length + n, :].copy(), cache_values[..., :length + n, :].copy()
    cache_keys, cache_values = cache_keys.copy(), cache_values.copy()
    cache_keys[..., length:length + n, :], cache_values[..., length:length + n, :] = key, value
    s = query @ K.swapaxes(-1, -2) / np.sqrt(query.shape[-1])
    allowed = np.arange(length + n) <= length + np.arange(n)[:, None]
    w = _softmax_last(np.where(allowed, s, -np.inf))
    return w @ V, w, cache_keys, cache_values


def step_only_the_past(query, key, value, cache_keys, cache_values, length):
    """Attends to the cached text only, and forgets to store the new keys."""
    K, V = cache_keys[:, :, :length], cache_values[:, :, :length]
    w = _softmax_last(query @ np.transpose(K, (0, 1, 3, 2)) / np.sqrt(K.shape[-1]))
    return w @ V, w, cache_keys, cache_values


def step_tril_shifted(query, key, value, cache_keys, cache_values, length):
    """np.tril's diagonal offset one short: k=length - 1 where k=length was meant."""
    n = query.shape[-2]
    end = length + n
    keys = cache_keys.copy()
    values = cache_values.copy()
    keys[..., length:end, :] = key
    values[..., length:end, :] = value
    s = query @ keys[..., :end, :].swapaxes(-1, -2) / np.sqrt(query.shape[-1])
    ok = np.tril(np.ones((n, end), dtype=bool), k=length - 1)
    w = _softmax_last(np.where(ok, s, -np.inf))
    return w @ values[..., :end, :], w, keys, values


def step_plain_tril(query, key, value, cache_keys, cache_values, length):
    """The causal mask of notebook 02 as it was first written: np.tril of ones, no offset."""
    n = query.shape[-2]
    end = length + n
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:end, :], values[..., length:end, :] = key, value
    s = query @ keys[..., :end, :].swapaxes(-1, -2) / np.sqrt(query.shape[-1])
    s = np.where(np.tril(np.ones((n, end))) == 1, s, -np.inf)
    w = _softmax_last(s)
    return w @ values[..., :end, :], w, keys, values


def step_mask_the_buffer(query, key, value, cache_keys, cache_values, length):
    """Scores against the whole buffer, the unwritten rows masked out: right values, the buffer's work."""
    n, C = query.shape[-2], cache_keys.shape[-2]
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:length + n, :], values[..., length:length + n, :] = key, value
    s = query @ keys.swapaxes(-1, -2) / np.sqrt(query.shape[-1])
    s = np.where(np.arange(C) <= length + np.arange(n)[:, None], s, -np.inf)
    w = _softmax_last(s)
    return w @ values, w, keys, values


def step_concatenated_to_buffer(query, key, value, cache_keys, cache_values, length):
    """Treats the buffer as a growing cache: the new keys appended after its last row."""
    keys = np.concatenate([cache_keys, key], axis=2)
    values = np.concatenate([cache_values, value], axis=2)
    w = _softmax_last(query @ keys.swapaxes(-1, -2) / np.sqrt(query.shape[-1]))
    return w @ values, w, keys, values


def step_unscaled(query, key, value, cache_keys, cache_values, length):
    """Right cache and mask, no 1/sqrt(d_h)."""
    n = query.shape[-2]
    end = length + n
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:end, :], values[..., length:end, :] = key, value
    s = query @ keys[..., :end, :].swapaxes(-1, -2)
    w = _softmax_last(np.where(np.arange(end) <= length + np.arange(n)[:, None], s, -np.inf))
    return w @ values[..., :end, :], w, keys, values


LEARNER_WRONG += [
    ("cached_attention_step", {"cache_position_off_by_one"}, step_one_based),
    ("cached_attention_step", {"stale_key"}, step_scores_first),
    ("cached_attention_step", {"stale_key"}, step_only_the_past),
    ("cached_attention_step", {"cache_mask_off_by_one"}, step_tril_shifted),
    ("cached_attention_step", {"cache_mask_top_left"}, step_plain_tril),
    ("cached_attention_step", {"whole_cache_scored"}, step_mask_the_buffer),
    ("cached_attention_step", set(), step_concatenated_to_buffer),
    ("cached_attention_step", set(), step_unscaled),
]


# === one slip of a known kind per answer, every exercise ===========================================

# --- scaled_dot_product_attention
def sdpa_axis_zero(query, key, value):
    """K1: the softmax's sums taken over axis 0, the first axis, whatever it holds."""
    s = query @ np.swapaxes(key, -1, -2) / math.sqrt(key.shape[-1])
    e = np.exp(s - s.max(axis=0, keepdims=True))
    w = e / e.sum(axis=0, keepdims=True)
    return w @ value if value.ndim == key.ndim else w @ value, w


def sdpa_overflow_guarded(query, key, value):
    """K5: no maximum subtracted, and the NaN that overflow gives replaced by zeros."""
    e = np.exp(query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1]))
    w = np.nan_to_num(e / e.sum(axis=-1, keepdims=True))
    return w @ value, w


def sdpa_scaled_in_place(query, key, value):
    """K9: the queries scaled in place, the caller's array with them."""
    query /= np.sqrt(key.shape[-1])
    s = query @ np.swapaxes(key, -1, -2)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ value, w


def sdpa_epsilon_denominator(query, key, value):
    """K5: an epsilon in the denominator 'in case a row sums to zero', far too large for float64."""
    s = query @ np.swapaxes(key, -1, -2) / np.sqrt(key.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / (e.sum(axis=-1, keepdims=True) + 1e-3)
    return w @ value, w



# --- q1_context

# --- masked_softmax
def masked_axis_zero(scores, allowed):
    """K1: the column sums: axis 0 instead of the last."""
    s = np.where(allowed, scores, -np.inf)
    top = np.max(s, axis=0, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    total = e.sum(axis=0, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_renormalised_guarded(scores, allowed):
    """K5: zeroed after the softmax, renormalised, and 0 / 0 guarded to 0."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = np.where(allowed, e / e.sum(axis=-1, keepdims=True), 0.0)
    total = p.sum(axis=-1, keepdims=True)
    return np.divide(p, total, out=np.zeros_like(p), where=total > 0)


def masked_fill_in_place(scores, allowed):
    """K9: the disallowed scores overwritten in the caller's array."""
    scores[~np.broadcast_to(allowed, scores.shape)] = -np.inf
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_loose_zero_test(scores, allowed):
    """K2: a row counted as empty when its largest weight is tiny, not when no key is allowed."""
    s = np.where(allowed, scores, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    w = e / np.maximum(e.sum(axis=-1, keepdims=True), 1e-300)
    return np.where(w.max(axis=-1, keepdims=True) < 0.5, 0.0, w)



# --- causal_mask
def causal_strictly_greater(length):
    """K8: `>` where "at or before" was asked: i - j > 0."""
    i = np.arange(length)
    return (i[:, None] - i[None, :]) > 0


def causal_axes_swapped(length):
    """K1: the query index on the key axis: row j, column i."""
    i = np.arange(length)
    return i[None, :] >= i[:, None]


def causal_flipped_left_right(length):
    """np.fliplr to 'turn the triangle the right way'."""
    return np.fliplr(np.tril(np.ones((length, length), dtype=bool)))



# --- padding_mask
def padding_more_than_j_plus_one(lengths, max_length):
    """K8: real when lengths > j + 1, where lengths[b] must be at least j + 1."""
    return np.asarray(lengths)[:, None] > np.arange(max_length)[None, :] + 1


def padding_at_least_j(lengths, max_length):
    """K8 the other way: lengths >= j, one real token too many."""
    return np.asarray(lengths)[:, None] >= np.arange(max_length)[None, :]


def padding_shared_row(lengths, max_length):
    """K3: one row object repeated, so every sequence gets every sequence's real tokens."""
    rows = [[False] * max_length] * len(lengths)
    for b, n in enumerate(lengths):
        for j in range(n):
            rows[b][j] = True
    return np.array(rows)


def padding_transposed(lengths, max_length):
    """K1: (max_length, batch): positions on axis 0."""
    return np.arange(max_length)[:, None] < np.asarray(lengths)[None, :]



# --- cached_causal_mask
def cached_first_real_strict(lengths, n_queries):
    """K8: a key real when j > S - lengths[b], where "at least" was meant."""
    lengths = np.asarray(lengths)
    s = int(lengths.max())
    j = np.arange(s)
    pos = s - n_queries + np.arange(n_queries)
    return (j[None, None, :] > (s - lengths)[:, None, None]) & (j[None, None, :] <= pos[None, :, None])


def cached_batch_last(lengths, n_queries):
    """K1: built as (n_queries, S, B), the batch on the last axis."""
    lengths = np.asarray(lengths)
    s = int(lengths.max())
    j = np.arange(s)
    real = j[:, None] >= (s - lengths)[None, :]  # (S, B)
    causal = j[None, :] <= (s - n_queries + np.arange(n_queries))[:, None]  # (L, S)
    return causal[:, :, None] & real[None, :, :]


def cached_one_mask_for_all(lengths, n_queries):
    """K3: one array reused for every sequence, so each sequence's padding is blocked in all."""
    lengths = np.asarray(lengths)
    s = int(lengths.max())
    base = np.tril(np.ones((s, s), dtype=bool))[-n_queries:]  # (L, S)
    masks = [base] * len(lengths)
    for b, n in enumerate(lengths):
        masks[b][:, : s - n] = False
    return np.stack(masks)



# --- sinusoidal_positions
def sinus_log_from_column(n_positions, d_model):
    """K7: the frequencies through exp and log, with the column index where the pair index belongs."""
    col = np.arange(d_model)
    inv = np.exp(-np.log(10000.0) * col / d_model)  # (d,)
    angle = np.arange(n_positions)[:, None] * inv[None, :]
    out = np.sin(angle)
    out[:, 1::2] = np.cos(angle[:, 1::2])
    return out


def sinus_split_then_joined(n_positions, d_model):
    """K6: sines of the even columns and cosines of the odd ones, joined side by side."""
    i = np.arange(0, d_model, 2)
    angle = np.arange(n_positions)[:, None] / 10000.0 ** (i / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def sinus_positions_on_columns(n_positions, d_model):
    """K1: positions along axis 1, then transposed only when the table came out square."""
    i = np.arange(0, d_model, 2)
    angle = np.arange(n_positions)[None, :] / 10000.0 ** (i[:, None] / d_model)  # (d/2, n)
    pe = np.zeros((d_model, n_positions))
    pe[0::2], pe[1::2] = np.sin(angle), np.cos(angle)
    return pe



# --- apply_rope
def rope_split_joined_in_halves(x, positions):
    """K6: the interleaved pairs rotated, then written back as all firsts, then all seconds."""
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    return np.concatenate([a * np.cos(theta) - b * np.sin(theta), a * np.sin(theta) + b * np.cos(theta)], axis=-1)


def rope_log_from_column(x, positions):
    """K7: exp(-log(10000) * i / d) with i the pair index: the factor 2 lost on the way through the log."""
    d = x.shape[-1]
    inv = np.exp(-math.log(10000.0) * np.arange(d // 2) / d)
    theta = np.asarray(positions, dtype=float)[:, None] * inv
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(theta) - x[..., 1::2] * np.sin(theta)
    out[..., 1::2] = x[..., 0::2] * np.sin(theta) + x[..., 1::2] * np.cos(theta)
    return out


def rope_rotated_in_place(x, positions):
    """K3 and K9: the first coordinates overwritten in x, then read again for the second ones."""
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]  # views of x
    a[...] = a * np.cos(theta) - b * np.sin(theta)
    b[...] = a * np.sin(theta) + b * np.cos(theta)
    return x



# --- is_order_sensitive
def order_undone_the_wrong_way(layer, x):
    """K4: the inverse permutation applied to the unpermuted outputs, where p itself belongs."""
    p = np.roll(np.arange(x.shape[1]), 1)
    return not np.allclose(layer(x[:, p]), layer(x)[:, np.argsort(p)])


def order_undone_on_batch_axis(layer, x):
    """K4: the permutation undone on axis 0, the sequences of the batch."""
    p = np.roll(np.arange(x.shape[1]), 1)
    undo = np.argsort(p)
    return not np.allclose(layer(x[:, p])[undo], layer(x))


def order_loose_tolerance(layer, x):
    """K2: a tolerance of 0.05, 'to be safe from rounding'."""
    p = np.random.default_rng(0).permutation(x.shape[1])
    return not np.allclose(layer(x[:, p]), layer(x)[:, p], atol=0.05, rtol=0.05)



# --- alibi_slopes
def alibi_logspace_from_one(n_heads):
    """K7: np.logspace from 2**0: the first head at slope 1, the last at 2**-8."""
    return np.logspace(0, -8, n_heads, base=2.0)


def alibi_base_e(n_heads):
    """K7: exp and log without base 2."""
    return np.exp(-8.0 * np.arange(1, n_heads + 1) / n_heads)


def alibi_heads_from_zero(n_heads):
    return np.array([2.0 ** (-8.0 * h / n_heads) for h in range(n_heads)])



# --- alibi_weights
def alibi_distance_greater_than_zero(scores, head, n_heads):
    """K8: keys with i - j > 0, where "at or before" (>= 0) was asked; a row with none guarded to zeros."""
    n_q, n_k = scores.shape
    d = np.arange(n_k - n_q, n_k)[:, None] - np.arange(n_k)[None, :]
    m = 2.0 ** (-8.0 * (head + 1) / n_heads)
    s = np.where(d > 0, scores - m * d, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def alibi_softmax_over_queries(scores, head, n_heads):
    """K1: the causal softmax taken down the columns."""
    n_q, n_k = scores.shape
    d = np.arange(n_k - n_q, n_k)[:, None] - np.arange(n_k)[None, :]
    s = np.where(d >= 0, scores - 2.0 ** (-8.0 * (head + 1) / n_heads) * d, -np.inf)
    top = s.max(axis=0, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=0, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def alibi_biased_in_place(scores, head, n_heads):
    """K9: the bias subtracted from the caller's scores."""
    n_q, n_k = scores.shape
    d = np.arange(n_k - n_q, n_k)[:, None] - np.arange(n_k)[None, :]
    scores -= 2.0 ** (-8.0 * (head + 1) / n_heads) * d
    scores[d < 0] = -np.inf
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def alibi_slope_from_list(scores, head, n_heads):
    """The slopes listed as 1/2, 1/4, ... whatever the number of heads."""
    n_q, n_k = scores.shape
    d = np.arange(n_k - n_q, n_k)[:, None] - np.arange(n_k)[None, :]
    s = np.where(d >= 0, scores - 0.5 ** (head + 1) * d, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)



# --- t5_bucket
def t5_log_of_distance_over_log_max(distance, n_buckets, max_distance):
    """K7: log(d) / log(max_distance): the scale measured from distance 1 at both ends."""
    d = np.asarray(distance)
    exact = n_buckets // 2
    log_part = exact + np.floor(np.log(np.maximum(d, 1)) / np.log(max_distance) * (n_buckets - exact)).astype(int)
    return np.where(d < exact, d, np.minimum(log_part, n_buckets - 1))


def t5_last_bucket_past_max(distance, n_buckets, max_distance):
    """K8: the last bucket from past max_distance (>), where "from max_distance on" was asked."""
    d = np.asarray(distance)
    exact = n_buckets // 2
    place = np.log(np.maximum(d, 1) / exact) / np.log(max_distance / exact)
    log_part = exact + (place * (n_buckets - exact)).astype(int)
    return np.where(d < exact, d, np.where(d > max_distance, n_buckets - 1, log_part))


def t5_exact_up_to_exact(distance, n_buckets, max_distance):
    """K8: exact buckets up to and including exact, and the log part from exact + 1."""
    d = np.asarray(distance)
    exact = n_buckets // 2
    log_part = exact + 1 + np.floor(np.log(np.maximum(d, 1) / exact) / np.log(max_distance / exact)
                                    * (n_buckets - exact - 1)).astype(int)
    return np.where(d <= exact, d, np.minimum(log_part, n_buckets - 1))



# --- leaks_future
def leaks_copy_that_is_not(layer, length, n_queries, d_model):
    """K3: `changed = x` makes no copy, so every change stays for the next position."""
    x = np.random.default_rng(0).normal(size=(length, d_model))
    before = layer(x)
    first = length - n_queries
    for t in range(first + 1, length):
        changed = x
        changed[t] += 1.0
        if not np.allclose(layer(changed)[:t - first], before[:t - first]):
            return True
    return False


def leaks_loose_tolerance(layer, length, n_queries, d_model):
    """K2: a tolerance of 0.01, 'to be safe'."""
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries
    out = layer(x)
    for t in range(first + 1, length):
        y = x.copy()
        y[t] = np.random.default_rng(t).normal(size=d_model)
        if np.abs(layer(y)[:t - first] - out[:t - first]).max() > 0.01:
            return True
    return False


def leaks_rows_from_t(layer, length, n_queries, d_model):
    """The rows at and after t compared, where the rows before t were meant."""
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries
    out = layer(x)
    for t in range(first + 1, length):
        y = x.copy()
        y[t] += 1.0
        if not np.allclose(layer(y)[t - first:], out[t - first:]):
            return True
    return False


def leaks_tiny_perturbation(layer, length, n_queries, d_model):
    """A perturbation of 1e-12 'so as not to disturb the layer', below allclose's tolerance."""
    x = np.random.default_rng(0).normal(size=(length, d_model))
    first = length - n_queries
    out = layer(x)
    for t in range(first + 1, length):
        y = x.copy()
        y[t] += 1e-12
        if not np.allclose(layer(y)[:t - first], out[:t - first]):
            return True
    return False



# --- mask_polarity
def _weights_for(attention_fn, mask_row):
    """Weights of one query over len(mask_row) keys, q = k = 0, value = eye."""
    s = len(mask_row)
    out = attention_fn(np.zeros((1, 1, 2)), np.zeros((1, s, 2)), np.eye(s)[None], np.asarray([mask_row], dtype=float))
    return np.asarray(out, dtype=float)[0, 0]


def polarity_loose_zero(attention_fn):
    """K2: a weight below 0.3 taken for a blocked key."""
    w = _weights_for(attention_fn, [0.0, 1.0])
    if w[0] < 0.3 and w[1] >= 0.3:
        return "attend"
    if w[1] < 0.3 and w[0] >= 0.3:
        return "blocked"
    return "additive"


def polarity_guarded_empty_row(attention_fn):
    """K5: a row where every key is marked 1, its NaN guarded to 0: an empty output read as 'all blocked'."""
    w = np.nan_to_num(_weights_for(attention_fn, [1.0, 1.0]))
    if np.allclose(w, 0.0):
        return "blocked"
    w = np.nan_to_num(_weights_for(attention_fn, [0.0, 1.0]))
    if w[0] > 1e-6 and w[1] > 1e-6:
        return "additive"
    return "attend"


def polarity_value_of_ones(attention_fn):
    """value = ones: every output is 1 whatever the weights, so no key ever looks blocked."""
    out = np.asarray(attention_fn(np.zeros((1, 1, 2)), np.zeros((1, 2, 2)), np.ones((1, 2, 1)),
                                  np.array([[0.0, 1.0]])), dtype=float)
    if np.isnan(out).any() or np.allclose(out, 0.0):
        return "blocked"
    return "attend"


def _sm(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)



# --- heads_by_slices (every head at once)
def heads_strided_split_contiguous_join(x, w_q, w_k, w_v, w_o, n_heads):
    """K6: reshape(n, d_head, H) to split, and a plain reshape back: each head's columns come back as a block."""
    n = x.shape[0]
    split = lambda m: (x @ m).reshape(n, -1, n_heads).transpose(2, 0, 1)  # noqa: E731  (H, n, d_head)
    q, k, v = split(w_q), split(w_k), split(w_v)
    w = _sm(q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1]))
    return (w @ v).transpose(1, 0, 2).reshape(n, -1) @ w_o


def heads_joined_on_wrong_axes(x, w_q, w_k, w_v, w_o, n_heads):
    """K4: the heads transposed back to (n, d_head, H) before the reshape: their columns interleaved."""
    n = x.shape[0]
    d_head = w_q.shape[1] // n_heads
    split = lambda m: (x @ m).reshape(n, n_heads, d_head).transpose(1, 0, 2)  # noqa: E731
    q, k, v = split(w_q), split(w_k), split(w_v)
    w = _sm(q @ k.transpose(0, 2, 1) / math.sqrt(d_head))
    return (w @ v).transpose(1, 2, 0).reshape(n, -1) @ w_o


def heads_softmax_axis_one(x, w_q, w_k, w_v, w_o, n_heads):
    """K1: softmax over axis 1 of the (H, n, n) scores: right for one (n, n) matrix, the queries here."""
    n = x.shape[0]
    d_head = w_q.shape[1] // n_heads
    split = lambda m: (x @ m).reshape(n, n_heads, d_head).transpose(1, 0, 2)  # noqa: E731
    q, k, v = split(w_q), split(w_k), split(w_v)
    w = _sm(q @ k.transpose(0, 2, 1) / math.sqrt(d_head), axis=1)
    return (w @ v).transpose(1, 0, 2).reshape(n, -1) @ w_o


def heads_reshape_without_transpose(x, w_q, w_k, w_v, w_o, n_heads):
    """(n, H * d_head) reshaped straight to (H, n, d_head): the rows of tokens cut across heads."""
    n = x.shape[0]
    d_head = w_q.shape[1] // n_heads
    q, k, v = ((x @ m).reshape(n_heads, n, d_head) for m in (w_q, w_k, w_v))
    w = _sm(q @ k.transpose(0, 2, 1) / math.sqrt(d_head))
    return (w @ v).reshape(n, -1) @ w_o



# --- saturated_share (rescued)
def saturated_strict(query, key, threshold):
    """K8: > where "at least" was asked."""
    raw = query @ key.T
    top_raw = _sm(raw).max(axis=1)
    top_scaled = _sm(raw / math.sqrt(key.shape[1])).max(axis=1)
    return float(np.mean((top_raw > threshold) & (top_scaled <= threshold)))


def saturated_axis_zero(query, key, threshold):
    """K1: the softmax of each column."""
    raw = query @ key.T
    a = _sm(raw, axis=0).max(axis=1)
    b = _sm(raw / np.sqrt(key.shape[1]), axis=0).max(axis=1)
    return float(((a >= threshold) & (b < threshold)).mean())


def saturated_log_weights(query, key, threshold):
    """K7: log-weights compared with the threshold itself, not with its log."""
    def log_top(s):
        shifted = s - s.max(axis=1, keepdims=True)
        return (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))).max(axis=1)
    raw = query @ key.T
    return float(np.mean((log_top(raw) >= threshold) & (log_top(raw / np.sqrt(key.shape[1])) < threshold)))


def saturated_scaled_only(query, key, threshold):
    """The saturated share after the scaling, the question 01's table answers on average."""
    top = _sm(query @ key.T / np.sqrt(key.shape[1])).max(axis=1)
    return float(np.mean(top >= threshold))



# --- score_matrix_bytes
def bytes_batch_forgotten(batch, heads, length, bytes_per_element):
    return heads * length * length * bytes_per_element


def bytes_bits_per_element(batch, heads, length, bytes_per_element):
    """The element size read as bits: 8 bits a byte, multiplied in."""
    return batch * heads * length * length * bytes_per_element * 8


def bytes_length_doubled(batch, heads, length, bytes_per_element):
    """length * 2 for length squared."""
    return batch * heads * length * 2 * bytes_per_element



# --- online_softmax
def online_guarded_overflow(scores, values, block_size):
    """K5: no running maximum; the overflow's NaN replaced by zeros."""
    total, acc = 0.0, np.zeros(values.shape[1])
    for start in range(0, len(scores), block_size):
        e = np.exp(scores[start:start + block_size])
        total += e.sum()
        acc += e @ values[start:start + block_size]
    return np.nan_to_num(acc / total)


def online_rescaled_upside_down(scores, values, block_size):
    """The factor exp(m_new - m) where exp(m - m_new) belongs (guarded at the first block)."""
    m, total, acc = None, 0.0, np.zeros(values.shape[1])
    for start in range(0, len(scores), block_size):
        block = scores[start:start + block_size]
        new_m = block.max() if m is None else max(m, block.max())
        factor = 1.0 if m is None else math.exp(new_m - m)
        e = np.exp(block - new_m)
        total = total * factor + e.sum()
        acc = acc * factor + e @ values[start:start + block_size]
        m = new_m
    return acc / total


def online_last_block_skipped(scores, values, block_size):
    """K8: while start + block_size < len(scores): the last block, whole or not, never read."""
    m, total, acc, start = -np.inf, 0.0, np.zeros(values.shape[1]), 0
    while start + block_size < len(scores):
        block = scores[start:start + block_size]
        new_m = max(m, block.max())
        c = math.exp(m - new_m)
        e = np.exp(block - new_m)
        total = total * c + e.sum()
        acc = acc * c + e @ values[start:start + block_size]
        m, start = new_m, start + block_size
    return acc / total if total > 0 else acc



# --- tiled_attention
def tiled_guarded_overflow(query, key, value, block_size):
    """K5: blocks exponentiated without a running maximum, NaN replaced by zeros at the end."""
    q = query / math.sqrt(query.shape[-1])
    denom = np.zeros(query.shape[:-1])
    acc = np.zeros(query.shape[:-1] + (value.shape[-1],))
    for k0 in range(0, key.shape[-2], block_size):
        e = np.exp(q @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2))
        denom = denom + e.sum(-1)
        acc = acc + e @ value[..., k0:k0 + block_size, :]
    return np.nan_to_num(acc / denom[..., None])


def tiled_stops_before_last(query, key, value, block_size):
    """K8: range(0, S - block_size, block_size): the last block (whole or partial) never read."""
    q = query / math.sqrt(query.shape[-1])
    n_k = key.shape[-2]
    m = np.full(query.shape[:-1], -np.inf)
    denom = np.zeros(query.shape[:-1])
    acc = np.zeros(query.shape[:-1] + (value.shape[-1],))
    for k0 in range(0, max(n_k - block_size, 1), block_size):
        s = q @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2)
        new_m = np.maximum(m, s.max(-1))
        c = np.exp(m - new_m)
        p = np.exp(s - new_m[..., None])
        denom = denom * c + p.sum(-1)
        acc = acc * c[..., None] + p @ value[..., k0:k0 + block_size, :]
        m = new_m
    return acc / denom[..., None]


def tiled_factor_upside_down(query, key, value, block_size):
    """The rescaling factor inverted, exp(m_new - m), with the first block guarded."""
    q = query / math.sqrt(query.shape[-1])
    m = None
    for k0 in range(0, key.shape[-2], block_size):
        s = q @ np.swapaxes(key[..., k0:k0 + block_size, :], -1, -2)
        if m is None:
            m = s.max(-1)
            p = np.exp(s - m[..., None])
            denom, acc = p.sum(-1), p @ value[..., k0:k0 + block_size, :]
            continue
        new_m = np.maximum(m, s.max(-1))
        c = np.exp(new_m - m)
        p = np.exp(s - new_m[..., None])
        denom = denom * c + p.sum(-1)
        acc = acc * c[..., None] + p @ value[..., k0:k0 + block_size, :]
        m = new_m
    return acc / denom[..., None]



# --- exclusion_effects
def exclusion_scores_not_copied(query, keys, values, w_o):
    """K3: one scores array, each key set to -inf in turn and never put back."""
    s = keys @ query / math.sqrt(len(query))
    w = np.exp(s - s.max())
    out = (w / w.sum()) @ values
    effects = []
    for j in range(len(keys)):
        excluded = s  # the same array
        excluded[j] = -np.inf
        if np.all(np.isneginf(excluded)):
            effects.append(np.linalg.norm(-out @ w_o))
            continue
        e = np.exp(excluded - excluded.max())
        effects.append(np.linalg.norm(((e / e.sum()) @ values - out) @ w_o))
    return np.array(effects)


def exclusion_guarded_closed_form(query, keys, values, w_o):
    """K5: the closed form w / (1 - w) (o - v), its 0 / 0 at a full weight guarded to 0."""
    s = keys @ query / np.sqrt(len(query))
    w = np.exp(s - s.max())
    w /= w.sum()
    o = w @ values
    ratio = np.divide(w, 1 - w, out=np.zeros_like(w), where=(1 - w) > 0)
    return np.linalg.norm((ratio[:, None] * (o - values)) @ w_o, axis=1)


def exclusion_norm_over_keys(query, keys, values, w_o):
    """K1: the norm taken over axis 0, the keys, instead of each key's row."""
    s = keys @ query / np.sqrt(len(query))
    w = np.exp(s - s.max())
    w /= w.sum()
    o = w @ values
    moves = []
    for j in range(len(keys)):
        rest = np.exp(np.delete(s, j) - np.delete(s, j).max())
        moves.append((rest / rest.sum()) @ np.delete(values, j, axis=0) - o)
    return np.linalg.norm(np.stack(moves) @ w_o, axis=0)



# --- changed_predictions
def changed_targets_above_zero(logits, logits_changed, targets, last_kept):
    """K8: scored where target > 0, where "not -1" (at least 0) was meant: token 0 is never counted."""
    keep = (np.arange(targets.shape[1]) <= last_kept)[None, :] & (targets > 0)
    return float((logits.argmax(-1) != logits_changed.argmax(-1))[keep].mean())


def changed_strictly_before(logits, logits_changed, targets, last_kept):
    """K8: positions before last_kept, where "at or before" was asked."""
    keep = (np.arange(targets.shape[1]) < last_kept)[None, :] & (targets != -1)
    return float((logits.argmax(-1) != logits_changed.argmax(-1))[keep].mean())


def changed_argmax_over_positions(logits, logits_changed, targets, last_kept):
    """K1: argmax over axis 1, the positions, where the vocabulary (the last axis) was meant."""
    before, after = logits.argmax(axis=1), logits_changed.argmax(axis=1)  # (B, V)
    return float(np.mean(before != after))


def changed_unscored_marked_in_place(logits, logits_changed, targets, last_kept):
    """K9: unscored targets overwritten in the caller's array before counting."""
    targets[targets < 0] = 0
    keep = (np.arange(targets.shape[1]) <= last_kept)[None, :]
    return float((logits.argmax(-1) != logits_changed.argmax(-1))[np.broadcast_to(keep, targets.shape)].mean())


def step_mask_strictly_before(query, key, value, cache_keys, cache_values, length):
    """K8: key j allowed when j < length + r, where "at or before" (<=) was asked."""
    n = query.shape[-2]
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:length + n, :], values[..., length:length + n, :] = key, value
    s = query @ np.swapaxes(keys[..., :length + n, :], -1, -2) / math.sqrt(query.shape[-1])
    ok = np.arange(length + n)[None, :] < length + np.arange(n)[:, None]
    s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    t = e.sum(-1, keepdims=True)
    w = np.divide(e, t, out=np.zeros_like(e), where=t > 0)
    return w @ values[..., :length + n, :], w, keys, values


def step_softmax_over_new_queries(query, key, value, cache_keys, cache_values, length):
    """K1: the softmax over axis -2, the new queries, instead of the keys."""
    n = query.shape[-2]
    keys, values = cache_keys.copy(), cache_values.copy()
    keys[..., length:length + n, :], values[..., length:length + n, :] = key, value
    s = query @ np.swapaxes(keys[..., :length + n, :], -1, -2) / math.sqrt(query.shape[-1])
    s = np.where(np.arange(length + n)[None, :] <= length + np.arange(n)[:, None], s, -np.inf)
    top = s.max(-2, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    t = e.sum(-2, keepdims=True)
    w = np.divide(e, t, out=np.zeros_like(e), where=t > 0)
    return w @ values[..., :length + n, :], w, keys, values


def step_key_scaled_in_place(query, key, value, cache_keys, cache_values, length):
    """K9: the new keys scaled by 1/sqrt(d_h) in place, then written into the cache as keys."""
    n = query.shape[-2]
    key /= math.sqrt(key.shape[-1])
    cache_keys[..., length:length + n, :], cache_values[..., length:length + n, :] = key, value
    s = query @ np.swapaxes(cache_keys[..., :length + n, :], -1, -2)
    s = np.where(np.arange(length + n)[None, :] <= length + np.arange(n)[:, None], s, -np.inf)
    w = _sm(s)
    return w @ cache_values[..., :length + n, :], w, cache_keys, cache_values


# Kinds of slips seen in answers written independently of the checks: each answer above carries one.
AXIS = "normalised or reduced over the wrong axis"
LOOSE = "a tolerance so loose it hides the effect being tested"
ALIAS = "aliasing: a copy that is the same array, so changes accumulate"
UNDO = "a permutation undone on the wrong axis, or the wrong way"
GUARD = "a 0/0 guard that turns the symptom a check looks for into another"
STRIDED = "a strided split joined back contiguously, or the reverse"
LOG = "a logarithm measured from the wrong origin"
STRICT = "> where at least was asked (or < where at most)"
MUTATES = "writes into the caller's array"
VALUE = "a number worked out with one slip"

# (exercise, the diagnoses it must get, answer, kind): at least two named and one unnamed per exercise.
KIND_WRONG = [
    ("scaled_dot_product_attention", {"softmax_over_queries"}, sdpa_axis_zero, AXIS),
    ("scaled_dot_product_attention", {"no_max_subtraction"}, sdpa_overflow_guarded, GUARD),
    ("scaled_dot_product_attention", set(), sdpa_scaled_in_place, MUTATES),
    ("scaled_dot_product_attention", set(), sdpa_epsilon_denominator, GUARD),
    ("q1_context", {"q1_masked_key_included"}, 8.0 / 3.0, AXIS),
    ("q1_context", {"q1_weights_not_normalised"}, 8.0, GUARD),
    ("q1_context", set(), 1.0, VALUE),
    ("masked_softmax", {"normalised_over_wrong_axis"}, masked_axis_zero, AXIS),
    ("masked_softmax", {"renormalised_after_softmax"}, masked_renormalised_guarded, GUARD),
    ("masked_softmax", set(), masked_fill_in_place, MUTATES),
    ("masked_softmax", set(), masked_loose_zero_test, LOOSE),
    ("causal_mask", {"causal_diagonal_excluded"}, causal_strictly_greater, STRICT),
    ("causal_mask", {"causal_upper_triangle"}, causal_axes_swapped, AXIS),
    ("causal_mask", set(), causal_flipped_left_right, AXIS),
    ("padding_mask", {"padding_off_by_one"}, padding_more_than_j_plus_one, STRICT),
    ("padding_mask", {"padding_off_by_one"}, padding_at_least_j, STRICT),
    ("padding_mask", set(), padding_shared_row, ALIAS),
    ("padding_mask", set(), padding_transposed, AXIS),
    ("cached_causal_mask", {"cache_padding_off_by_one"}, cached_first_real_strict, STRICT),
    ("cached_causal_mask", {"cache_axes_order"}, cached_batch_last, AXIS),
    ("cached_causal_mask", set(), cached_one_mask_for_all, ALIAS),
    ("leaks_future", {"perturbations_accumulate"}, leaks_copy_that_is_not, ALIAS),
    ("leaks_future", {"leak_tolerance_too_loose"}, leaks_loose_tolerance, LOOSE),
    ("leaks_future", {"input_changed_in_place"}, leaks_tiny_perturbation, LOOSE),
    ("leaks_future", set(), leaks_rows_from_t, STRICT),
    ("mask_polarity", {"additive_called_attend"}, polarity_loose_zero, LOOSE),
    ("mask_polarity", {"polarity_from_empty_rows"}, polarity_guarded_empty_row, GUARD),
    ("mask_polarity", set(), polarity_value_of_ones, AXIS),
    ("sinusoidal_positions", {"wrong_frequency_exponent"}, sinus_log_from_column, LOG),
    ("sinusoidal_positions", {"halves_concatenated"}, sinus_split_then_joined, STRIDED),
    ("sinusoidal_positions", set(), sinus_positions_on_columns, AXIS),
    ("apply_rope", {"rope_output_in_halves"}, rope_split_joined_in_halves, STRIDED),
    ("apply_rope", {"rope_wrong_frequency"}, rope_log_from_column, LOG),
    ("apply_rope", set(), rope_rotated_in_place, ALIAS),
    ("is_order_sensitive", {"permutation_not_undone"}, order_undone_the_wrong_way, UNDO),
    ("is_order_sensitive", {"order_tolerance_too_loose"}, order_loose_tolerance, LOOSE),
    ("is_order_sensitive", set(), order_undone_on_batch_axis, UNDO),
    ("alibi_slopes", {"alibi_wrong_base"}, alibi_base_e, LOG),
    ("alibi_slopes", {"alibi_off_by_one_head"}, alibi_heads_from_zero, LOG),
    ("alibi_slopes", set(), alibi_logspace_from_one, LOG),
    ("alibi_weights", {"alibi_own_key_excluded"}, alibi_distance_greater_than_zero, STRICT),
    ("alibi_weights", {"alibi_over_queries"}, alibi_softmax_over_queries, AXIS),
    ("alibi_weights", set(), alibi_biased_in_place, MUTATES),
    ("alibi_weights", set(), alibi_slope_from_list, LOG),
    ("t5_bucket", {"bucket_log_range"}, t5_log_of_distance_over_log_max, LOG),
    ("t5_bucket", {"bucket_not_clipped"}, t5_last_bucket_past_max, STRICT),
    ("t5_bucket", set(), t5_exact_up_to_exact, STRICT),
    ("heads_by_slices", {"heads_split_strided"}, heads_strided_split_contiguous_join, STRIDED),
    ("heads_by_slices", {"heads_split_strided"}, heads_joined_on_wrong_axes, UNDO),
    ("heads_by_slices", {"heads_softmax_over_queries"}, heads_softmax_axis_one, AXIS),
    ("heads_by_slices", set(), heads_reshape_without_transpose, STRIDED),
    ("saturated_share", {"saturation_strict_threshold"}, saturated_strict, STRICT),
    ("saturated_share", {"saturation_over_queries"}, saturated_axis_zero, AXIS),
    ("saturated_share", set(), saturated_log_weights, LOG),
    ("saturated_share", set(), saturated_scaled_only, STRICT),
    ("score_matrix_bytes", {"bytes_missing_batch"}, bytes_batch_forgotten, AXIS),
    ("score_matrix_bytes", {"bytes_off_by_dtype"}, bytes_bits_per_element, LOG),
    ("score_matrix_bytes", set(), bytes_length_doubled, VALUE),
    ("online_softmax", {"online_no_running_max"}, online_guarded_overflow, GUARD),
    ("online_softmax", {"online_last_block_skipped"}, online_last_block_skipped, STRICT),
    ("online_softmax", set(), online_rescaled_upside_down, LOG),
    ("tiled_attention", {"tiled_no_max_subtraction"}, tiled_guarded_overflow, GUARD),
    ("tiled_attention", {"last_block_dropped"}, tiled_stops_before_last, STRICT),
    ("tiled_attention", set(), tiled_factor_upside_down, LOG),
    ("exclusion_effects", {"exclusions_accumulate"}, exclusion_scores_not_copied, ALIAS),
    ("exclusion_effects", {"closed_form_at_full_weight"}, exclusion_guarded_closed_form, GUARD),
    ("exclusion_effects", set(), exclusion_norm_over_keys, AXIS),
    ("changed_predictions", {"target_zero_skipped"}, changed_targets_above_zero, STRICT),
    ("changed_predictions", {"own_position_left_out"}, changed_strictly_before, STRICT),
    ("changed_predictions", {"unscored_counted"}, changed_unscored_marked_in_place, MUTATES),
    ("changed_predictions", set(), changed_argmax_over_positions, AXIS),
    ("cached_attention_step", {"cache_mask_off_by_one"}, step_mask_strictly_before, STRICT),
    ("cached_attention_step", {"step_softmax_over_queries"}, step_softmax_over_new_queries, AXIS),
    ("cached_attention_step", set(), step_key_scaled_in_place, MUTATES),
]
LEARNER_WRONG += [(exercise, names, answer) for exercise, names, answer, _ in KIND_WRONG]
