"""What issue 40 saw when the public functions were called as a new user would, one test per finding.

Each test repeats a call that once gave a silently wrong result, an error that did not say what
was wrong, or a hang or a memory error after allocating gigabytes, and states what happens now.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import lessonlib as L
import lessonlib.fast as fast
from lessonlib import _checks, _machine, fixtures
from lessonlib.exercises import FAILED, check
from lessonlib.exercises import checker as checker_module
from lessonlib.exercises.limits import CappedOutput, CaseTimeout, Deadline
from lessonlib.explorers import generation
from lessonlib.training import catalog, lm_catalog
from lessonlib.training.sampling import generate, sample_next

ROOT = Path(__file__).resolve().parents[1]

RNG = np.random.default_rng(0)
Q = RNG.standard_normal((4, 8))


def refused(call, *words: str, error: type = ValueError) -> str:
    """Run ``call``; it must raise ``error`` whose message holds every one of ``words``. Returns the message."""
    with pytest.raises(error) as raised:
        call()
    for word in words:
        assert word in str(raised.value), f"{word!r} not in: {raised.value}"
    return str(raised.value)


@pytest.fixture
def little_memory(monkeypatch):
    """A machine with 1 GiB available, whatever this one has."""
    monkeypatch.setattr(_machine, "available_memory", lambda: 1 << 30)


def peak_while(call) -> int:
    """Bytes allocated at most while ``call()`` runs (and raises)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        call()
    except (ValueError, TypeError):
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return peak


# --- silently wrong, before ------------------------------------------------------------------------


def test_softmax_and_entropy_refuse_none_nan_infinities_and_what_is_not_a_distribution():
    refused(lambda: L.softmax(None), "x", "None", error=TypeError)
    refused(lambda: L.softmax([1.0, np.nan]), "x", "NaN")
    refused(lambda: L.softmax([1.0, np.inf]), "x", "+inf")
    np.testing.assert_array_equal(L.softmax([0.0, -np.inf]), [1.0, 0.0])  # documented: -inf gets weight 0
    refused(lambda: L.attention_entropy(None), "weights", error=TypeError)
    refused(lambda: L.attention_entropy([np.nan, 1.0]), "weights", "NaN")
    refused(lambda: L.attention_entropy([0.9, 0.9]), "weights", "sum to one", "1.8")
    refused(lambda: L.attention_entropy([1.5, -0.5]), "weights", "negative")
    assert L.attention_entropy([[0.5, 0.5], [0.0, 0.0]]).tolist() == [math.log(2), 0.0]  # an all-zero row: 0


def test_complex_inputs_are_refused_not_cut_to_their_real_part():
    z = Q * (1 + 1j)
    for call in (lambda: L.softmax(z), lambda: L.attention_scores(z, Q),
                 lambda: L.scaled_dot_product_attention(z, Q, Q), lambda: fast.scaled_dot_product_attention(z, Q, Q),
                 lambda: L.tiled_attention(z, Q, Q), lambda: L.rope(z, np.arange(4))):
        refused(call, "complex", error=TypeError)


@pytest.mark.parametrize("scale", [np.nan, -np.inf, np.inf])
def test_a_scale_that_is_not_finite_is_refused(scale):
    for attend in (L.scaled_dot_product_attention, fast.scaled_dot_product_attention, L.tiled_attention):
        refused(lambda attend=attend: attend(Q, Q, Q, scale=scale), "scale", "finite")


def test_positions_and_bases_that_give_nan_rows_are_refused():
    refused(lambda: L.rope(Q, [np.nan] * 4), "positions", "NaN")
    refused(lambda: L.rope(Q, None), "positions", "None", error=TypeError)
    refused(lambda: L.rope(Q, np.arange(4), base=0.0), "base", "positive")
    refused(lambda: L.sinusoidal_positions(4, 8, base=-1.0), "base", "positive")
    refused(lambda: L.sinusoidal_positions(4, 8, base=np.nan), "base", "finite")


def test_relative_buckets_refuse_a_layout_they_cannot_hold():
    far = np.array([-100, -20, -9])
    refused(lambda: L.relative_position_bucket(far, max_distance=8), "max_distance", "exceed the 8")
    for n_buckets in (2, 3):
        refused(lambda n=n_buckets: L.relative_position_bucket(far, n_buckets=n), "n_buckets", "at least 4")
    assert L.relative_position_bucket(far, bidirectional=False, n_buckets=3, max_distance=4).tolist() == [2, 2, 2]


