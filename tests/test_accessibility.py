"""Accessibility rules every figure and explorer follows, checked without a browser.

- colour maps are viridis or cividis (readable with colour-vision deficiencies), wherever a name
  appears in lessonlib/ or in a notebook's code;
- every figure a lesson notebook stores comes with a printed line starting "Figure" in the same
  cell, saying what it shows;
- every explorer states what its figure shows (alt_text) beside it, through the shared wiring;
- masked cells are marked by a hatch and an 'x', not by colour alone.

Keyboard operation of the explorers is checked in a real browser: tests/browser.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib.figure import Figure

import lessonlib.explorers
from lessonlib import plots

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_CMAPS = {"viridis", "cividis", "viridis_r", "cividis_r"}
NOT_CMAPS = {"get_cmap", "register_cmap", "ScalarMappable", "colormaps", "ColormapRegistry"}
CMAP_PATTERNS = [
    re.compile(r"cmap\s*=\s*[\"']([\w.]+)[\"']"),  # cmap="jet"
    re.compile(r"get_cmap\(\s*[\"']([\w.]+)[\"']"),  # plt.get_cmap("jet")
    re.compile(r"colormaps\[\s*[\"']([\w.]+)[\"']\s*\]"),  # matplotlib.colormaps["jet"]
    re.compile(r"\bcm\.([A-Za-z_]\w*)\b"),  # plt.cm.jet(...)
    re.compile(r"\w*CMAP\w*\s*=\s*[\"']([\w.]+)[\"']"),  # SEQUENTIAL_CMAP = "jet"
]
NOTEBOOK_FOLDERS = ("notebooks", "solutions", "exercises")
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPLORERS = sorted(m.name for m in pkgutil.iter_modules(lessonlib.explorers.__path__) if not m.name.startswith("_"))


def code_sources() -> list[tuple[str, str]]:
    """(where, source) for every module of lessonlib and every notebook code cell."""
    sources = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "lessonlib").rglob("*.py"))]
    for folder in NOTEBOOK_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            sources += [(f"{path.relative_to(ROOT)} cell {i}", cell.source)
                        for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return sources


def cmap_names(source: str) -> list[tuple[int, str]]:
    """(line number, name) of every colour-map name the source spells out."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        for pattern in CMAP_PATTERNS:
            found += [(number, name) for name in pattern.findall(line) if name not in NOT_CMAPS]
    return found


def test_the_scan_sees_colour_maps():
    assert cmap_names('ax.imshow(w, cmap="jet")\ncolours = plt.cm.RdYlGn(x)') == [(1, "jet"), (2, "RdYlGn")]
    assert cmap_names("cmap = plt.get_cmap('viridis')") == [(1, "viridis")]


def test_colour_maps_are_viridis_or_cividis():
    other = [f"{where}, line {number}: {name}" for where, source in code_sources()
             for number, name in cmap_names(source) if name not in ALLOWED_CMAPS]
    assert not other, "colour maps other than viridis/cividis:\n" + "\n".join(other)


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_stored_figure_has_a_text_statement(path: Path):
    nb = nbformat.read(path, as_version=4)
    missing = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        figures = sum("image/png" in out.get("data", {}) for out in outputs)
        printed = "".join(out.get("text", "") for out in outputs if out.get("name") == "stdout")
        statements = sum(line.startswith("Figure") for line in printed.splitlines())
        if statements < figures:
            missing.append(f"cell {i}: {figures} figure(s), {statements} line(s) starting 'Figure'")
    assert not missing, f"{path.name}: print a one-line statement per figure\n" + "\n".join(missing)


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_explorer_states_what_its_figure_shows(name: str):
    module = importlib.import_module(f"lessonlib.explorers.{name}")
    for needed in ("Settings", "compute", "describe", "alt_text", "show"):
        assert hasattr(module, needed), f"explorers.{name} has no {needed}"
    assert "build_explorer" in inspect.getsource(module.show), (
        f"explorers.{name}.show() must wire its controls with _wiring.build_explorer "
        "(which prints the alt text beside the figure and marks the readout for the browser test)")
    assert module.alt_text(module.compute(module.Settings())).strip()


def visible_hatches(ax) -> int:
    return sum(1 for p in ax.patches if p.get_visible() and p.get_hatch())


def test_masked_cells_are_hatched_and_labelled():
    allowed = np.tril(np.ones((3, 3), bool))  # (3, 3), 3 cells blocked
    weights = np.where(allowed, 0.5, 0.0)  # (3, 3)
    ax = Figure().subplots()
    plots.heatmap(ax, weights, allowed=allowed)
    assert visible_hatches(ax) == 3
    assert sum(t.get_text() == "x" for t in ax.texts) == 3
    for show_leaks in (False, True):
        ax = Figure().subplots()
        panel = plots.HeatmapPanel(ax, (3, 3), show_leaks=show_leaks)
        panel.update(weights, allowed=allowed)
        assert visible_hatches(ax) == 3, show_leaks


def test_a_leak_panel_shows_weight_on_an_excluded_key():
    allowed = np.tril(np.ones((3, 3), bool))  # (3, 3)
    weights = np.where(allowed, 0.5, 0.0)  # (3, 3)
    weights[0, 2] = 0.25  # weight that leaked onto a future key
    ax = Figure().subplots()
    plots.HeatmapPanel(ax, (3, 3), show_leaks=True).update(weights, allowed=allowed)
    shown = {t.get_text() for t in ax.texts}
    assert "0.25" in shown and "x" not in shown
    ax = Figure().subplots()
    plots.HeatmapPanel(ax, (3, 3)).update(weights, allowed=allowed)
    assert "0.25" not in {t.get_text() for t in ax.texts}
