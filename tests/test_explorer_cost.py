"""Unit tests of the cost explorer's pure part: exact predicted bytes; measured points by structure only."""

from dataclasses import replace

import numpy as np
import pytest

import lessonlib as L
from lessonlib.explorers import cost
from lessonlib.plots import figure_png

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def predicted(settings: cost.Settings) -> cost.Result:
    return cost.compute(replace(settings, measure=False), cache={})


@pytest.mark.parametrize("batch, heads, n, dtype", [
    (1, 1, 256, "float32"), (1, 8, 4096, "float32"), (4, 16, 8192, "bfloat16"),
    (32, 64, 131072, "float16"), (2, 3, 1000, "float64"),
])
def test_score_bytes_is_batch_heads_n_squared_itemsize(batch, heads, n, dtype):
    r = predicted(cost.Settings(n=n, heads=heads, batch=batch, dtype=dtype))
    assert r.score_bytes == batch * heads * n * n * ITEMSIZE[dtype]
    assert r.score_bytes == L.score_matrix_bytes(batch, heads, n, dtype=dtype)


def test_doubling_n_quadruples_the_bytes_and_dtype_scales_them():
    base = predicted(cost.Settings(n=2048)).score_bytes
    assert predicted(cost.Settings(n=4096)).score_bytes == 4 * base
    assert predicted(cost.Settings(n=2048, dtype="float64")).score_bytes == 2 * base
    assert predicted(cost.Settings(n=2048, dtype="bfloat16")).score_bytes == base // 2


def test_memory_sizes_are_the_stated_capacities():
    assert dict(cost.MEMORY_SIZES) == {
        "32 MiB cache": 32 * 1024**2, "16 GiB laptop": 16 * 1024**3, "80 GiB accelerator": 80 * 2**30,
    }


@pytest.mark.parametrize("settings", [cost.Settings(), cost.Settings(n=131072, heads=64, batch=32),
                                      cost.Settings(n=256, heads=1), cost.Settings(n=16384, dtype="bfloat16")])
def test_fits_and_longest_n_agree_with_the_formula(settings):
    r = predicted(settings)
    assert r.memory_bytes == tuple(size for _, size in cost.MEMORY_SIZES)
    for size, fits, longest in zip(r.memory_bytes, r.fits, r.longest_n):
        assert fits == (r.score_bytes <= size)
        assert fits == (settings.n <= longest)
        if longest:
            assert L.score_matrix_bytes(settings.batch, settings.heads, longest, dtype=settings.dtype) <= size
        assert L.score_matrix_bytes(settings.batch, settings.heads, longest + 1, dtype=settings.dtype) > size


def test_default_view_fits_a_laptop_but_not_a_cache():
    r = predicted(cost.Settings())
    assert r.score_bytes == 512 * 1024**2  # 1 * 8 * 4096^2 * 4 B
    assert r.fits == (False, True, True)
    assert r.longest_n[0] == 1024  # 8 heads * 1024^2 * 4 B = 32 MiB exactly


@pytest.mark.parametrize("memory, batch, heads, dtype, expected", [
    (32 * 1024**2, 1, 1, "float32", 2896), (16 * 1024**3, 1, 1, "float32", 65536),
    (80 * 10**9, 1, 1, "bfloat16", 200000), (100, 1, 1, "float64", 3), (7, 1, 1, "float64", 0),
])
def test_longest_fitting_length(memory, batch, heads, dtype, expected):
    assert cost.longest_fitting_length(memory, batch, heads, dtype) == expected


@pytest.mark.parametrize("n_bytes, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (512 * 1024**2, "512.0 MiB"),
    (80 * 10**9, "74.5 GiB"), (64 * 1024**4, "64.0 TiB"),
])
def test_format_bytes(n_bytes, text):
    assert cost.format_bytes(n_bytes) == text


