"""The explorers' readouts saved in each notebook's widget state are the default views this machine computes.

The reading copy (`make site`) shows an explorer as the notebook saved it, and nbval does not compare
widget state, so a saved readout that prints a CPU-dependent digit (rounding noise such as 2e-16 on
one CPU and 4e-16 on another) would pass nbval and differ from what a learner's kernel shows.
This test reads the saved readouts without a browser; `make kernels` runs it under other CPUs' kernels.
"""

from __future__ import annotations

import html
import importlib
import re
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from lessonlib.explorers._wiring import READOUT_CLASS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

sys.path.insert(0, str(ROOT / "tests" / "browser"))  # the browser tests' table of which notebook shows what
from explorer_moves import explorers_shown  # noqa: E402


def saved_readouts(nb: nbformat.NotebookNode) -> list[str]:
    """The text of every readout widget in the notebook's saved widget state."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    models = [m["state"] for m in state.values()]
    values = [m.get("value", "") for m in models if READOUT_CLASS in m.get("_dom_classes", [])]
    return [html.unescape(re.sub(r"<[^>]+>", "", v)).strip() for v in values]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_readouts_are_the_default_views_computed_here(path: Path) -> None:
    shown = explorers_shown(path)
    expected = []
    for name in shown:
        module = importlib.import_module(f"lessonlib.explorers.{name}")
        expected.append(module.describe(module.compute(module.Settings())).strip())
    saved = saved_readouts(nbformat.read(path, as_version=4))
    assert Counter(saved) == Counter(expected), (
        f"{path.name}: the saved readouts differ from the explorers' default views computed here; if only "
        "a last digit differs, the readout prints rounding noise that depends on the CPU")
