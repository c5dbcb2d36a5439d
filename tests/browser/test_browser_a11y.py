"""The reading copy against WCAG 2.1 AA: axe-core in Chromium on every page, and how a reader moves around.

Every page of the copy (tools/site/build.py, the same code as `make site`) is opened offline once
its explorers have rendered, and axe-core (pinned in tests/browser/package.json) runs with the
WCAG 2.0 and 2.1 A and AA rules: any serious or critical violation fails. Then what axe does not
check: a skip link to the page's main content, links to the contents and to the previous and
next notebook, a contents page listing every section, headings in order, a text alternative
that says what each figure shows (the explorers' figures included), and no link out of the copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe import blocking, explain, violations
from explorer_moves import moves_for
from offline import OfflinePage

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

PAGES = ["index", *(p.stem for p in NOTEBOOKS)]


def open_rendered(offline: OfflinePage, site: Path, stem: str) -> Any:
    """The page, once the widget renderer has drawn every explorer it stores."""
    from playwright.sync_api import expect

    page = offline.open(site / f"{stem}.html")
    notebook = next((p for p in NOTEBOOKS if p.stem == stem), None)
    explorers = len(moves_for(notebook)) if notebook else 0
    expect(page.locator(".lessonlib-readout")).to_have_count(explorers, timeout=30_000)
    if explorers:
        expect(page.locator(".widget-vbox:has(> .lessonlib-readout) img").first).to_be_visible()
    return page


@pytest.mark.parametrize("stem", PAGES)
def test_page_has_no_serious_or_critical_axe_violation(stem: str, site: Path, axe_ready: None,
                                                       offline: OfflinePage) -> None:
    page = open_rendered(offline, site, stem)
    found = violations(page)
    assert not blocking(found), f"{stem}.html, axe-core at WCAG 2.1 AA:\n{explain(found)}"


@pytest.mark.parametrize("stem", PAGES)
def test_page_skip_link_lang_and_headings(stem: str, site: Path, offline: OfflinePage) -> None:
    page = open_rendered(offline, site, stem)
    assert page.evaluate("() => document.documentElement.lang") == "en"
    page.keyboard.press("Tab")
    first = page.evaluate("() => [document.activeElement.textContent, document.activeElement.getAttribute('href')]")
    assert first[0].startswith("Skip to"), f"{stem}.html: the first Tab stop is {first}, not a skip link"
    assert page.locator(f"main{first[1]}").count() == 1, f"{stem}.html: the skip link's target {first[1]} is not <main>"
    levels = page.evaluate("() => Array.from(document.querySelectorAll('main h1, main h2, main h3, main h4, "
                           "main h5, main h6'), h => Number(h.tagName[1]))")
    assert levels[:1] == [1] and levels.count(1) == 1, f"{stem}.html: one h1 first, got levels {levels[:5]}"
    skips = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
    assert not skips, f"{stem}.html: headings skip a level: {skips}"


@pytest.mark.parametrize("position", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_page_links_contents_previous_and_next(position: int, site: Path, offline: OfflinePage) -> None:
    stem = NOTEBOOKS[position].stem
    page = offline.open(site / f"{stem}.html")
    for nav in ("nav.site-nav >> nth=0", "nav.site-nav >> nth=1"):
        hrefs = page.locator(nav).locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        expected = ["index.html"]
        expected += [f"{NOTEBOOKS[position - 1].stem}.html"] if position > 0 else []
        expected += [f"{NOTEBOOKS[position + 1].stem}.html"] if position + 1 < len(NOTEBOOKS) else []
        assert hrefs == expected, f"{stem}.html: {nav} links {hrefs}, expected {expected}"


def test_contents_list_every_section_with_its_anchor(site: Path, offline: OfflinePage) -> None:
    page = offline.open(site / "index.html")
    listed = page.locator("ol.site-contents a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    for notebook in NOTEBOOKS:
        page.goto((site / f"{notebook.stem}.html").as_uri())
        anchors = page.locator("main h2[id]").evaluate_all("hs => hs.map(h => h.id)")
        assert anchors, f"{notebook.stem}.html has no sections"
        missing = [a for a in anchors if f"{notebook.stem}.html#{a}" not in listed]
        assert not missing, f"the contents page does not list these sections of {notebook.stem}: {missing}"


@pytest.mark.parametrize("stem", PAGES)
def test_images_described_and_links_stay_inside(stem: str, site: Path, offline: OfflinePage) -> None:
    page = open_rendered(offline, site, stem)
    alts = page.locator("main img").evaluate_all("images => images.map(i => i.getAttribute('alt') || '')")
    undescribed = [i for i, alt in enumerate(alts) if not alt.startswith("Figure")]
    assert not undescribed, f"{stem}.html: images {undescribed} of {len(alts)} have no 'Figure: ...' alt text"
    hrefs = page.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    outside = []
    for href in hrefs:
        if href.startswith(("#", "https://", "http://")):
            continue  # in this page, or a web address that does not depend on the folder
        target = (site / href.split("#")[0]).resolve()
        if "solutions" in href or site.resolve() not in target.parents or not target.is_file():
            outside.append(href)
    assert not outside, f"{stem}.html links out of the copy: {outside}"


def test_search_finds_sections_offline(site: Path, axe_ready: None, offline: OfflinePage) -> None:
    """The contents page's search (MiniSearch over every section) answers offline, with links to sections."""
    from playwright.sync_api import expect

    page = offline.open(site / "index.html")
    page.get_by_label("Words to find in any section").fill("causal mask")
    results = page.locator("#search-results a")
    expect(results.first).to_be_visible()
    hrefs = results.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any(href.startswith("02_masking.html#") for href in hrefs), f"'causal mask' found only {hrefs}"
    assert page.locator("#search-status").inner_text().endswith("found")
    found = violations(page)
    assert not blocking(found), f"index.html with search results, axe-core at WCAG 2.1 AA:\n{explain(found)}"
    assert not offline.blocked and not offline.failed, f"the search needed the network: {offline.blocked}"
