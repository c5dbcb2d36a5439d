"""lessonlib.training.lm: the character language model's gradients, cache, plug-in functions and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from lessonlib import causal_mask, fast, masked_softmax, rope, scaled_dot_product_attention
from lessonlib.position import alibi_slopes, sinusoidal_positions
from lessonlib.training import POSITIONS, BeyondTableError, CheckpointError
from lessonlib.training.lm import CharModel, Plugs

BIAS_POSITIONS = ("alibi", "relative")  # a score bias: plug in the softmax, not the whole attention


def perturbed(model: CharModel, seed: int = 0) -> CharModel:
    """Move every parameter off its initial value (norm gains off one, biases off zero)."""
    rng = np.random.default_rng(seed)
    for name, value in model.params.items():
        model.params[name] = (value + rng.normal(0.0, 0.3, value.shape)).astype(model.dtype)
    return model


def tiny(position: str, dtype: str = "float32", **kw) -> CharModel:
    config = {"d_model": 8, "n_heads": 2, "n_layers": 2, "d_mlp": 12, "max_length": 24, "seed": 1} | kw
    return perturbed(CharModel(7, position=position, dtype=dtype, **config))


def test_a_plugged_attention_gets_a_mask_on_a_one_token_step_too():
    """The engine's own one-token step skips the mask (one query at the end sees every key); a plug still gets it."""
    model = tiny("rope", "float64")
    tokens = np.random.default_rng(6).integers(0, 7, (1, 8))
    masks = []

    def attention(q, k, v, mask):
        masks.append(np.asarray(mask))
        return scaled_dot_product_attention(q, k, v, mask=mask)

    _, cache = model.prefill(tokens[:, :7])
    out = model.extend(cache, tokens[:, 7:], plugs=Plugs(attention=attention))
    assert len(masks) == model.n_layers and all(m.shape[-2:] == (1, 8) and m.all() for m in masks)
    np.testing.assert_allclose(out[:, 0], model.logits(tokens)[:, -1], rtol=0, atol=1e-10)


@pytest.mark.parametrize("batch, length", [(12, 12), (1, 2)])  # as many windows, then as many heads (2), as positions
def test_lessonlibs_own_attention_plugs_in_however_many_windows_and_heads(batch, length):
    """The plug's mask is (1, 1, L, S), never an (L, S) that lessonlib's attention must refuse as ambiguous."""
    model = tiny("rope", "float64")
    tokens = np.random.default_rng(7).integers(0, 7, (batch, length))  # (B, L)
    targets = np.roll(tokens, -1, axis=1)
    engine = model.loss(tokens, targets)
    for attention in (scaled_dot_product_attention, fast.scaled_dot_product_attention):
        for plugs in (Plugs(attention=attention), Plugs(attention=attention, causal_mask=causal_mask)):
            assert model.loss(tokens, targets, plugs=plugs) == pytest.approx(engine, abs=1e-12)


@pytest.mark.parametrize("position", POSITIONS)
def test_every_gradient_matches_finite_differences_in_float64(position):
    model = tiny(position, "float64", max_length=8)
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 7, (2, 6))  # (B, L)
    targets = rng.integers(-1, 7, (2, 6))  # (B, L), -1 = not scored
    targets[0, 0] = 3
    _, grads = model.loss_and_grads(tokens, targets)
    assert set(grads) == set(model.params)
    eps = 1e-6
    for name, p in model.params.items():
        numeric = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up = model.loss(tokens, targets)
            p[idx] = old - eps
            down = model.loss(tokens, targets)
            p[idx] = old
            numeric[idx] = (up - down) / (2 * eps)
        scale = np.linalg.norm(numeric) + np.linalg.norm(grads[name])
        assert scale > 0, f"{name}: no gradient at all, so the check would be empty"
        rel = np.linalg.norm(grads[name] - numeric) / scale
        assert rel < 1e-6, f"{position}: {name} relative error {rel:.2e}"


