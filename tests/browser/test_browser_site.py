"""The static reading copy (`make site`): every page opens with the network cut off and still shows
its figures and the explorers' saved widget state.

The site is built here into a temporary folder with tools/site/build.py (the same code `make site`
runs); npm is needed only when its tarball cache (build/site-npm) is empty. Pages are opened from
file:// with every other request aborted and recorded: a page that tries to reach the network fails.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest
from explorer_moves import moves_for
from lab_driver import VIEWPORT

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NPM_CACHE = ROOT / "build" / "site-npm"
CONTROLS = ".widget-slider, .widget-dropdown, .widget-checkbox, .widget-toggle-buttons, .widget-button"


def site_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("site_build", ROOT / "tools" / "site" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(browser: Any, tmp_path_factory: pytest.TempPathFactory, timings: dict[str, Any]) -> Path:
    """The reading copy of notebooks/, built into a temporary folder."""
    builder = site_builder()
    cached = all((NPM_CACHE / a.tarball_name).exists() for a in builder.pinned_assets().values())
    if not cached and shutil.which("npm") is None:
        reason = "building the site needs npm once (apt-get install npm) to fetch its pinned browser files"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    builder.build([ROOT / "notebooks"], out, NPM_CACHE)
    timings["site_build_s"] = round(time.perf_counter() - start, 2)
    return out


class OfflinePage:
    """A page that may load file:// URLs only; every other request is aborted and recorded."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.blocked: list[str] = []
        self.failed: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("requestfailed", self._failed)

    def _route(self, route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def _failed(self, request: Any) -> None:
        if request.url.startswith("file://"):
            self.failed.append(f"{request.url}: {request.failure}")

    def open(self, path: Path) -> Any:
        self.page.goto(path.as_uri())
        return self.page


@pytest.fixture
def offline(browser: Any) -> Iterator[OfflinePage]:
    holder = OfflinePage(browser)
    yield holder
    holder.context.close()


def test_index_links_every_page(site: Path, offline: OfflinePage) -> None:
    page = offline.open(site / "index.html")
    links = page.locator("main a")
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
