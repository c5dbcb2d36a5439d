"""The static reading copy (`make site`): every page opens with the network cut off and still shows
its figures and the explorers' saved widget state.

The site is built here into a temporary folder with tools/site/build.py (the same code `make site`
runs); npm is needed only when its tarball cache (build/site-npm) is empty. Pages are opened from
file:// with every other request aborted and recorded: a page that tries to reach the network fails.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from axe import site_builder
from explorer_moves import moves_for
from offline import OfflinePage

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONTROLS = (".widget-slider, .widget-dropdown, .widget-checkbox, .widget-toggle-buttons, .widget-button, "
            ".widget-text")


def test_index_links_every_page(site: Path, offline: OfflinePage) -> None:
    page = offline.open(site / "index.html")
    links = page.locator("main ol.site-contents > li > a")
    targets = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert targets == [f"{p.stem}.html" for p in NOTEBOOKS]
    assert all((site / t).is_file() for t in targets)
    assert not offline.blocked, f"the index tried to reach the network: {offline.blocked}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_page_shows_figures_and_explorers_offline(path: Path, site: Path, offline: OfflinePage,
                                                   timings: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    moves = moves_for(path)
    nb = nbformat.read(path, as_version=4)
    if moves:
        assert "widgets" in nb.metadata, (
            f"{path.name} stores no widget state, so its reading copy shows no explorer: re-execute it with "
            "`python -m lessonlib.notebook_tools execute` (nbclient saves the state)")
    start = time.perf_counter()
    page = offline.open(site / f"{path.stem}.html")
    readouts = page.locator(".lessonlib-readout")
    expect(readouts).to_have_count(len(moves), timeout=30_000)
    for i, move in enumerate(moves):
        box = readouts.nth(i).locator("xpath=..")
        expect(box.locator(CONTROLS).first).to_be_visible()
        expect(box.locator("img").first).to_be_visible()
        module = move.module()
        saved = module.describe(module.compute(module.Settings())).strip()
        expect(readouts.nth(i)).to_have_text(saved)  # the default view, as the notebook saved it
    timings["site"][path.stem] = {"render_s": round(time.perf_counter() - start, 2)}

    stored_figures = sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
                         for out in cell.get("outputs", []))
    shown = page.locator(".jp-OutputArea-output img[src^='data:image/png']")
    assert shown.count() >= stored_figures, f"{stored_figures} stored figures, {shown.count()} shown"
    alts = [shown.nth(i).get_attribute("alt") or "" for i in range(shown.count())]
    undescribed = [i for i, alt in enumerate(alts) if not alt.startswith("Figure")]
    assert not undescribed, f"figures {undescribed} of {path.stem}.html have no 'Figure: ...' statement as alt text"
    assert not offline.blocked, f"{path.stem}.html tried to reach the network: {offline.blocked}"
    assert not offline.failed, f"{path.stem}.html could not load: {offline.failed}"


# --- Links: checked without a browser -------------------------------------------------------------

LEARNER_FOLDERS = ("notebooks", "exercises")


def test_learner_notebooks_never_link_the_solutions() -> None:
    """The guide hands out exercises/ only: no learner notebook may point at solutions/."""
    found = []
    for folder in LEARNER_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            found += [f"{folder}/{path.name} cell {i}" for i, cell in enumerate(nb.cells)
                      if cell.cell_type == "markdown" and "](../solutions" in cell.source.replace(" ", "")]
    assert not found, f"links to solutions/ in learner material: {found}"


@pytest.mark.parametrize("href", ["../solutions/", "../solutions/01_scaling.ipynb", "../exercises/",
                                  "../README.md", "missing.ipynb"])
def test_the_builder_refuses_a_link_out_of_the_copy(href: str, tmp_path: Path) -> None:
    pages = site_builder().keep_links_inside
    body = f'<html><body><main><a href="{href}">out</a></main></body></html>'
    with pytest.raises(ValueError, match="leads out of the reading copy"):
        pages(body, ROOT / "notebooks" / "00_start_here.ipynb", {"00_start_here"}, {"01_scaling.ipynb"})


def test_the_builder_turns_exercise_links_into_downloads() -> None:
    pages = site_builder().keep_links_inside
    body = ('<html><body><main><a href="../exercises/01_scaling.ipynb">ex</a>'
            '<a href="01_scaling.ipynb#3.-Masks">page</a><a href="#here">here</a></main></body></html>')
    out = pages(body, ROOT / "notebooks" / "00_start_here.ipynb", {"01_scaling"}, {"01_scaling.ipynb"})
    assert '<a download="01_scaling.ipynb" href="exercises/01_scaling.ipynb">ex</a>' in out
    assert 'href="01_scaling.html#3.-Masks"' in out and 'href="#here"' in out
