"""What a learner sees in JupyterLab: every lesson notebook run top to bottom in Chromium.

For each notebook in notebooks/: open it, restart the kernel and run all cells, wait for an idle
kernel, then check that no cell shows an error (cells tagged ``raises-exception`` are meant to),
that every explorer rendered its readout, that Tab reaches each of its controls, and that one
keyboard move changes the readout to ``describe(compute(new settings))`` computed here; axe-core
finds no serious or critical WCAG 2.1 AA violation inside the explorers (every control has an
accessible name, every figure a text alternative; JupyterLab's own interface is not checked). One
notebook from exercises/ and one from solutions/ are run too, and their check reports read.
A screenshot per notebook goes to artifacts/screenshots/; timings are reported, not asserted.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from axe import blocking, explain, violations
from explorer_moves import EXPLORER_MOVES, Move, moves_for
from lab_driver import (
    explorer_boxes,
    focus_target,
    keyboard_latency,
    model_cells,
    open_notebook,
    readout_text,
    restart_and_run_all,
    tab_reaches_every_control,
)

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LATENCY_MOVES = 7
EXPLORER_AREA = ".jp-OutputArea-output .widget-vbox:has(> .lessonlib-readout)"  # the widgets, not JupyterLab
BACK = {"ArrowRight": "ArrowLeft", "ArrowLeft": "ArrowRight", "ArrowDown": "ArrowUp", "ArrowUp": "ArrowDown"}


def test_every_lesson_notebook_has_a_row_in_the_explorer_table():
    """Runs without a browser, so a missing row is caught everywhere, not only where Chromium is."""
    assert NOTEBOOKS, "notebooks/ holds no notebooks"
    for path in NOTEBOOKS:
        for move in moves_for(path):
            assert move.expected_readout(), f"{move.explorer}: describe() returned nothing for {move.after}"


def test_the_table_has_no_row_for_a_missing_notebook():
    stems = {p.stem for p in NOTEBOOKS}
    assert set(EXPLORER_MOVES) <= stems, f"rows for notebooks that do not exist: {set(EXPLORER_MOVES) - stems}"


# --- Helpers --------------------------------------------------------------------------------------


def unexpected_errors(page: Any, path: Path) -> list[str]:
    """Errors in the page outside cells tagged raises-exception, and code cells that never ran."""
    nb = nbformat.read(path, as_version=4)
    cells = model_cells(page)
    assert len(cells) == len(nb.cells), f"the page shows {len(cells)} cells, {path.name} has {len(nb.cells)}"
    problems = []
    for i, (cell, source) in enumerate(zip(cells, nb.cells)):
        expected = "raises-exception" in source.metadata.get("tags", [])
        first_line = source.source.strip().splitlines()[0][:70] if source.source.strip() else ""
        for out in cell["outputs"]:
            if out["type"] == "error" and not expected:
                problems.append(f"cell {i} ({first_line!r}): {out['ename']}: {out['evalue']}")
        if cell["type"] == "code" and source.source.strip() and cell["count"] is None:
            problems.append(f"cell {i} ({first_line!r}) never ran (an earlier cell stopped the run)")
    return problems


def wait_for_readout(box: Any, expected: str, *, timeout_ms: float = 20_000) -> None:
    from playwright.sync_api import expect

    expect(box.locator(".lessonlib-readout")).to_have_text(expected, timeout=timeout_ms)


def measure_latency(page: Any, box: Any, move: Move) -> dict[str, Any]:
    """Alternate a slider (or the moved control) back and forth; ms from key to changed readout."""
    handles = box.locator(".noUi-handle")
    if handles.count():
        target, forward, label = handles.first, ("ArrowRight",), "slider"
        if float(target.get_attribute("aria-valuenow")) >= float(target.get_attribute("aria-valuemax")):
            forward = ("ArrowLeft",)
    else:
        target, forward, label = focus_target(box, move.control, move.option), move.keys, move.control
    back = tuple(BACK.get(key, key) for key in forward)
    moves = [keyboard_latency(page, box, target, forward if i % 2 == 0 else back) for i in range(LATENCY_MOVES)]
    measured = [m for m in moves if m is not None]
    return {"control": label, "moves_ms": [None if m is None else round(m, 1) for m in moves],
            "median_ms": round(statistics.median(measured), 1) if measured else None}


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def run_in_lab(page: Any, lab: Any, path: Path, timings: dict[str, Any]) -> None:
    """Open ``path`` (a file under a served folder), restart and run all; record the wall times."""
    relpath = path.relative_to(ROOT).as_posix()
    start = time.perf_counter()
    open_notebook(page, lab, relpath)
    opened = time.perf_counter()
    restart_and_run_all(page)
    ran = time.perf_counter()
    timings["notebooks"][relpath] = {"open_s": round(opened - start, 2), "run_s": round(ran - opened, 2),
                                     "total_s": round(ran - start, 2)}


# --- Tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_lesson_notebook_in_jupyterlab(path: Path, lab: Any, page: Any, timings: dict[str, Any],
                                       axe_ready: None) -> None:
    moves = moves_for(path)
    relpath = path.relative_to(ROOT).as_posix()
    start = time.perf_counter()
    try:
        run_in_lab(page, lab, path, timings)
        problems = unexpected_errors(page, path)
        assert not problems, f"{relpath} in JupyterLab:\n" + "\n".join(problems)

        boxes = explorer_boxes(page)
        assert len(boxes) == len(moves), (
            f"{relpath}: expected {len(moves)} explorer readout(s) ({[m.explorer for m in moves]}), "
            f"the page shows {len(boxes)}; console errors: {page.console_errors[-5:]}")
        if boxes:
            found = violations(page, include=EXPLORER_AREA)
            assert not blocking(found), f"{relpath}'s explorers, axe-core at WCAG 2.1 AA:\n{explain(found)}"
        for box, move in zip(boxes, moves):
            assert readout_text(box), f"{move.explorer}: the readout is empty"

            controls, reached = tab_reaches_every_control(page, box)
            assert controls, f"{move.explorer}: no focusable control"
            assert reached == controls, f"{move.explorer}: Tab reached controls {reached} of {controls}"

            target = focus_target(box, move.control, move.option)
            target.focus()  # keyboard only from here: no clicks
            for key in move.keys:
                page.keyboard.press(key)
            wait_for_readout(box, move.expected_readout())

            timings["latency_ms"][f"{path.stem}/{move.explorer}"] = measure_latency(page, box, move)
        if boxes:
            boxes[0].scroll_into_view_if_needed()
    finally:
        screenshot(page, path.stem)
        timings["notebooks"].setdefault(relpath, {}).update(
            {"test_s": round(time.perf_counter() - start, 2)})
        lab.delete_sessions_and_kernels()


def exercise_notebook(folder: str) -> Path:
    """One notebook of ``folder``: the first whose name also exists in the other folder, else the first."""
    paths = sorted((ROOT / folder).glob("*.ipynb"))
    assert paths, f"{folder}/ holds no notebooks"
    other = "solutions" if folder == "exercises" else "exercises"
    shared = [p for p in paths if (ROOT / other / p.name).exists()]
    return (shared or paths)[0]


POINTS = re.compile(r"(\d+(?:\.\d+)?) / (\d+(?:\.\d+)?) points")


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_check_reports_in_jupyterlab(folder: str, lab: Any, page: Any, timings: dict[str, Any]) -> None:
    path = exercise_notebook(folder)
    relpath = path.relative_to(ROOT).as_posix()
    try:
        run_in_lab(page, lab, path, timings)
        problems = unexpected_errors(page, path)
        assert not problems, f"{relpath} in JupyterLab:\n" + "\n".join(problems)
        reports = page.locator(".jp-Notebook .lessonlib-check")
        texts = [reports.nth(i).inner_text().strip() for i in range(reports.count())]
        assert texts, f"{relpath}: no check report in the page"
        for text in texts:
            if folder == "exercises":
                assert "not attempted yet" in text, f"{relpath}: a stub's report reads {text!r}"
            else:
                points = POINTS.search(text)
                assert "passed" in text and points, f"{relpath}: a solution's report reads {text!r}"
                assert float(points.group(1)) == float(points.group(2)) > 0, f"{relpath}: not full points: {text!r}"
        reports.first.scroll_into_view_if_needed()
    finally:
        screenshot(page, f"{folder}-{path.stem}")
        lab.delete_sessions_and_kernels()