def test_head_width_zero_dtype_none_and_a_slope_of_nan_are_refused():
    refused(lambda: L.init_multi_head(8, 2, d_head=0), "d_head", "at least 1")
    refused(lambda: L.dtype_bytes(None), "dtype", "None", error=TypeError)
    refused(lambda: L.loglog_slope([1, np.nan], [1, 2]), "sizes", "NaN")
    refused(lambda: L.loglog_slope([2, 2], [1, 2]), "sizes", "all 2")


def test_sampler_and_generation_explorer_refuse_nan_temperature_fractional_ids_and_negative_lengths():
    refused(lambda: sample_next(np.arange(5.0), float("nan"), np.random.default_rng(0)), "temperature", "finite")
    refused(lambda: generation.Settings(temperature=float("nan")), "temperature", "finite")
    model = lm_catalog.stored("rope")
    refused(lambda: generate(model, [1.7, 2.2], 3), "prompt", "integer", error=TypeError)
    refused(lambda: generate(model, [1, 2], -1), "n_new", "at least 0")
    refused(lambda: generation.Settings(length=-5), "length", "at least 1")


def test_a_padding_mask_that_could_be_read_per_query_is_refused_with_both_readings():
    pad = L.padding_mask([4, 2, 3, 1], 4)  # (B, S) with B = L = 4
    x = RNG.standard_normal((4, 4, 8))  # (B, L, d)
    for attend in (L.scaled_dot_product_attention, fast.scaled_dot_product_attention):
        message = refused(lambda attend=attend: attend(x, x, x, mask=pad), "mask", "(4, 4)",
                          "combine_masks(key_padding=mask)", "mask[None]")
        assert "(4, 1, 4)" in message and "(1, 4, 4)" in message
    per_example = L.scaled_dot_product_attention(x, x, x, mask=L.combine_masks(key_padding=pad)).weights
    assert np.all(per_example[1][:, 2:] == 0)  # the way the message names: sequence 1's padding gets nothing
    causal = L.causal_mask(4)
    L.scaled_dot_product_attention(x[:3], x[:3], x[:3], mask=causal)  # B = 3 != L: one reading only
    q = RNG.standard_normal((2, 4, 4, 8))  # (B, H, L, d_h) with as many heads as positions: one reading
    for attend in (L.scaled_dot_product_attention, fast.scaled_dot_product_attention):
        np.testing.assert_array_equal(attend(q, q, q, mask=causal).output, attend(q, q, q, mask=causal[None]).output)
    by_example = RNG.standard_normal((4, 2, 4, 8))  # (B, H, L, d_h) with B = L: refused as before
    refused(lambda: L.scaled_dot_product_attention(by_example, by_example, by_example, mask=pad), "mask", "(4, 4)",
            "combine_masks(key_padding=mask, heads=True)")
    heads = L.init_multi_head(8, 4)  # unbatched tokens with as many heads as positions: still one reading
    L.multi_head_attention(RNG.standard_normal((4, 8)), None, heads, mask=causal)


def test_a_printed_difference_must_be_a_finite_number_at_least_zero():
    for bad in (None, "0", 1j, True, np.zeros(2)):
        refused(lambda bad=bad: fixtures.format_difference(bad), "gap", "real number", error=TypeError)
    for bad in (math.nan, math.inf):
        refused(lambda bad=bad: fixtures.format_difference(bad), "gap", "finite")
    refused(lambda: fixtures.format_difference(-1e-3), "gap", "at least 0")


def test_a_plugged_mask_function_must_return_a_boolean_mask_of_the_steps_shape():
    from lessonlib.training.lm import CharModel, Plugs

    model = CharModel(7, position="rope", d_model=8, n_heads=2, n_layers=1, d_mlp=12, max_length=24, seed=1)
    tokens = RNG.integers(0, 7, (3, 6))  # (B, L)
    targets = np.roll(tokens, -1, axis=1)
    for bad, words, error in ((lambda n: np.ones(n, dtype=bool), ("causal_mask(length)", "(6,)", "(6, 6)"), ValueError),
                              (lambda n: np.ones((n, n + 1), dtype=bool), ("(6, 7)", "(6, 6)"), ValueError),
                              (lambda n: np.ones((n, n)), ("causal_mask(length)", "boolean"), TypeError),
                              (lambda n: None, ("causal_mask(length)", "None"), TypeError)):
        refused(lambda bad=bad: model.loss(tokens, targets, plugs=Plugs(causal_mask=bad)), *words, error=error)
    _, cache = model.prefill(tokens[:, :5])
    one_row_per_query = Plugs(cached_causal_mask=lambda lengths, n: np.ones((n, 6), dtype=bool))  # (L, S): no batch
    refused(lambda: model.extend(cache, tokens[:, 5:], plugs=one_row_per_query),
            "cached_causal_mask(lengths, n_queries)", "(1, 6)", "(3, 1, 6)")


