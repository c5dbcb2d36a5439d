"""Every public function refuses a bad argument before it computes (hypothesis).

For each function: valid arguments with one of them spoiled (tests/bad_inputs.py) must raise a
ValueError or TypeError, raised by a ``raise`` statement of lessonlib (not from inside NumPy),
whose message names the spoiled argument, and before any work: the call may allocate no more
than REFUSAL_BYTES, while the valid arguments are large enough that the work would allocate
several times that. The functions covered are every name of ``lessonlib.__all__`` and
``lessonlib.fast.__all__``, and every training and explorer function the notebooks call (read
from the notebooks themselves), with the methods of the models they use.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import linecache
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from helpers.bad_inputs import (
    BAD_CALLABLE,
    BAD_FLAG,
    BAD_OPTIONAL_CALLABLE,
    HUGE,
    Spec,
    bad_array,
    bad_choice,
    bad_ints,
    bad_mask,
    bad_real,
    floats,
    kwargs,
    length,
    one_of,
    spoilers,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lessonlib
import lessonlib as L
import lessonlib.fast as fast
from lessonlib.explorers import cost as cost_explorer
from lessonlib.explorers import generation, interpretation, masking, scaling
from lessonlib.explorers import position as position_explorer
from lessonlib.explorers import training as training_explorer
from lessonlib.training import (
    TASKS,
    AttentionModel,
    CharModel,
    CopyBack,
    Plugs,
    accuracy,
    catalog,
    lm_catalog,
    predictions,
    train,
)
from lessonlib.training.layers import gelu
from lessonlib.training.sampling import generate, sample_next
from lessonlib.training.tasks import Mode
from lessonlib.training.text import Vocabulary
from lessonlib.training.text import load as load_text

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(lessonlib.__file__).resolve().parent
# What a refusal may allocate: its message and one boolean scan of an input (a byte per entry), no more. The
# valid arguments below are sized so that the work would allocate several times this.
REFUSAL_BYTES = 512 << 10

rng = np.random.default_rng(0)
SMALL_MODEL = AttentionModel(16, d_model=8, n_heads=2, max_length=64)
SMALL_LM = CharModel(65, d_model=8, n_heads=2, n_layers=1, d_mlp=8, position="rope", max_length=64)
TABLE = L.LearnedPositions(64, 8)
PARAMS = L.init_multi_head(16, 4)
POSITION_MODEL = position_explorer.make_model(8, 2)
EXAMPLE = interpretation.make_example()
VOCAB = Vocabulary("abc")
load_text()  # read once here: the text is data every call shares, not work of the call being refused


def tokens(batch: int = 2, n: int = 8, vocab: int = 16) -> st.SearchStrategy:
    return st.builds(lambda seed: np.random.default_rng(seed).integers(0, vocab, (batch, n)), st.integers(0, 999))


def bad_tokens(name: str, vocab: int) -> object:
    """Token arrays a model refuses: not integers, the wrong shape, empty, ids outside the vocabulary."""
    return spoilers(lambda kw: None, lambda kw: kw[name].astype(float), lambda kw: kw[name][0],
                    lambda kw: kw[name][:, :0], lambda kw: kw[name] + vocab, lambda kw: kw[name] - vocab,
                    lambda kw: kw[name].astype(str), lambda kw: kw[name].astype(complex))


def softmax_rows(kw_shape):
    return st.builds(lambda x: L.softmax(x), kw_shape)


def qkv(batch: tuple = (), low: int = 200, high: int = 400, d: int = 16) -> st.SearchStrategy:
    """Consistent query (L, d), key (S, d) and value (S, d_v) with L, S in [low, high]."""
    return st.integers(low, high).flatmap(lambda n_q: st.integers(low, high).flatmap(lambda n_k: kwargs(
        query=floats(*batch, n_q, d), key=floats(*batch, n_k, d), value=floats(*batch, n_k, 8))))


def spoil_qkv(*, value: bool = True) -> dict:
    """Bad query, key, value and scale, with widths that disagree and keys without values among them."""
    bad = {
        "query": bad_array("query", extra=(lambda kw: kw["query"][:, :5],)),
        "key": bad_array("key", extra=(lambda kw: kw["key"][0], lambda kw: kw["key"][:, :5])),
        "scale": bad_real(none_ok=True),
    }
    if value:
        bad["value"] = bad_array("value", extra=(lambda kw: kw["value"][:-1],), fewer_axes=False)
    return bad


def mask_for(kw_strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Add a boolean (L, S) mask with at least one allowed key per row to query/key/value arguments."""
    def add(kw):
        n_q, n_k = kw["query"].shape[-2], kw["key"].shape[-2]
        return {**kw, "mask": L.causal_mask(n_q, n_k, align="bottom-right")}
    return kw_strategy.map(add)


SETTINGS_BAD = one_of(None, {"d_k": 4}, "settings", 3)


# --- the specs -------------------------------------------------------------------------------------

SPECS: dict[str, Spec] = {}


def spec(name: str, call, valid, bad: dict, **labels: str) -> None:
    SPECS[name] = Spec(call, valid, bad, labels)


# attention
_x = st.integers(300, 500).flatmap(lambda n: floats(n, n))
spec("softmax", L.softmax, kwargs(x=_x, axis=-1),
     {"x": bad_array("x", neg_inf_ok=True), "axis": one_of(2, -3, 1.5, None, "0")})
