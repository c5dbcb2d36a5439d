"""Fixtures for the browser tests: Chromium through Playwright, one JupyterLab per session, timings.

Where Chromium or playwright is missing these tests skip with the install command; with
REQUIRE_BROWSER=1 (CI) they fail instead. Timings (per notebook wall time, control-to-readout
latency) are printed at the end of the run and written to artifacts/browser-timings.json; no test
asserts them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe import NPM_CACHE, axe_tarball_cached, site_builder
from lab_driver import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, LabServer, browser_unavailable, start_lab
from offline import OfflinePage

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
TIMINGS_FILE = ARTIFACTS / "browser-timings.json"
SERVED_FOLDERS = ("notebooks", "exercises", "solutions")

TIMINGS: dict[str, Any] = {"notebooks": {}, "latency_ms": {}, "site": {}}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives the system Chromium (deselect with -m 'not browser')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents and "browser" in item.fixturenames:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """The system Chromium, launched headless by Playwright (never a downloaded browser)."""
    reason = browser_unavailable()
    if reason is not None:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on 127.0.0.1 serving copies of notebooks/, exercises/ and solutions/."""
    folders = [ROOT / name for name in SERVED_FOLDERS if (ROOT / name).is_dir()]
    start = time.perf_counter()
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), folders)
    TIMINGS["server_start_s"] = round(time.perf_counter() - start, 2)
    yield server
    server.stop()


def npm_needed(reason: str) -> None:
    """Skip (fail under REQUIRE_BROWSER=1) when npm is missing and its tarballs are not cached."""
    if shutil.which("npm") is None:
        reason = f"{reason} needs npm once (apt-get install npm) to fetch its pinned browser files"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def site(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reading copy of notebooks/, built into a temporary folder with tools/site/build.py."""
    builder = site_builder()
    if not all((NPM_CACHE / a.tarball_name).exists() for a in builder.pinned_assets().values()):
        npm_needed("building the site")
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    builder.build([ROOT / "notebooks"], out, NPM_CACHE)
    TIMINGS["site_build_s"] = round(time.perf_counter() - start, 2)
    return out


@pytest.fixture(scope="session")
def axe_ready(browser: Any) -> None:
    """axe-core's pinned tarball in the cache (fetched with npm when missing)."""
    if not axe_tarball_cached():
        npm_needed("axe-core")


@pytest.fixture
def offline(browser: Any) -> Iterator[OfflinePage]:
    holder = OfflinePage(browser)
    yield holder
    holder.context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page; console errors are kept on ``page.console_errors``."""
    context = browser.new_context(viewport=VIEWPORT)
    new_page = context.new_page()
    new_page.set_default_timeout(30_000)
    new_page.console_errors = []
    new_page.on("console", lambda m: m.type == "error" and new_page.console_errors.append(m.text))
    yield new_page
    context.close()


@pytest.fixture(scope="session")
def timings() -> dict[str, Any]:
    """Where tests record what they measured (printed and saved at the end, never asserted)."""
    return TIMINGS


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # wall time of the browser tests: setup, call and teardown of every test in this folder
    if "tests/browser/" in report.nodeid.replace("\\", "/"):
        TIMINGS["session_s"] = TIMINGS.get("session_s", 0.0) + report.duration


def _has_timings() -> bool:
    return any(TIMINGS[key] for key in ("notebooks", "latency_ms", "site"))


def summary_lines() -> list[str]:
    """The timing table printed at the end of the run."""
    lines = []
    if "server_start_s" in TIMINGS:
        lines.append(f"JupyterLab start: {TIMINGS['server_start_s']:.1f} s")
    for name, t in TIMINGS["notebooks"].items():
        if "run_s" not in t:
            lines.append(f"{name}: did not finish running ({t.get('test_s', 0):.1f} s spent)")
            continue
        lines.append(f"{name}: open to idle kernel {t['open_s']:.1f} s, restart and run all {t['run_s']:.1f} s, "
                     f"whole test {t.get('test_s', t['total_s']):.1f} s")
    for name, t in TIMINGS["latency_ms"].items():
        moves = ", ".join("-" if m is None else f"{m:.0f}" for m in t["moves_ms"])
        median = "n/a" if t["median_ms"] is None else f"{t['median_ms']:.0f} ms"
        lines.append(f"{name} ({t['control']}): key to updated readout, median {median} over [{moves}] ms")
    if "site_build_s" in TIMINGS:
        lines.append(f"site build (tools/site/build.py): {TIMINGS['site_build_s']:.1f} s")
    for name, t in TIMINGS["site"].items():
        lines.append(f"site {name}: rendered offline in {t['render_s']:.2f} s")
    if "session_s" in TIMINGS:
        lines.append(f"browser tests in all: {TIMINGS['session_s']:.1f} s")
    return lines


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _has_timings():
        return
    medians = [t["median_ms"] for t in TIMINGS["latency_ms"].values() if t["median_ms"] is not None]
    if medians:
        TIMINGS["latency_median_of_medians_ms"] = round(statistics.median(medians), 1)
    ARTIFACTS.mkdir(exist_ok=True)
    TIMINGS_FILE.write_text(json.dumps(TIMINGS, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _has_timings():
        return
    terminalreporter.section("browser timings (reported, not asserted)")
    for line in summary_lines():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"written to {TIMINGS_FILE.relative_to(ROOT)}")
