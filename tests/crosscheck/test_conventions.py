"""Every row of MASK_CONVENTIONS, re-derived by probe_mask_semantics on the installed library."""

from __future__ import annotations

import warnings

import pytest

from lessonlib.crosscheck import installed_version, probe_target
from lessonlib.masks import MASK_CONVENTIONS
from lessonlib.probe import probe_mask_semantics

ROWS = [pytest.param(row, id=f"{row.library}:{row.api}:{row.argument}") for row in MASK_CONVENTIONS]


def _library_loaded(request: pytest.FixtureRequest, library: str) -> None:
    """Skip (or fail under REQUIRE_CROSSCHECK=1) when the row's library is missing."""
    if library in ("torch", "jax", "flax", "keras", "transformers"):
        request.getfixturevalue(library)


@pytest.mark.parametrize("row", ROWS)
def test_row_matches_the_probe(request, row):
    _library_loaded(request, row.library)
    target = probe_target(row)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # libraries warn about the odd inputs the probe feeds them
        probed = probe_mask_semantics(target.make_adapter(), key_only=target.key_only)
    assert probed.differences(row) == {}, (
        f"{row.library} {row.api} ({row.argument}) on {installed_version(target.distribution)}: "
        f"table value vs probe {probed.differences(row)}; evidence {probed.evidence}"
    )


@pytest.mark.parametrize("row", ROWS)
def test_row_names_the_version_it_was_measured_on(request, row):
    _library_loaded(request, row.library)
    installed = installed_version(probe_target(row).distribution)
    assert row.measured_on == installed, (
        f"the table says {row.library} {row.api} ({row.argument}) was measured on {row.measured_on!r} "
        f"but this run probed {installed!r}; if test_row_matches_the_probe passes, update measured_on"
    )