# --- errors that did not teach, before -------------------------------------------------------------


def test_empty_sequences_and_zero_widths_are_refused_by_name():
    refused(lambda: L.scaled_dot_product_attention(np.zeros((0, 8)), Q, Q), "query", "empty")
    refused(lambda: L.scaled_dot_product_attention(Q, np.zeros((0, 8)), np.zeros((0, 8))), "key", "empty")
    refused(lambda: L.scaled_dot_product_attention(np.zeros((4, 0)), np.zeros((4, 0)), Q), "query", "empty")
    refused(lambda: L.tiled_attention(np.zeros((4, 0)), np.zeros((4, 0)), Q), "query", "empty")


def test_batch_axes_that_do_not_broadcast_are_named():
    a, b = np.zeros((2, 4, 8)), np.zeros((3, 4, 8))
    for attend in (L.scaled_dot_product_attention, fast.scaled_dot_product_attention, L.tiled_attention):
        refused(lambda attend=attend: attend(a, b, b), "batch axes", "query (2,)", "key (3,)")


def test_lists_none_and_too_few_axes_to_heads_and_permutations_are_refused():
    assert L.split_heads([[1.0, 2.0]], 2).shape == (2, 1, 1)  # a list is read as an array
    refused(lambda: L.split_heads(None, 2), "x", "None", error=TypeError)
    refused(lambda: L.split_heads(np.zeros(4), 2), "x", "(..., n, H * d_head)")
    refused(lambda: L.merge_heads(np.zeros(4)), "x", "(..., H, n, d_head)")
    refused(lambda: L.permute(Q, [0, 1, 2, 3], axis=5), "axis=5", "out of range")
    refused(lambda: L.permute(None, [0]), "x", "None", error=TypeError)
    refused(lambda: L.init_multi_head(8, 2, rng=3), "rng", "Generator", error=TypeError)


def test_strings_and_bad_axes_are_refused_before_numpy_sees_them():
    refused(lambda: L.softmax("abc"), "x", "<U3", error=TypeError)
    refused(lambda: L.softmax(Q, axis=3), "axis=3", "out of range")
    refused(lambda: L.rope(Q, "ab"), "positions", error=TypeError)


def test_an_unknown_position_mechanism_lists_the_valid_ones():
    for call in (lambda: lm_catalog.stored("rotary"), lambda: lm_catalog.generate_text("rotary", "RO")):
        message = refused(call, "rotary", "choose one of none, sinusoidal, learned, rope, alibi, relative")
        assert "make train" not in message
    refused(lambda: catalog.load("previous_rotary"), "previous_rotary", "previous_rope")


# --- memory and time, before ------------------------------------------------------------------------


def test_a_million_positions_are_refused_before_allocating_with_the_way_out():
    n = 10**6
    q = np.broadcast_to(np.ones((1, 8)), (n, 8))  # (n, 8) without holding n rows
    for call in (lambda: L.scaled_dot_product_attention(q, q, q), lambda: fast.scaled_dot_product_attention(q, q, q),
                 lambda: L.multi_head_attention(q, None, L.init_multi_head(8, 2))):
        message = refused(call, "TiB", "tiled_attention", "need_weights=False")
        assert peak_while(call) < 1 << 20
        assert "available" in message
    for call in (lambda: L.causal_mask(n), lambda: L.sliding_window_mask(n, window=4)):
        refused(call, "n_queries=1000000", "TiB")
    refused(lambda: L.causal_mask(n), "tiled_attention(query, key, value, causal=True)")
    refused(lambda: L.alibi_bias(n, n, 8), "n_heads=8", "TiB", "block of queries")
    assert fast.scaled_dot_product_attention(q[:2048], q[:2048], q[:2048], need_weights=False).shape == (2048, 8)


def test_positions_and_slopes_of_a_billion_are_refused_at_once():
    for call in (lambda: L.sinusoidal_positions(10**9, 8), lambda: L.alibi_slopes(10**12),
                 lambda: L.LearnedPositions(10**9, 64)):
        start = time.perf_counter()
        refused(call, "available")
        assert time.perf_counter() - start < 1.0
        assert peak_while(call) < 1 << 20