spec("attention_entropy", L.attention_entropy, kwargs(weights=softmax_rows(_x)),
     {"weights": bad_array("weights", extra=(lambda kw: kw["weights"] * 2, lambda kw: kw["weights"] - 0.1))})
spec("attention_scores", L.attention_scores,
     qkv().map(lambda kw: {"query": kw["query"], "key": kw["key"], "scale": None}), spoil_qkv(value=False))
spec("masked_softmax", L.masked_softmax,
     _x.map(lambda x: {"scores": x, "allowed": L.causal_mask(*x.shape), "fully_masked": "zeros"}),
     {"scores": bad_array("scores"), "allowed": bad_mask("allowed"), "fully_masked": bad_choice("ignore")})
spec("scaled_dot_product_attention", L.scaled_dot_product_attention,
     mask_for(qkv()).map(lambda kw: {**kw, "scale": None, "fully_masked": "zeros"}),
     {**spoil_qkv(), "mask": bad_mask("mask"), "fully_masked": bad_choice("ignore")})
spec("multi_head_attention", L.multi_head_attention,
     st.integers(200, 400).flatmap(lambda n: kwargs(x_query=floats(n, 16), x_kv=floats(n, 16), params=PARAMS,
                                                    mask=L.causal_mask(n), fully_masked="zeros")),
     {"x_query": bad_array("x_query", extra=(lambda kw: kw["x_query"][:, :5],)),
      "x_kv": bad_array("x_kv", none_ok=True, extra=(lambda kw: kw["x_kv"][:, :5],)),
      "params": one_of(None, {"w_q": 1}, (1, 2)), "mask": bad_mask("mask"), "fully_masked": bad_choice()})
spec("init_multi_head", L.init_multi_head,
     kwargs(d_model=st.sampled_from([512, 768]), n_heads=st.sampled_from([4, 8]), d_kv_in=None, d_head=None, rng=None),
     {"d_model": bad_ints(huge=True), "n_heads": bad_ints(huge=True, extra=(5,)),
      "d_kv_in": bad_ints(huge=True, none_ok=True), "d_head": bad_ints(huge=True, none_ok=True),
      "rng": one_of(3, "rng", np.random.RandomState(0))})
spec("MultiHeadParams", L.MultiHeadParams,
     st.just({"w_q": PARAMS.w_q, "w_k": PARAMS.w_k, "w_v": PARAMS.w_v, "w_o": PARAMS.w_o, "n_heads": 4}),
     {**{w: bad_array(w, extra=(lambda kw, w=w: kw[w][:, :6],)) for w in ("w_q", "w_k", "w_v")},
      "w_o": bad_array("w_o", extra=(lambda kw: kw["w_o"][:6],)), "n_heads": bad_ints(extra=(3,))})
spec("split_heads", L.split_heads,
     st.integers(1000, 2000).flatmap(lambda n: kwargs(x=floats(n, 64), n_heads=st.sampled_from([2, 4, 8]))),
     {"x": bad_array("x", finite=False, bools=True, extra=(lambda kw: kw["x"][0],)),
      "n_heads": bad_ints(extra=(3, 7))})
spec("merge_heads", L.merge_heads, st.integers(1000, 2000).flatmap(lambda n: kwargs(x=floats(4, n, 16))),
     {"x": bad_array("x", finite=False, bools=True, extra=(lambda kw: kw["x"][0],))})

# cost
spec("tiled_attention", L.tiled_attention,
     qkv(low=300, high=600).map(lambda kw: {**kw, "block_size": 128, "causal": False, "align": None, "scale": None}),
     {**spoil_qkv(), "block_size": bad_ints(), "causal": BAD_FLAG, "align": bad_choice("sideways", none_ok=True)})
spec("score_matrix_bytes", L.score_matrix_bytes,
     kwargs(batch=2, heads=8, n_queries=1024, n_keys=None, dtype="float32"),
     {"batch": bad_ints(), "heads": bad_ints(), "n_queries": bad_ints(), "n_keys": bad_ints(none_ok=True),
      "dtype": one_of(None, "float17", "U10", object, 3.5)})
spec("dtype_bytes", L.dtype_bytes, kwargs(dtype="float16"), {"dtype": one_of(None, "float17", "U10", object, 3.5)})
spec("measure", L.measure, kwargs(fn=lambda: np.ones(1 << 20), repeat=1, warmup=0),
     {"fn": BAD_CALLABLE, "repeat": bad_ints(), "warmup": bad_ints(minimum=0)})
spec("loglog_slope", L.loglog_slope, kwargs(sizes=np.array([64.0, 128.0, 256.0]), values=np.array([1.0, 4.0, 16.0])),
     {"sizes": bad_array("sizes", extra=(np.array([2.0, 2.0, 2.0]), np.array([0.0, 1.0, 2.0]), np.ones((3, 1)),
                                          np.array([1.0, 2.0]))),
      "values": bad_array("values", extra=(np.array([-1.0, 1.0, 2.0]), np.array([1.0, 2.0])))})

# masks
_n = length(400, 800)
_pair = _n.flatmap(lambda n: st.integers(400, 800).map(lambda s: (n, s)))
spec("causal_mask", L.causal_mask, _pair.map(lambda p: {"n_queries": p[0], "n_keys": p[1], "align": "bottom-right"}),
     {"n_queries": bad_ints(huge=True), "n_keys": bad_ints(huge=True, none_ok=True),
      "align": bad_choice("sideways", "", none_ok=True)})
