"""lessonlib.training: gradients against finite differences, bad input, determinism, checkpoints."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from lessonlib.training import (
    POSITIONS,
    TASKS,
    AttentionModel,
    BeyondTableError,
    CheckpointError,
    CopyBack,
    Mode,
    TrainingDiverged,
    accuracy,
    catalog,
    train,
)


def perturbed(model: AttentionModel, seed: int = 0) -> AttentionModel:
    """Move every parameter off its initial value, so zero-initialised biases get a gradient check too."""
    rng = np.random.default_rng(seed)
    for name, value in model.params.items():
        model.params[name] = value + rng.normal(0.0, 0.3, value.shape)
    return model


def numerical_grads(model: AttentionModel, tokens, targets, eps: float = 1e-6) -> dict[str, np.ndarray]:
    """Central differences (loss(p + eps) - loss(p - eps)) / 2 eps for every entry of every parameter."""
    out = {}
    for name, p in model.params.items():
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up, _ = model.loss_and_grads(tokens, targets)
            p[idx] = old - eps
            down, _ = model.loss_and_grads(tokens, targets)
            p[idx] = old
            g[idx] = (up - down) / (2 * eps)
        out[name] = g
    return out


@pytest.mark.parametrize(("position", "causal", "n_layers"),
                         list(itertools.product(POSITIONS, (False, True), (1, 2))))
def test_every_gradient_matches_finite_differences(position, causal, n_layers):
    model = perturbed(AttentionModel(5, d_model=4, n_heads=2, n_layers=n_layers, position=position, causal=causal,
                                     max_length=6, seed=1))
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 5, (2, 5))  # (B, L)
    targets = rng.integers(-1, 5, (2, 5))  # (B, L), some -1: not scored
    targets[0, 0] = 3
    _, grads = model.loss_and_grads(tokens, targets)
    assert set(grads) == set(model.params)
    numeric = numerical_grads(model, tokens, targets)
    for name in model.params:
        assert grads[name].shape == model.params[name].shape
        scale = np.linalg.norm(numeric[name]) + np.linalg.norm(grads[name])
        assert scale > 0, f"{name}: no gradient at all, so the check would be empty"
        rel = np.linalg.norm(grads[name] - numeric[name]) / scale
        assert rel < 1e-6, f"{position}, causal={causal}, {n_layers} layer(s): {name} relative error {rel:.2e}"


def test_masked_keys_get_exactly_zero_weight_and_zero_score_gradient():
    model = perturbed(AttentionModel(6, d_model=8, n_heads=2, position="relative", causal=True, seed=3))
    tokens = np.random.default_rng(0).integers(0, 6, (3, 7))
    weights = model.attention(tokens)[0]  # (B, H, L, L)
    future = ~np.tril(np.ones((7, 7), bool))
    assert np.all(weights[..., future] == 0.0)
    # buckets of future offsets are only reached by masked scores, so their bias gets no gradient
    _, grads = model.loss_and_grads(tokens, np.roll(tokens, 1, axis=1))
    from lessonlib import relative_position_bucket
    offsets = np.arange(7)[None, :] - np.arange(7)[:, None]
    future_only = set(relative_position_bucket(offsets[future], bidirectional=False).tolist()) - set(
        relative_position_bucket(offsets[~future], bidirectional=False).tolist())
    for bucket in future_only:
        assert np.all(grads["layers.0.rel_bias"][bucket] == 0.0)


def test_future_tokens_do_not_move_earlier_logits_under_the_causal_mask():
    model = perturbed(AttentionModel(6, d_model=8, n_heads=2, n_layers=2, position="rope", causal=True))
    tokens = np.random.default_rng(1).integers(0, 6, (1, 8))
    changed = tokens.copy()
    changed[0, 5:] = (changed[0, 5:] + 1) % 6
    np.testing.assert_array_equal(model.logits(tokens)[:, :5], model.logits(changed)[:, :5])


def test_without_position_or_mask_the_model_is_permutation_equivariant():
    model = perturbed(AttentionModel(6, d_model=8, n_heads=2, n_layers=2))
    tokens = np.random.default_rng(1).integers(0, 6, (1, 8))
    perm = np.random.default_rng(2).permutation(8)
    np.testing.assert_allclose(model.logits(tokens[:, perm]), model.logits(tokens)[:, perm], atol=1e-12)


def test_same_seed_gives_identical_losses_and_a_different_seed_does_not():
    runs = []
    for seed in (0, 0, 1):
        model = AttentionModel(16, d_model=8, n_heads=2, position="rope")
        runs.append(train(model, TASKS["previous"], steps=15, batch_size=8, length=8, seed=seed, progress=False))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    assert runs[0].shape == (15,)


def test_training_lowers_the_loss_and_accuracy_counts_scored_positions_only():
    model = AttentionModel(16, d_model=16, n_heads=2, position="learned", max_length=8)
    losses = train(model, TASKS["previous"], steps=120, batch_size=32, length=8, lr=1e-2, progress=False)
    assert losses[-10:].mean() < losses[:10].mean() - 1.0
    assert accuracy(model, TASKS["previous"], length=8, n=64) > 0.5

    class Perfect:  # a "model" whose logits are the targets themselves
        vocab_size, position, max_length = 16, "none", 64

        def logits(self, tokens):
            return np.eye(16)[np.roll(tokens, 1, axis=1)]

    # predictions() only calls .logits; the unscored first position (target -1) must not count
    from lessonlib.training import predictions
    correct, scored = predictions(Perfect(), TASKS["previous"], length=6, n=10)
    assert scored.sum() == 10 * 5 and correct.sum() == 10 * 5


def test_progress_bar_is_silent_when_off_and_shown_when_on(capsys):
    model = AttentionModel(16, d_model=8, n_heads=2)
    train(model, TASKS["previous"], steps=3, batch_size=4, length=4, progress=False)
    assert capsys.readouterr().err == ""
    train(model, TASKS["previous"], steps=3, batch_size=4, length=4, progress=True)
    assert "3/3" in capsys.readouterr().err


def test_tasks_follow_the_protocol():
    rng = np.random.default_rng(0)
    tokens, targets = TASKS["copy_back_3"].sample(4, 10, rng)
    assert tokens.shape == targets.shape == (4, 10)
    assert np.all(targets[:, :3] == -1)
    np.testing.assert_array_equal(targets[:, 3:], tokens[:, :7])
    tokens, targets = Mode(vocab_size=4).sample(200, 9, rng)
    for row, target in zip(tokens, targets):
        counts = np.bincount(row, minlength=4)
        assert np.sum(counts == counts.max()) == 1, "the most frequent token must be unique"
        assert np.all(target == counts.argmax())


# --- Bad input: each error names what disagreed --------------------------------------------------


def test_tokens_outside_the_vocabulary_are_refused():
    model = AttentionModel(8)
    with pytest.raises(ValueError, match=r"token 8 is outside the vocabulary .* 8 ids \(0\.\.7\)"):
        model.logits(np.array([[1, 8, 2]]))
    with pytest.raises(ValueError, match="token -1"):
        model.logits(np.array([[1, -1]]))
    with pytest.raises(ValueError, match="uses 16 token ids but the model's vocabulary has only 8"):
        train(model, TASKS["previous"], steps=1, progress=False)


def test_a_length_beyond_the_learned_table_is_refused():
    model = AttentionModel(8, position="learned", max_length=16)
    with pytest.raises(BeyondTableError, match="length 20 is beyond the learned position table, which has 16 rows"):
        model.logits(np.zeros((1, 20), dtype=int))
    with pytest.raises(IndexError, match="16 rows"):
        accuracy(model, CopyBack(vocab_size=8), length=32, n=4)
    with pytest.raises(ValueError, match="16 rows"):
        train(model, CopyBack(vocab_size=8), steps=1, length=17, progress=False)


def test_targets_of_another_shape_are_refused():
    model = AttentionModel(8)
    with pytest.raises(ValueError, match=r"targets have shape \(1, 3\) but tokens have shape \(1, 4\)"):
        model.loss_and_grads(np.zeros((1, 4), dtype=int), np.zeros((1, 3), dtype=int))

    class Ragged:
        vocab_size = 8

        def sample(self, batch, length, rng):
            return np.zeros((batch, length), dtype=int), np.zeros((batch, length - 1), dtype=int)

    with pytest.raises(ValueError, match=r"Ragged.sample returned targets of shape \(2, 3\) but tokens of shape"):
        train(model, Ragged(), steps=1, batch_size=2, length=4, progress=False)


def test_an_unknown_position_name_is_refused():
    with pytest.raises(ValueError, match=r"unknown position mechanism 'rotary'; choose one of none, sinusoidal"):
        AttentionModel(8, position="rotary")


def test_a_task_without_vocab_size_or_sample_is_refused():
    class NoSample:
        vocab_size = 8

    class Nothing:
        pass

    model = AttentionModel(8)
    with pytest.raises(TypeError, match="NoSample is not a task: it has no sample"):
        train(model, NoSample(), steps=1, progress=False)
    with pytest.raises(TypeError, match="Nothing is not a task: it has no vocab_size and no sample"):
        accuracy(model, Nothing(), length=4)


def test_a_checkpoint_of_another_configuration_or_format_is_refused(tmp_path):
    model = AttentionModel(8, position="rope", n_heads=2, seed=4)
    path = tmp_path / "model.npz"
    model.save(path)
    again = AttentionModel.load(path, position="rope")
    assert again.config == model.config
    for name in model.params:
        np.testing.assert_array_equal(again.params[name], model.params[name])
    with pytest.raises(CheckpointError, match="another configuration: position='rope' in the file, 'alibi' expected"):
        AttentionModel.load(path, position="alibi")
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.zeros(3))
    with pytest.raises(CheckpointError, match="foreign.npz is not a lessonlib.training.AttentionModel checkpoint"):
        AttentionModel.load(foreign)
    text = tmp_path / "notes.npz"
    text.write_text("not numpy")
    with pytest.raises(CheckpointError, match="not a readable .npz checkpoint"):
        AttentionModel.load(text)
    # a file whose arrays do not fit the configuration it claims
    data = dict(np.load(path))
    data["param:embed"] = np.zeros((9, 32))
    bent = tmp_path / "bent.npz"
    np.savez(bent, **data)
    with pytest.raises(CheckpointError, match=r"parameter embed has shape \(9, 32\)"):
        AttentionModel.load(bent)
    header = json.loads(str(data["header"]))
    header["version"] = 99
    data["header"] = np.array(json.dumps(header))
    newer = tmp_path / "newer.npz"
    np.savez(newer, **data)
    with pytest.raises(CheckpointError, match="format version 99"):
        AttentionModel.load(newer)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_run_stops_with_the_step_and_a_learning_rate_hint():
    model = AttentionModel(16, d_model=8, n_heads=2)
    model.params["unembed"][:] = 1e308  # the logits overflow on the first step
    with pytest.raises(TrainingDiverged, match=r"at step 0 of 5 \(learning rate 0.003\).*try a smaller learning rate"):
        train(model, TASKS["previous"], steps=5, batch_size=4, length=4, progress=False)


# --- Stored checkpoints ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [s.name for s in catalog.SPECS])
def test_each_stored_checkpoint_scores_what_was_recorded_beside_it(name):
    recorded = catalog.recorded()[name]
    model = catalog.load(name)
    task = catalog.spec(name).task
    for length, value in recorded["accuracy"].items():
        if value is None:
            with pytest.raises(BeyondTableError):
                accuracy(model, TASKS[task], length=int(length), n=catalog.EVAL_SEQUENCES)
        else:
            assert accuracy(model, TASKS[task], length=int(length), n=catalog.EVAL_SEQUENCES) == pytest.approx(
                value, abs=1e-12), f"{name} at length {length}"


def test_a_callback_can_stop_training_early():
    model = AttentionModel(16, d_model=8, n_heads=2)
    seen = []
    losses = train(model, TASKS["previous"], steps=50, batch_size=4, length=4, progress=False,
                   callback=lambda step, loss: seen.append(loss) or step == 9)
    assert losses.shape == (10,)
    np.testing.assert_array_equal(losses, seen)


def test_notebook_06_measures_its_accuracies_instead_of_reading_the_recorded_ones():
    notebook = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "06_training.ipynb").read_text())
    code = "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")
    assert "recorded(" not in code and "accuracies.json" not in code, (
        "notebook 06 reads the accuracies written by `make train`; it should measure them on the checkpoints")
    assert "catalog.evaluate(" in code and "accuracy(" in code