def test_the_limit_is_the_memory_available_now(little_memory):
    q = RNG.standard_normal((6000, 8))  # dense attention would hold 5 x 6000^2 x 8 bytes = 1.34 GiB
    message = refused(lambda: L.scaled_dot_product_attention(q, q, q), "1.3 GiB", "1.0 GiB this machine has")
    assert "query (6000, 8)" in message
    assert peak_while(lambda: L.scaled_dot_product_attention(q, q, q)) < 1 << 20
    np.testing.assert_allclose(L.tiled_attention(q[:500], q[:500], q[:500]).output,
                               L.scaled_dot_product_attention(q[:500], q[:500], q[:500]).output, atol=1e-12)


@pytest.mark.parametrize(("name", "call", "estimate"), [
    ("reference attention", lambda q: L.scaled_dot_product_attention(q, q, q, mask=L.causal_mask(len(q))),
     lambda n: 6 * n * n * 8),
    ("reference attention, nan policy", lambda q: L.scaled_dot_product_attention(
        q, q, q, mask=L.causal_mask(len(q)), fully_masked="nan"), lambda n: 6 * n * n * 8),
    ("fast attention", lambda q: fast.scaled_dot_product_attention(q, q, q, mask=L.causal_mask(len(q))),
     lambda n: 3 * n * n * 8),
    ("causal mask", lambda q: L.causal_mask(len(q)), lambda n: 9 * n * n),
    ("sliding-window mask", lambda q: L.sliding_window_mask(len(q), window=4, causal=False), lambda n: 17 * n * n),
    ("ALiBi", lambda q: L.alibi_bias(len(q), len(q), 4), lambda n: (8 * 4 + 16) * n * n),
    ("relative bias", lambda q: L.relative_position_bias(len(q), len(q), np.zeros((32, 4))),
     lambda n: (8 * 4 + 56) * n * n),
    ("sinusoidal", lambda q: L.sinusoidal_positions(len(q) * 64, 64), lambda n: 2 * n * 64 * 64 * 8),
    ("rope", lambda q: L.rope(np.zeros((len(q) * 16, 64)), np.arange(len(q) * 16)), lambda n: 5 * n * 16 * 64 * 8),
])
def test_the_size_estimates_cover_what_the_calls_hold(name, call, estimate):
    n = 512
    q = RNG.standard_normal((n, 8))
    peak = peak_while(lambda: call(q))
    # NumPy's ufunc buffers (8192 elements per operand where a product casts) hold up to 256 KiB more
    assert peak <= estimate(n) + (256 << 10), f"{name}: {peak:,} bytes held, {estimate(n):,} estimated"
    assert estimate(n) < 2.5 * peak, f"{name}: the estimate {estimate(n):,} refuses calls far below {peak:,}"