spec("sliding_window_mask", L.sliding_window_mask,
     _pair.map(lambda p: {"n_queries": p[0], "n_keys": p[1], "window": 8, "causal": True, "align": "top-left"}),
     {"n_queries": bad_ints(huge=True), "n_keys": bad_ints(huge=True, none_ok=True), "window": bad_ints(),
      "causal": BAD_FLAG, "align": bad_choice(none_ok=True)})
spec("key_offsets", L.key_offsets,
     _pair.map(lambda p: {"n_queries": p[0], "n_keys": p[1], "align": "top-left", "what": "mask"}),
     {"n_queries": bad_ints(huge=True), "n_keys": bad_ints(huge=True, none_ok=True), "align": bad_choice(none_ok=True),
      "what": one_of(3, None)})
spec("padding_mask", L.padding_mask,
     st.integers(200, 400).flatmap(lambda b: st.builds(
         lambda seed, m: {"lengths": np.random.default_rng(seed).integers(0, m + 1, b), "max_length": m},
         st.integers(0, 999), st.integers(1000, 2000))),
     {"lengths": bad_array("lengths", finite=False, extra=(lambda kw: kw["lengths"].astype(float),
                                                           lambda kw: kw["lengths"][None],
                                                           lambda kw: kw["lengths"] - 10**6,
                                                           lambda kw: kw["lengths"] + 10**6)),
      "max_length": bad_ints(huge=True)})