@pytest.mark.parametrize("position", POSITIONS)
def test_decoding_with_the_cache_gives_the_logits_of_full_recomputation(position):
    model = tiny(position)
    tokens = np.random.default_rng(3).integers(0, 7, (3, 20))  # (B, L)
    full = model.logits(tokens)  # (B, L, V)
    first, cache = model.prefill(tokens[:, :7])
    steps = [first] + [model.extend(cache, tokens[:, i:i + 1]) for i in range(7, 17)]
    steps.append(model.extend(cache, tokens[:, 17:]))  # several new tokens at once
    assert cache.length == 20
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-5)
    # float64 shows it is the same computation, not merely a close one
    model64 = tiny(position, "float64")
    _, cache = model64.prefill(tokens[:, :5])
    np.testing.assert_allclose(model64.extend(cache, tokens[:, 5:6])[:, 0], model64.logits(tokens[:, :6])[:, -1],
                               rtol=0, atol=1e-12)


def test_the_cache_writes_into_its_buffers_and_doubles_them_only_when_a_text_outgrows_them():
    model = tiny("alibi", "float64")
    tokens = np.random.default_rng(7).integers(0, 7, (2, 13))
    _, cache = model.prefill(tokens[:, :3], capacity=5)
    buffers = [b for b in cache.key_buffers]
    model.extend(cache, tokens[:, 3:4])
    model.extend(cache, tokens[:, 4:5])
    assert cache.capacity == 5 and all(a is b for a, b in zip(buffers, cache.key_buffers))  # written in place
    last = model.extend(cache, tokens[:, 5:])  # 8 more: the buffers double past 13
    assert cache.length == 13 and cache.capacity == 13 and cache.keys[0].shape == (2, 2, 13, 4)
    np.testing.assert_allclose(last, model.logits(tokens)[:, 5:], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="the cache holds 2 sequences but 1 were given"):
        model.extend(cache, tokens[:1, :1])


@pytest.mark.parametrize("position", POSITIONS)
def test_plugged_in_reference_functions_give_the_engines_loss(position):
    model = tiny(position, "float64")
    tokens = np.random.default_rng(4).integers(0, 7, (2, 12))
    targets = np.roll(tokens, -1, axis=1)
    engine = model.loss(tokens, targets)
    if position in BIAS_POSITIONS:
        plugs = Plugs(softmax=masked_softmax, causal_mask=causal_mask)
    else:
        def attention(q, k, v, mask):
            return scaled_dot_product_attention(q, k, v, mask=mask)

        plugs = Plugs(attention=attention, causal_mask=causal_mask)
    assert model.loss(tokens, targets, plugs=plugs) == pytest.approx(engine, abs=1e-12)
    position_fn = {"sinusoidal": sinusoidal_positions, "rope": rope, "alibi": alibi_slopes}.get(position)
    if position_fn is not None:
        assert model.loss(tokens, targets, plugs=Plugs(position=position_fn)) == pytest.approx(engine, abs=1e-12)