def test_describe_is_deterministic_and_names_the_numbers():
    s = cost.Settings(n=8192, heads=4, batch=2, dtype="bfloat16")
    r = predicted(s)
    text = cost.describe(r)
    assert text == cost.describe(predicted(s))
    assert f"{r.score_bytes:,} B" in text and "1.0 GiB" in text
    assert "fits in: 16 GiB laptop, 80 GiB accelerator; too big for: 32 MiB cache" in text
    # the readout never shows measured numbers, so measuring does not change it
    measured = cost.compute(replace(s, dtype="float32", max_measured_n=64), cache={})
    assert cost.describe(measured) == cost.describe(predicted(replace(s, dtype="float32")))


def test_measured_points_one_new_size_per_update_and_cached():
    cache = {}
    s = cost.Settings(n=4096, dtype="float64", max_measured_n=128)
    first = cost.compute(s, cache=cache)
    assert first.measured_n == (64,) and first.pending_n == (128,)
    second = cost.compute(s, cache=cache)
    assert second.measured_n == (64, 128) and second.pending_n == ()
    before = dict(cache)
    third = cost.compute(s, cache=cache)
    assert cache == before and all(cache[k] is before[k] for k in before)  # nothing remeasured
    assert third.measured_seconds == second.measured_seconds


def test_measured_points_are_positive_and_hold_at_least_one_score_matrix():
    r = cost.compute(cost.Settings(n=4096, dtype="float32", max_measured_n=128), cache={}, new_points=4)
    assert r.measured_n == (64, 128)
    assert len(r.measured_seconds) == len(r.measured_peak) == len(r.predicted_at_measured) == 2
    assert all(t > 0 for t in r.measured_seconds)
    assert r.predicted_at_measured == (64 * 64 * 4, 128 * 128 * 4)
    # dense attention materialises the (n, n) scores, so its peak is at least one score matrix
    assert all(peak >= one for peak, one in zip(r.measured_peak, r.predicted_at_measured))


def test_measuring_is_capped_by_n_and_by_the_cap():
    r = cost.compute(cost.Settings(n=256, dtype="float32", max_measured_n=4096), cache={}, new_points=0)
    assert r.measured_n == () and r.pending_n == (64, 128, 256)
    r = cost.compute(cost.Settings(n=131072, dtype="float32", max_measured_n=128), cache={}, new_points=0)
    assert r.pending_n == (64, 128)


@pytest.mark.parametrize("settings", [cost.Settings(dtype="bfloat16"), cost.Settings(dtype="float16"),
                                      cost.Settings(measure=False)])
def test_nothing_is_measured_where_numpy_cannot_time_it_or_measuring_is_off(settings):
    cache = {}
    r = cost.compute(settings, cache=cache, new_points=4)
    assert r.measured_n == r.pending_n == () and cache == {}
    assert "nothing measured" in cost.alt_text(r)


def test_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match="dtype must be one of"):
        cost.compute(cost.Settings(dtype="int8"), cache={})


def test_figure_draws_without_widgets():
    figure = cost.Figure()
    for s in (cost.Settings(dtype="bfloat16"), cost.Settings(n=131072, heads=64, batch=32, measure=False)):
        assert figure_png(figure.draw(cost.compute(s, cache={}))).startswith(b"\x89PNG")
    r = cost.compute(cost.Settings(max_measured_n=128), cache={}, new_points=2)
    assert figure_png(figure.draw(r)).startswith(b"\x89PNG")


def test_time_and_memory_reports_the_timed_calls():
    calls = []

    def work():
        calls.append(1)
        return np.ones((64, 64)) @ np.ones((64, 64))

    timing = cost.time_and_memory(work, repeat=3)
    assert len(calls) == 5  # one warm-up, three timed, one traced
    assert 0 <= timing.fastest_cpu_seconds <= timing.cpu_seconds
    assert timing.wall_seconds > 0
    assert timing.peak_bytes >= 64 * 64 * 8