spec("combine_masks", L.combine_masks,
     st.integers(300, 600).flatmap(lambda n: st.just({"structure": L.causal_mask(n),
                                                      "key_padding": L.padding_mask(np.full(8, n // 2), n),
                                                      "heads": False})),
     {"structure": bad_mask("structure"), "key_padding": bad_mask("key_padding"), "heads": BAD_FLAG})

# position
spec("sinusoidal_positions", L.sinusoidal_positions,
     kwargs(n_positions=length(2000, 4000), d_model=64, base=10000.0),
     {"n_positions": bad_ints(huge=True), "d_model": bad_ints(huge=True), "base": bad_real(positive=True)})
spec("LearnedPositions", L.LearnedPositions, kwargs(max_positions=length(1000, 2000), d_model=64, rng=None, std=0.02),
     {"max_positions": bad_ints(huge=True), "d_model": bad_ints(huge=True), "rng": one_of(3, "rng"),
      "std": bad_real(minimum=0.0)})
spec("LearnedPositions.__call__", TABLE, kwargs(positions=st.builds(lambda n: np.arange(n) % 64, length(1000, 2000))),
     {"positions": bad_array("positions", finite=False, fewer_axes=False, extra=(lambda kw: kw["positions"] + 64,
                                                               lambda kw: kw["positions"] - 64,
                                                               lambda kw: kw["positions"].astype(float)))})
spec("rope", L.rope,
     length(2000, 4000).flatmap(lambda n: kwargs(x=floats(n, 32), positions=np.arange(n), base=10000.0,
                                                pairing="interleaved")),
     {"x": bad_array("x", extra=(lambda kw: kw["x"][:, :31], lambda kw: kw["x"][0])),
      "positions": bad_array("positions", fewer_axes=False, extra=(lambda kw: kw["positions"][:-1],)),
      "base": bad_real(positive=True), "pairing": bad_choice("split")})
spec("alibi_slopes", L.alibi_slopes, kwargs(n_heads=st.integers(1, 64)), {"n_heads": bad_ints(huge=True)})
spec("alibi_bias", L.alibi_bias, kwargs(n_queries=length(), n_keys=length(), n_heads=st.integers(2, 8),
                                        align="bottom-right"),
     {"n_queries": bad_ints(huge=True), "n_keys": bad_ints(huge=True, none_ok=True), "n_heads": bad_ints(huge=True),
      "align": bad_choice(none_ok=True)})
spec("relative_position_bucket", L.relative_position_bucket,
     length().flatmap(lambda n: kwargs(relative_position=L.key_offsets(n), bidirectional=st.booleans(), n_buckets=32,
                                       max_distance=128)),
     {"relative_position": bad_array("relative_position", finite=False, fewer_axes=False,
                                     extra=(lambda kw: kw["relative_position"].astype(float),)),
      "bidirectional": BAD_FLAG,
      "n_buckets": lambda kw: bad_ints(minimum=4 if kw["bidirectional"] else 2)(kw),
      "max_distance": lambda kw: st.sampled_from([None, 2.5, 0, 1, 8 if kw["bidirectional"] else 16])})
spec("relative_position_bias", L.relative_position_bias,
     kwargs(n_queries=length(), n_keys=length(), bucket_bias=floats(32, 4), bidirectional=True, max_distance=128,
            align="bottom-right"),
     {"n_queries": bad_ints(huge=True), "n_keys": bad_ints(huge=True, none_ok=True),  # None: as many as queries
      "bucket_bias": bad_array("bucket_bias", extra=(lambda kw: kw["bucket_bias"][:, 0],)),
      "bidirectional": BAD_FLAG, "max_distance": one_of(None, 0, 8, 2.5), "align": bad_choice(none_ok=True)})
spec("permute", L.permute,
     length(1000, 2000).flatmap(lambda n: kwargs(x=floats(n, 64), perm=st.builds(
         lambda seed: np.random.default_rng(seed).permutation(n), st.integers(0, 999)), axis=-2)),
     {"x": bad_array("x", finite=False, bools=True, fewer_axes=False),
      "perm": bad_array("perm", finite=False, extra=(lambda kw: kw["perm"][1:], lambda kw: kw["perm"] * 0,
                                                     lambda kw: kw["perm"][None])),
      "axis": one_of(2, -3, 1.5, None, "0")})
spec("inverse_permutation", L.inverse_permutation,
     kwargs(perm=st.builds(lambda seed: np.random.default_rng(seed).permutation(5000), st.integers(0, 999))),
     {"perm": bad_array("perm", finite=False, extra=(lambda kw: kw["perm"] * 0, lambda kw: kw["perm"][None],
                                                     lambda kw: kw["perm"] + 1))})


def _lessonlib_attention(query, key, value, *, mask=None, causal=False):
    if causal:
        mask = L.causal_mask(len(query), len(key), align="top-left")
    return L.scaled_dot_product_attention(query, key, value, mask=mask).output


spec("probe_mask_semantics", L.probe_mask_semantics,
     kwargs(attention_fn=_lessonlib_attention, key_only=False, atol=1e-3),
     {"attention_fn": BAD_CALLABLE, "key_only": BAD_FLAG, "atol": bad_real(positive=True)})

# lessonlib.fast
SPECS["fast.softmax"] = SPECS["softmax"]  # the reference's own function
SPECS["fast.tiled_attention"] = SPECS["tiled_attention"]
spec("fast.masked_softmax", fast.masked_softmax, SPECS["masked_softmax"].valid, SPECS["masked_softmax"].bad)
spec("fast.scaled_dot_product_attention", fast.scaled_dot_product_attention,
     SPECS["scaled_dot_product_attention"].valid.map(lambda kw: {**kw, "need_weights": True}),
     {**SPECS["scaled_dot_product_attention"].bad, "need_weights": BAD_FLAG})
spec("fast.set_num_threads", fast.set_num_threads, kwargs(num_threads=None), {"num_threads": bad_ints(none_ok=True)})
spec("fast.blocks_pay", fast.blocks_pay, kwargs(matrix_bytes=1 << 30, keep_weights=False),
     {"matrix_bytes": bad_ints(minimum=0), "keep_weights": BAD_FLAG})
spec("fast.row_blocks", fast.row_blocks, kwargs(shape=(4, 4096, 4096), itemsize=4),
     {"shape": one_of(None, (5,), [64, 64], (0, 64), (2.5, 64), "shape"), "itemsize": bad_ints()},
     shape="shape")
spec("fast.run_blocks", fast.run_blocks, kwargs(work=lambda item: np.ones(1 << 20), items=list(range(4))),
     {"work": BAD_CALLABLE, "items": one_of(None, 3, {1, 2})})
spec("fast.scores_stay_finite", fast.scores_stay_finite,
     kwargs(scale=0.25, query_squares=100.0, key_squares=100.0, dtype=np.float32),
     {"scale": bad_real(), "query_squares": one_of(None, -1.0, float("nan"), "1"),
      "key_squares": one_of(None, -1.0, float("nan"), "1"), "dtype": one_of(None, "float17", np.int32)})

# training: the models and their methods
_model_args = dict(vocab_size=16, d_model=8, n_heads=2, n_layers=1, position="rope", causal=False, max_length=64,
                   seed=0)
spec("AttentionModel", AttentionModel, kwargs(**_model_args),
     {"vocab_size": bad_ints(minimum=2), "d_model": bad_ints(extra=(7,)), "n_heads": bad_ints(extra=(3,)),
      "n_layers": bad_ints(), "position": bad_choice("rotary"), "causal": BAD_FLAG, "max_length": bad_ints(),
      "seed": bad_ints(minimum=0)}, position="position mechanism")
for method in ("logits", "attention"):
    spec(f"AttentionModel.{method}", getattr(SMALL_MODEL, method), kwargs(tokens=tokens()),
         {"tokens": bad_tokens("tokens", 16)}, tokens="token")
spec("AttentionModel.logits_excluding", SMALL_MODEL.logits_excluding,
     kwargs(tokens=tokens(), exclude=np.zeros((1, 2, 2, 8, 8), bool)),
     {"tokens": bad_tokens("tokens", 16),
      "exclude": one_of(None, np.zeros((1, 2, 2, 8, 8)), np.zeros((2, 8, 8), bool))},
     tokens="token")
spec("AttentionModel.loss_and_grads", SMALL_MODEL.loss_and_grads,
     tokens().map(lambda t: {"tokens": t, "targets": np.roll(t, 1, axis=1)}),
     {"tokens": bad_tokens("tokens", 16),
      "targets": lambda kw: st.sampled_from([None, kw["targets"].astype(float), kw["targets"][0], kw["targets"] + 16,
                                             kw["targets"] * 0 - 1, kw["targets"] - 17])},
     tokens="token", targets="target")
_lm_args = dict(vocab_size=65, d_model=8, n_heads=2, n_layers=1, d_mlp=8, position="rope", max_length=64, seed=0,
                dtype="float32")
spec("CharModel", CharModel, kwargs(**_lm_args),
     {"vocab_size": bad_ints(minimum=2), "d_model": bad_ints(extra=(7,)), "n_heads": bad_ints(extra=(3,)),
      "n_layers": bad_ints(), "d_mlp": bad_ints(none_ok=True), "position": bad_choice("rotary"),
      "max_length": bad_ints(),
      "seed": bad_ints(minimum=0), "dtype": one_of(None, "float16", "int32", "float17")},
     position="position mechanism")
BAD_PLUGS = one_of("plugs", 3, {"attention": None})
for method in ("logits", "prefill"):
    spec(f"CharModel.{method}", getattr(SMALL_LM, method), kwargs(tokens=tokens(vocab=65), plugs=None),
         {"tokens": bad_tokens("tokens", 65), "plugs": BAD_PLUGS}, tokens="token")
spec("CharModel.attention", SMALL_LM.attention, kwargs(tokens=tokens(vocab=65)), {"tokens": bad_tokens("tokens", 65)},
     tokens="token")
spec("CharModel.extend", SMALL_LM.extend,
     kwargs(cache=st.builds(lambda t: SMALL_LM.prefill(t)[1], tokens(1, 4, 65)), tokens=tokens(1, 1, 65), plugs=None),
     {"cache": one_of(None, {}, "cache"), "tokens": bad_tokens("tokens", 65), "plugs": BAD_PLUGS}, tokens="token")
spec("CharModel.loss", SMALL_LM.loss, tokens(vocab=65).map(lambda t: {"tokens": t, "targets": t, "plugs": None}),
     {"tokens": bad_tokens("tokens", 65), "targets": one_of(None, np.zeros((2, 8)), np.full((2, 8), 65), "t"),
      "plugs": BAD_PLUGS}, tokens="token")
spec("CharModel.loss_and_grads", SMALL_LM.loss_and_grads,
     tokens(vocab=65).map(lambda t: {"tokens": t, "targets": t, "causal_mask": None}),
     {"tokens": bad_tokens("tokens", 65), "targets": one_of(None, np.zeros((2, 8)), np.full((2, 8), 65)),
      "causal_mask": BAD_OPTIONAL_CALLABLE}, tokens="token")
spec("Plugs", Plugs, kwargs(attention=None, softmax=None, causal_mask=None, cached_causal_mask=None, position=None),
     {name: BAD_OPTIONAL_CALLABLE
      for name in ("attention", "softmax", "causal_mask", "cached_causal_mask", "position")})

spec("layers.gelu", gelu, kwargs(x=_x), {"x": bad_array("x", fewer_axes=False)})

# training: tasks, the loop, sampling, the catalogues, the text
spec("CopyBack", CopyBack, kwargs(vocab_size=16, k=1), {"vocab_size": bad_ints(minimum=2), "k": bad_ints()})
spec("Mode", Mode, kwargs(vocab_size=8), {"vocab_size": bad_ints(minimum=2)})
for task_name in ("previous", "mode"):
    spec(f"{type(TASKS[task_name]).__name__}.sample", TASKS[task_name].sample,
         kwargs(batch=st.integers(1000, 2000), length=64, rng=np.random.default_rng(0)),
         {"batch": bad_ints(), "length": bad_ints(), "rng": one_of(None, 3, "rng")})
_loop = dict(model=SMALL_MODEL, task=TASKS["previous"])
BAD_MODEL = one_of(None, "model", 3)
BAD_TASK = one_of(None, "previous", 3)
spec("train", train, kwargs(**_loop, steps=2, batch_size=64, length=16, lr=3e-3, seed=0, progress=False, callback=None),
     {"model": BAD_MODEL, "task": BAD_TASK, "steps": bad_ints(), "batch_size": bad_ints(), "length": bad_ints(),
      "lr": bad_real(positive=True), "seed": bad_ints(minimum=0), "progress": BAD_FLAG, "callback": one_of(3, "f")})
spec("accuracy", accuracy, kwargs(**_loop, length=16, n=512, seed=0),
     {"model": BAD_MODEL, "task": BAD_TASK, "length": bad_ints(), "n": bad_ints(), "seed": bad_ints(minimum=0)})
spec("predictions", predictions, kwargs(**_loop, length=16, n=512, seed=0, batch=128),
     {"model": BAD_MODEL, "task": BAD_TASK, "length": bad_ints(), "n": bad_ints(), "seed": bad_ints(minimum=0),
      "batch": bad_ints()})
spec("sample_next", sample_next, kwargs(logits=floats(65), temperature=0.8, rng=np.random.default_rng(0)),
     {"logits": bad_array("logits", extra=(np.ones((2, 65)),)), "temperature": bad_real(minimum=0.0),
      "rng": one_of(None, 3)})
spec("generate", generate,
     kwargs(model=SMALL_LM, prompt=np.arange(7), n_new=500, temperature=0.8, seed=0, window=None, use_cache=True),
     {"model": BAD_MODEL, "prompt": lambda kw: st.sampled_from([None, [], [1.7, 2.2], np.arange(6).reshape(2, 3),
                                                               [65], [-1], "ROMEO"]),
      "n_new": bad_ints(minimum=0), "temperature": bad_real(minimum=0.0), "seed": bad_ints(minimum=0),
      "window": one_of(1, 0, 2.5, "64"), "use_cache": BAD_FLAG})
spec("catalog.load", catalog.load, kwargs(name="previous_rope"), {"name": bad_choice("previous_rotary", ["x"])})
spec("catalog.evaluate", catalog.evaluate, kwargs(model=SMALL_MODEL, task="previous"),
     {"model": BAD_MODEL, "task": bad_choice("next")})
for function in ("stored", "build"):
    spec(f"lm_catalog.{function}", getattr(lm_catalog, function), kwargs(position="rope"),
         {"position": bad_choice("rotary", ["rope"])}, position="position mechanism")
spec("lm_catalog.validation_loss", lm_catalog.validation_loss,
     kwargs(model=SMALL_LM, length=64, n_chars=32768, plugs=None),
     {"model": BAD_MODEL, "length": bad_ints(extra=(100,)), "n_chars": bad_ints(extra=(10**7,)), "plugs": BAD_PLUGS})
spec("lm_catalog.windows", lm_catalog.windows, kwargs(ids=np.arange(1000) % 65, starts=np.array([0, 100]), length=64),
     {"ids": one_of(None, "ids", np.ones(1000), np.arange(6).reshape(2, 3)),
      "starts": one_of(None, np.array([0.5]), np.array([-1]), np.array([10**6]), np.zeros((2, 2), dtype=int)),
      "length": bad_ints(extra=(10**6,))})
spec("lm_catalog.context_use", lm_catalog.context_use, kwargs(model=SMALL_LM, length=256, near=128, n_chars=256),
     {"model": BAD_MODEL, "length": bad_ints(extra=(100,)), "near": bad_ints(extra=(32, 256)),
      "n_chars": bad_ints(extra=(300,))})
spec("lm_catalog.length_table", lm_catalog.length_table, kwargs(models={"small": SMALL_LM}, factors=(1, 2)),
     {"models": one_of("models", {"small": "model"}, [SMALL_LM]), "factors": one_of(None, (), (1.5,), (0,), [1, 2])},
     factors="factors")
spec("lm_catalog.train_briefly", lm_catalog.train_briefly,
     kwargs(position="rope", steps=50, causal_mask=None, batch_size=32, progress=False),
     {"position": bad_choice("rotary"), "steps": bad_ints(), "causal_mask": BAD_OPTIONAL_CALLABLE,
      "batch_size": bad_ints(),
      "progress": BAD_FLAG}, position="position mechanism")
spec("lm_catalog.generate_text", lm_catalog.generate_text,
     kwargs(position="rope", prompt="ROMEO:\n", n_chars=500, temperature=0.8, seed=0, use_cache=True),
     {"position": bad_choice("rotary"), "prompt": one_of(None, 3, ["R"]), "n_chars": bad_ints(minimum=0),
      "temperature": bad_real(minimum=0.0), "seed": bad_ints(minimum=0), "use_cache": BAD_FLAG},
     position="position mechanism")
spec("Vocabulary.encode", VOCAB.encode, kwargs(text="abcabc" * 20000), {"text": one_of(None, 3, ["a"], "abz", b"ab")})
spec("Vocabulary.decode", VOCAB.decode, kwargs(ids=st.builds(lambda n: np.arange(n) % 3, length(20000, 40000))),
     {"ids": one_of(None, np.array([0.5, 1.0]), np.array([3]), np.array([-1]), np.array(["a"]))}, ids="id")

# explorers: settings, compute, describe, show, and the helpers the notebooks call
_EXPLORERS = {"scaling": scaling, "masking": masking, "position": position_explorer, "cost": cost_explorer,
              "interpretation": interpretation, "training": training_explorer, "generation": generation}
_SETTINGS_BAD = {
    "scaling": {"d_k": bad_ints(huge=True), "scaled": BAD_FLAG, "entry_std": bad_real(positive=True),
                "n_keys": bad_ints(huge=True), "n_samples": bad_ints(huge=True), "seed": bad_ints(minimum=0)},
    "masking": {"allowed": one_of(None, ((1.0, 0.0),), ((True, False),), ()), "order": bad_choice(),
                "dtype": bad_choice("bfloat16"), "fill": bad_choice("-1e99"),
                "scores": one_of(None, ((float("nan"),) * 4,) * 4, (("a",) * 4,) * 4, ((1.0,) * 3,) * 4)},
    "position": {"mechanism": bad_choice(), "shuffle": bad_ints(minimum=0), "offset": bad_ints(minimum=0),
                 "causal": BAD_FLAG, "n_tokens": bad_ints(huge=True), "d_model": bad_ints(extra=(15,)),
                 "n_heads": bad_ints(extra=(3,)), "max_positions": bad_ints(), "seed": bad_ints(minimum=0)},
    "cost": {"n": bad_ints(), "heads": bad_ints(), "batch": bad_ints(), "dtype": bad_choice("int8"),
             "measure": BAD_FLAG, "max_measured_n": bad_ints(), "d_head": bad_ints()},
    "interpretation": {"key": one_of(-1, interpretation.N_KEYS, 1.5, None), "scale": bad_real(),
                       "shift": bad_real(), "exclude": BAD_FLAG, "seed": bad_ints(minimum=0)},
    "training": {"model": bad_choice("rope, causal"), "length": one_of(17, 0, 16.0, None, "16")},
    "generation": {"mechanism": bad_choice("rotary"), "temperature": bad_real(minimum=0.0),
                   "prompt": one_of(None, 3, ["R"]), "length": bad_ints(), "seed": bad_ints(minimum=0)},
}
_SETTINGS_LABELS = {"generation": {"mechanism": "position mechanism"}}
for _name, _module in _EXPLORERS.items():
    _defaults = {f.name: getattr(_module.Settings(), f.name) for f in _module.Settings.__dataclass_fields__.values()}
    spec(f"{_name}.Settings", _module.Settings, kwargs(**_defaults), _SETTINGS_BAD[_name],
         **_SETTINGS_LABELS.get(_name, {}))
    spec(f"{_name}.compute", _module.compute, kwargs(settings=_module.Settings()), {"settings": SETTINGS_BAD})
    spec(f"{_name}.describe", _module.describe, kwargs(result=None), {"result": one_of(None, "result", 3)})
    spec(f"{_name}.show", _module.show, kwargs(settings=_module.Settings()), {"settings": SETTINGS_BAD})
SPECS["cost.compute"].bad.update(cache=one_of([], "cache"), new_points=bad_ints(minimum=0))
SPECS["cost.compute"] = Spec(cost_explorer.compute, kwargs(settings=cost_explorer.Settings(), cache={}, new_points=0),
                             SPECS["cost.compute"].bad)

spec("masking.preset", masking.preset, kwargs(name="both", size=length(1000, 2000), length=2),
     {"name": bad_choice("future"), "size": bad_ints(huge=True), "length": bad_ints(minimum=0, extra=(HUGE,))})
spec("masking.fill_value", masking.fill_value, kwargs(fill="-1e9", dtype="float16"),
     {"fill": bad_choice("-1e99"), "dtype": one_of(None, "int8", "float17")})
_grid = length().flatmap(lambda n: kwargs(scores=floats(n, n), allowed=st.just(L.causal_mask(n))))
spec("masking.fill_then_softmax", masking.fill_then_softmax, _grid.map(lambda kw: {**kw, "fill": -1e9}),
     {"scores": bad_array("scores"), "allowed": bad_mask("allowed"), "fill": one_of(None, float("nan"), np.inf, "x")})
spec("masking.softmax_then_zero", masking.softmax_then_zero, _grid.map(lambda kw: {**kw, "renormalise": True}),
     {"scores": bad_array("scores"), "allowed": bad_mask("allowed"), "renormalise": BAD_FLAG})
spec("position.make_model", position_explorer.make_model,
     kwargs(d_model=8, n_heads=2, max_positions=64, n_buckets=32, seed=0),
     {"d_model": bad_ints(huge=True, extra=(9,)), "n_heads": bad_ints(extra=(3,)),
      "max_positions": bad_ints(huge=True), "n_buckets": bad_ints(minimum=4), "seed": bad_ints(minimum=0)})
spec("position.PositionModel", position_explorer.PositionModel,
     st.just({"params": POSITION_MODEL.params, "learned": POSITION_MODEL.learned,
              "bucket_bias": POSITION_MODEL.bucket_bias, "max_distance": 128}),
     {"params": one_of(None, "params"), "learned": one_of(None, TABLE.table),
      "bucket_bias": bad_array("bucket_bias", extra=(np.zeros((32, 5)),)), "max_distance": bad_ints()})
spec("position.self_attention", position_explorer.self_attention,
     length(300, 600).flatmap(lambda n: kwargs(x=floats(n, 8), model=POSITION_MODEL, mechanism="rope", offset=0,
                                              causal=True, queries=None, pairing="interleaved")),
     {"x": bad_array("x", extra=(lambda kw: kw["x"][:, :4],)), "model": one_of(None, PARAMS, "model"),
      "mechanism": bad_choice("rotary"), "offset": bad_ints(minimum=0), "causal": BAD_FLAG,
      "queries": one_of(np.array([0.5]), np.array([-1]), np.array([10**6]), "q", np.zeros((0,), int)),
      "pairing": bad_choice()})
spec("cost.longest_fitting_length", cost_explorer.longest_fitting_length,
     kwargs(memory_bytes=16 << 30, batch=1, heads=8, dtype="float32"),
     {"memory_bytes": bad_ints(minimum=0), "batch": bad_ints(), "heads": bad_ints(), "dtype": one_of(None, "float17")})
spec("cost.time_and_memory", cost_explorer.time_and_memory, kwargs(fn=lambda: np.ones(1 << 20), repeat=1),
     {"fn": BAD_CALLABLE, "repeat": bad_ints()})
spec("cost.format_bytes", cost_explorer.format_bytes, kwargs(n_bytes=1 << 30), {"n_bytes": bad_real(minimum=0.0)})
spec("interpretation.make_example", interpretation.make_example,
     kwargs(n_keys=6, d_k=4, d_v=3, seed=4, top_value="ignored-offset", quiet_key=2),
     {"n_keys": bad_ints(minimum=2), "d_k": bad_ints(), "d_v": bad_ints(minimum=2), "seed": bad_ints(minimum=0),
      "top_value": bad_choice(), "quiet_key": one_of(-1, 6, 1.5, None)})
spec("interpretation.exclusion_effects", interpretation.exclusion_effects, kwargs(example=EXAMPLE, values=None),
     {"example": one_of(None, "example", (1, 2)),
      "values": one_of("values", EXAMPLE.values[:, :2], EXAMPLE.values + 1j, np.full(EXAMPLE.values.shape, np.nan))})
spec("interpretation.spearman", interpretation.spearman,
     floats(length(20000, 40000)).map(lambda a: {"a": a, "b": a[::-1].copy()}),
     {"a": bad_array("a", extra=(lambda kw: kw["a"][:-1], np.ones(5))), "b": bad_array("b", extra=(np.ones(3),))})
spec("training.example_tokens", training_explorer.example_tokens, kwargs(length=16, seed=5),
     {"length": bad_ints(huge=True), "seed": bad_ints(minimum=0)})
spec("training.previous_token_head", training_explorer.previous_token_head, kwargs(model=SMALL_MODEL, layer=-1),
     {"model": BAD_MODEL, "layer": one_of(1, -2, 0.5, None, "0")})
spec("training.interpret", training_explorer.interpret,
     kwargs(model=SMALL_MODEL, tokens=np.arange(16)[None] % 16, query=3),
     {"model": BAD_MODEL, "tokens": lambda kw: st.sampled_from([None, kw["tokens"].astype(float), kw["tokens"][0],
                                                               np.vstack([kw["tokens"]] * 2), kw["tokens"] + 16]),
      "query": one_of(-1, 16, 1.5, None)}, tokens="token")

# Callables of the public surface that take no argument: nothing to refuse.
NO_INPUT = {"fast.get_num_threads", "fast.thread_info", "fast.available_cores", "fast.cache_bytes",
            "training.training_length_tokens", "text.load", "text.baselines"}
# Records the package returns and tables it holds; a learner reads them, never builds them.
RECORDS = {"AttentionResult", "MultiHeadResult", "TiledResult", "Measurement", "MaskConvention", "MaskSemantics",
           "fast.ThreadInfo"}
TYPES = {"Align", "Pairing", "FullyMasked"}  # Literal types, not callables
CONSTANTS = {"MASK_CONVENTIONS", "PRECISION_FACTS", "fast.BLOCK_BYTES"}


# --- the tests -------------------------------------------------------------------------------------


def _raise_site(error: BaseException) -> tuple[Path, str]:
    """The file and source line where ``error`` was raised (its innermost frame)."""
    frame = error.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    code = frame.tb_frame.f_code
    return Path(code.co_filename).resolve(), linecache.getline(code.co_filename, frame.tb_lineno).strip()


def assert_refused(call, arguments: dict, label: str) -> None:
    """``call(**arguments)`` raises ValueError or TypeError from a raise of lessonlib, naming ``label``, before work."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        with pytest.raises((ValueError, TypeError)) as refused:
            call(**arguments)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    where, line = _raise_site(refused.value)
    assert PACKAGE in where.parents, f"raised in {where} ({line}), not by lessonlib: {refused.value!r}"
    assert line.startswith("raise"), f"raised by {line!r} in {where.name}, not by a raise of lessonlib"
    assert label in str(refused.value), f"the message does not name {label!r}: {refused.value}"
    assert peak < REFUSAL_BYTES, f"{peak:,} bytes allocated before refusing: {refused.value}"


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_bad_argument_is_refused_before_work(name, data):
    spec_ = SPECS[name]
    arguments = dict(data.draw(spec_.valid, label="valid arguments"))
    spoiled = data.draw(st.sampled_from(sorted(spec_.bad)), label="spoiled argument")
    arguments[spoiled] = data.draw(spec_.bad[spoiled](arguments), label="bad value")
    assert_refused(spec_.call, arguments, spec_.label(spoiled))


def _notebook_calls() -> set[str]:
    """Training and explorer callables the notebooks use, as "module.name", read from their code cells."""
    found: set[str] = set()
    for path in sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("solutions/*.ipynb")]):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        source = "\n".join("".join(c["source"]) for c in cells)
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        names: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lessonlib"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    names[alias.asname or alias.name] = (getattr(module, alias.name, None)
                                                         or importlib.import_module(f"{node.module}.{alias.name}"))
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
                target = getattr(names[node.value.id], node.attr, None)
            elif isinstance(node, ast.Name) and node.id in names:
                target = names[node.id]
            module = getattr(target, "__module__", "") or ""
            if callable(target) and not inspect.ismodule(target) and module.startswith(
                    ("lessonlib.training", "lessonlib.explorers")):
                found.add(f"{module.rsplit('.', 1)[-1]}.{target.__qualname__}")
    return found


def _covered(qualified: str) -> bool:
    """Whether a "module.name" callable has a spec or takes no input, under that name or its bare name."""
    known = set(SPECS) | NO_INPUT
    return qualified in known or qualified.split(".", 1)[1] in known


def test_every_public_name_and_every_notebook_call_is_covered():
    public = set(L.__all__) | {f"fast.{n}" for n in fast.__all__}
    missing = sorted(public - set(SPECS) - NO_INPUT - RECORDS - TYPES - CONSTANTS)
    assert not missing, f"no bad-input spec for {missing}"
    calls = _notebook_calls()
    assert {"catalog.load", "sampling.generate", "masking.fill_then_softmax", "lm_catalog.validation_loss"} <= calls
    assert not [c for c in sorted(calls) if not _covered(c)]