def test_available_memory_is_read_from_linux_with_a_container_limit_and_falls_back(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683664 kB\nMemFree:  1 kB\nMemAvailable:   2048 kB\n")
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    monkeypatch.setattr(_machine, "MEMINFO", meminfo)
    monkeypatch.setattr(_machine, "CGROUP_MEMORY", ((limit, usage),))
    assert _machine.available_memory() == 2048 * 1024
    limit.write_text("1048576\n")
    usage.write_text("524288\n")
    assert _machine.available_memory() == 524288  # the container leaves less than the host has
    limit.write_text("max\n")
    assert _machine.available_memory() == 2048 * 1024
    monkeypatch.setattr(_machine, "MEMINFO", tmp_path / "missing")
    monkeypatch.setattr(_machine, "_sysconf_memory", lambda: None)
    assert _machine.available_memory() == _machine.FALLBACK_MEMORY_BYTES


def test_small_calls_do_not_read_the_available_memory(monkeypatch):
    monkeypatch.setattr(_machine, "available_memory", lambda: pytest.fail("read for a small call"))
    L.scaled_dot_product_attention(Q, Q, Q)
    _checks.refuse_oversized(_checks.ALWAYS_FITS - 1, "a small call", "")


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(checker_module, "CASE_TIME_LIMIT", 0.3)


def _forever(scores, allowed):
    """An endless loop, as far as any limit of a check is concerned (it gives up after 10 s, so that a
    check without a limit fails this test instead of hanging it)."""
    end = time.monotonic() + 10.0
    while time.monotonic() < end:
        pass


def test_check_returns_within_its_limit_for_a_function_that_never_returns(short_limit):
    start = time.perf_counter()
    result = check("masked_softmax", _forever, quiet=True)
    assert time.perf_counter() - start < 0.3 + 2.0
    assert result.status == FAILED and result.points == 0
    assert "did not return within 0.3 s on case public-1: an endless loop?" in result.message
    assert [f.reason for f in result.failed_cases][:2] == ["timeout", "not_run"]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the kernel is left as it was
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert check("causal_mask", lambda n: np.tril(np.ones((n, n), bool)), quiet=True).full_marks


def test_the_limit_also_interrupts_off_the_main_thread_and_through_except_exception(short_limit):
    def stubborn(scores, allowed):
        end = time.monotonic() + 10.0  # as _forever
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except Exception:  # a learner's catch-all does not swallow the interruption
                pass

    results = []
    worker = threading.Thread(target=lambda: results.append(check("masked_softmax", stubborn, quiet=True)))
    worker.start()
    worker.join(5.0)
    assert not worker.is_alive() and "did not return within 0.3 s" in results[0].message
    assert "did not return" in check("masked_softmax", stubborn, quiet=True).message


def _loop_seconds() -> float:
    """The fastest of three runs of a plain Python loop, traced as a coverage or line-count tool would."""
    def count():
        total = 0
        for i in range(2_000):
            total += i

    def tracer(frame, event, arg):
        return tracer

    def run():
        for _ in range(3):
            sys.settrace(tracer)
            start = time.perf_counter()
            count()
            sys.settrace(None)
            times.append(time.perf_counter() - start)

    times: list[float] = []
    runner = threading.Thread(target=run, daemon=True)  # so that a loop slowed for good fails instead of hanging
    runner.start()
    runner.join(5.0)
    return min(times) if len(times) == 3 else math.inf


def test_the_kernel_runs_at_full_speed_after_a_check_off_the_main_thread(short_limit):
    """Withdrawing an exception handed to a thread would leave the interpreter checking for one at every
    instruction from then on: a traced loop once ran over forty times slower after such a check."""
    before = _loop_seconds()
    worker = threading.Thread(target=lambda: check("masked_softmax", _forever, quiet=True))
    worker.start()
    worker.join(5.0)
    assert _loop_seconds() < 10 * before


def test_the_limit_constant_is_stated_in_the_docstring():
    assert checker_module.CASE_TIME_LIMIT == 60.0
    assert f"CASE_TIME_LIMIT ({checker_module.CASE_TIME_LIMIT:g}) seconds" in check.__doc__


def test_notebook_00_states_the_limits_check_applies():
    notebook = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text(encoding="utf-8"))
    text = " ".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    text = " ".join(text.split())
    assert f"A case still running after {checker_module.CASE_TIME_LIMIT:g} seconds is stopped" in text
    assert (f"printing beyond {checker_module.MAX_PRINTED_LINES} lines or "
            f"{checker_module.MAX_PRINTED_CHARACTERS:,} characters is cut") in text


def test_a_deadline_that_never_fires_changes_nothing_and_a_keyboard_interrupt_still_stops_a_check():
    with Deadline(5.0) as deadline:
        total = sum(range(1000))
    assert not deadline.passed and total == 499500
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL

    def interrupted(scores, allowed):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check("masked_softmax", interrupted, quiet=True)
    with pytest.raises(CaseTimeout), Deadline(0.05):
        raise CaseTimeout  # one that did not come from the deadline is not its to swallow


def test_deadlines_nest_and_each_puts_back_the_timer_and_handler_it_found():
    with Deadline(0.6) as outer:
        with Deadline(0.05) as inner:
            _forever(None, None)
        assert inner.passed and not outer.passed
        assert signal.getsignal(signal.SIGALRM) == outer._on_alarm
        assert 0.0 < signal.getitimer(signal.ITIMER_REAL)[0] < 0.6  # what the outer one had left
        _forever(None, None)
    assert outer.passed and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_check_caps_what_the_answer_prints_and_says_how_much_was_cut(capsys):
    flood = "\n".join(f"line {i}" for i in range(600_000))

    def chatty(scores, allowed):
        print(flood)  # on each of the 5 public cases
        raise NotImplementedError

    check("masked_softmax", chatty, quiet=True)
    printed = capsys.readouterr().out
    assert printed.count("\n") == checker_module.MAX_PRINTED_LINES + 1  # and the note
    assert printed.startswith("line 0\nline 1\n") and "line 99\n" in printed and "line 100\n" not in printed
    assert "[... 2,999,900 more lines, " in printed and "characters of printed output cut" in printed


def test_capped_output_keeps_whole_lines_up_to_either_limit():
    out = CappedOutput(max_lines=2, max_characters=1000)
    out.write("a\nb\nc\n")
    out.write("d")
    assert (out.text, out.cut_lines, out.cut_characters) == ("a\nb\n", 1, 3)
    out = CappedOutput(max_lines=10, max_characters=5)
    out.write("abcdefgh")
    assert out.text == "abcde" and "3 more characters" in out.note()
    assert CappedOutput(1, 1).note() == ""