def test_a_plugged_cached_causal_mask_drives_decoding():
    model = tiny("rope", "float64")
    tokens = np.random.default_rng(5).integers(0, 7, (2, 9))

    def cached_causal_mask(lengths, n_queries):  # the new queries are the last n_queries of each row
        keys = np.arange(max(lengths))
        rows = np.arange(max(lengths) - n_queries, max(lengths))
        return np.broadcast_to(keys[None, :] <= rows[:, None], (len(lengths), n_queries, max(lengths)))

    _, cache = model.prefill(tokens[:, :6])
    out = model.extend(cache, tokens[:, 6:], plugs=Plugs(cached_causal_mask=cached_causal_mask))
    np.testing.assert_allclose(out, model.logits(tokens)[:, 6:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("position", POSITIONS)
def test_a_mask_that_lets_the_future_in_changes_the_loss_and_moves_earlier_logits(position):
    model = tiny(position, "float64")
    tokens = np.random.default_rng(6).integers(0, 7, (2, 10))
    targets = np.roll(tokens, -1, axis=1)
    leaky = Plugs(causal_mask=lambda n: np.ones((n, n), dtype=bool))
    assert abs(model.loss(tokens, targets, plugs=leaky) - model.loss(tokens, targets)) > 1e-3
    changed = tokens.copy()
    changed[:, 7:] = (changed[:, 7:] + 1) % 7
    honest = model.logits(tokens)[:, :7], model.logits(changed)[:, :7]
    np.testing.assert_array_equal(*honest)  # causal: the future does not move earlier logits
    leaked = model.logits(tokens, plugs=leaky)[:, :7], model.logits(changed, plugs=leaky)[:, :7]
    assert np.abs(leaked[0] - leaked[1]).max() > 1e-3


def test_errors_that_teach():
    model = tiny("alibi")
    tokens = np.zeros((1, 4), dtype=int)
    with pytest.raises(ValueError, match="adds a bias to the scores before the softmax.*softmax=your_masked_softmax"):
        model.logits(tokens, plugs=Plugs(attention=lambda q, k, v, mask: q))
    with pytest.raises(ValueError, match="has no position function to plug in"):
        tiny("learned").logits(tokens, plugs=Plugs(position=sinusoidal_positions))
    with pytest.raises(BeyondTableError, match="length 30 is beyond the learned position table, which has 24 rows"):
        tiny("learned").logits(np.zeros((1, 30), dtype=int))
    learned = tiny("learned")
    _, cache = learned.prefill(np.zeros((1, 24), dtype=int))
    with pytest.raises(BeyondTableError, match="length 25"):
        learned.extend(cache, np.zeros((1, 1), dtype=int))
    with pytest.raises(ValueError, match=r"token 7 is outside the vocabulary .* 7 ids \(0\.\.6\)"):
        model.logits(np.array([[1, 7]]))
    with pytest.raises(ValueError, match="unknown position mechanism 'rotary'"):
        CharModel(7, position="rotary")


def test_float32_by_default_and_float64_on_request():
    model = tiny("rope")
    tokens = np.random.default_rng(7).integers(0, 7, (2, 8))
    loss, grads = model.loss_and_grads(tokens, np.roll(tokens, -1, axis=1))
    assert model.logits(tokens).dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())
    assert isinstance(loss, float)
    assert tiny("rope", "float64").logits(tokens).dtype == np.float64


def test_save_and_load_round_trip_and_refuse_another_configuration(tmp_path):
    model = tiny("relative")
    path = tmp_path / "m.npz"
    model.save(path)
    again = CharModel.load(path, position="relative")
    tokens = np.random.default_rng(8).integers(0, 7, (1, 9))
    np.testing.assert_array_equal(again.logits(tokens), model.logits(tokens))
    with pytest.raises(CheckpointError, match="another configuration: position='relative' in the file"):
        CharModel.load(path, position="rope")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a lessonlib.training.CharModel checkpoint"):
        CharModel.load(tmp_path / "other.npz")


def test_gradients_under_a_mask_that_lets_the_future_in_match_finite_differences():
    model = tiny("rope", "float64", max_length=8)
    leaky = np.ones  # allowed everywhere: every key, past and future

    def mask(n):
        return leaky((n, n), dtype=bool)

    tokens = np.random.default_rng(9).integers(0, 7, (2, 6))
    targets = np.roll(tokens, -1, axis=1)
    loss, grads = model.loss_and_grads(tokens, targets, causal_mask=mask)
    assert loss == pytest.approx(model.loss(tokens, targets, plugs=Plugs(causal_mask=mask)), abs=1e-12)
    p = model.params["blocks.0.wq"]
    for idx in [(0, 0), (3, 5), (7, 2)]:
        old = p[idx]
        p[idx] = old + 1e-6
        up = model.loss(tokens, targets, plugs=Plugs(causal_mask=mask))
        p[idx] = old - 1e-6
        down = model.loss(tokens, targets, plugs=Plugs(causal_mask=mask))
        p[idx] = old
        assert grads["blocks.0.wq"][idx] == pytest.approx((up - down) / 2e-6, rel=1e-5, abs=1e-9)
