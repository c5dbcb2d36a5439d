"""The mechanical parts of "How a notebook teaches" (DESIGN section 1), checked on notebooks 00-06.

- a core path: every notebook's markdown outside its "Going deeper" sections is at most
  CORE_WORD_LIMIT words, and notebooks 01-06 mark their optional sections with such headings;
- predict, then run: notebooks 01-06 have at least three lines beginning ``**Predict.**`` that ask
  a question, each followed by a code cell and then by markdown that answers it;
- the formulas with shapes in 01, and multi-head attention explained before a cell uses it;
- no model answer to a written question anywhere a learner reads it (notebooks/, exercises/);
- one set of times: each notebook's header states the times tools/reading_times.py computes, and
  the map in 00 and the instructor guide state the same two numbers;
- the map in 00 names each notebook by the title it opens with.

Words are counted as tools/reading_times.py counts them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import reading_times as rt  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
LESSONS = ("00_start_here", "01_scaling", "02_masking", "03_position", "04_cost", "05_interpretation", "06_training",
           "07_capstone")
CORE_WORD_LIMIT = 1800
MIN_PREDICTS = 3


def _cells(name: str) -> list[dict]:
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell.get("source", []))


def _present(names):
    """pytest params for the notebooks that exist."""
    params = []
    for name in names:
        marks = []
        if not (NOTEBOOKS / f"{name}.ipynb").exists():
            marks.append(pytest.mark.skip(reason=f"notebooks/{name}.ipynb does not exist yet"))
        params.append(pytest.param(name, id=name, marks=marks))
    return params


# --- core path and Going deeper ---------------------------------------------------------------


def test_word_count_follows_the_stated_rule():
    text = "The score $q \\cdot k / \\sqrt{d_k}$ isn't *large*; d_k = 64.\n$$x = 1$$ (L, S) done"
    # The, score, <formula>, isn't, large, d_k, 64, <formula>, L, S, done
    assert rt.count_words(text) == 11


def test_going_deeper_section_ends_at_the_next_heading_of_its_level():
    cells = [
        {"cell_type": "markdown", "source": ["## 1. Core\n", "one two\n", "### Going deeper: extra\n", "three four\n"]},
        {"cell_type": "code", "source": ["x = 1"]},
        {"cell_type": "markdown", "source": ["#### still deeper\n", "five\n", "## 2. Core again\n", "six"]},
    ]
    lines = rt.notebook_lines(cells)
    optional = [line.text for line in lines if line.optional]
    assert optional == ["### Going deeper: extra", "three four", "x = 1", "#### still deeper", "five"]


@pytest.mark.parametrize("name", _present(LESSONS))
def test_core_path_is_short_enough(name):
    times = rt.measure(NOTEBOOKS / f"{name}.ipynb")
    assert times.core_words <= CORE_WORD_LIMIT, (
        f"{name}: {times.core_words} words of markdown on the core path, at most {CORE_WORD_LIMIT}; move precision "
        "corner cases, library tables or extra mechanisms under a heading that begins 'Going deeper'"
    )


@pytest.mark.parametrize("name", _present(LESSONS[1:]))
def test_optional_sections_are_marked_going_deeper(name):
    lines = rt.notebook_lines(_cells(name))
    headings = [line.heading for line in lines if line.heading and line.heading.lower().startswith("going deeper")]
    assert headings, f"{name} has no section whose heading begins 'Going deeper'"
    for line in lines:
        if line.kind == "markdown" and not line.heading and re.match(r"\s*\**going deeper", line.text, re.I):
            pytest.fail(f"{name}: {line.text!r} looks like a Going deeper marker but is not a heading")


# --- predict, then run ------------------------------------------------------------------------

PREDICT = re.compile(r"^\*\*Predict\.\*\*\s")


def _predicts(name: str) -> list[tuple[int, str]]:
    """(cell index, paragraph) of every Predict line: the line and the lines that follow it up to a blank."""
    found = []
    for index, cell in enumerate(_cells(name)):
        if cell["cell_type"] != "markdown":
            continue
        lines = _source(cell).splitlines()
        for i, line in enumerate(lines):
            if PREDICT.match(line):
                paragraph = [line]
                for rest in lines[i + 1:]:
                    if not rest.strip():
                        break
                    paragraph.append(rest)
                found.append((index, " ".join(paragraph)))
    return found


@pytest.mark.parametrize("name", _present(LESSONS[1:]))
def test_predict_then_run(name):
    cells = _cells(name)
    predicts = _predicts(name)
    assert len(predicts) >= MIN_PREDICTS, f"{name}: {len(predicts)} '**Predict.**' lines, at least {MIN_PREDICTS}"
    for index, paragraph in predicts:
        assert "?" in paragraph, f"{name}, cell {index}: a Predict line asks a question: {paragraph!r}"
        following = cells[index + 1:]
        assert following and following[0]["cell_type"] == "code", (
            f"{name}, cell {index}: the cell after a Predict line is the code that answers it"
        )
        answer = next((c for c in following if c["cell_type"] == "markdown"), None)
        assert answer is not None and not PREDICT.match(_source(answer).lstrip()), (
            f"{name}, cell {index}: markdown after the code cell gives the answer before anything else is asked"
        )


# --- the formulas in 01 -----------------------------------------------------------------------


def _markdown(name: str) -> str:
    return "\n".join(_source(c) for c in _cells(name) if c["cell_type"] == "markdown")


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


FORMULAS_01 = {
    "single-head attention": r"\operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V",
    "Q's shape": "Q:(L,d_k)",
    "K's shape": "K:(S,d_k)",
    "V's shape": "V:(S,d_v)",
    "one head": r"\text{head}_h=\operatorname{softmax}",
    "concatenate and project": r"\operatorname{Concat}(\text{head}_1,\dots,\text{head}_H)\,W_o",
    "W_o's shape": r"W_o:(H\cdotd_{\text{head}},d_{\text{model}})",
    "the head width": r"d_{\text{head}}=d_{\text{model}}/H",
}


@pytest.mark.parametrize("what", list(FORMULAS_01))
def test_scaling_notebook_writes_the_formulas_in_latex(what):
    assert _squash(FORMULAS_01[what]) in _squash(_markdown("01_scaling")), f"01_scaling does not write {what} in LaTeX"


def test_multi_head_is_explained_before_a_cell_uses_it():
    cells = _cells("01_scaling")
    explained = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "Concat" in _source(c))
    first_use = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
                     and re.search(r"multi_head|init_multi_head", _source(c)))
    assert explained < first_use, f"01_scaling uses heads in cell {first_use}, explains them in cell {explained}"


def test_scaling_notebook_measures_the_variance_in_numpy():
    code = "\n".join(_source(c) for c in _cells("01_scaling") if c["cell_type"] == "code")
    assert re.search(r"\.var\(\)", code) and re.search(r"np\.sqrt\(d", code), (
        "01_scaling computes the score variance with and without 1/sqrt(d_k) in a few visible NumPy lines"
    )


def test_q1_is_asked_not_answered_before_its_exercise():
    for name in ("00_start_here", "01_scaling"):
        for cell in _cells(name):
            text = _source(cell) + "".join(
                "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                for o in cell.get("outputs", []))
            assert not re.search(r"context\s*=\s*4(\.0+)?\b|\(2 \+ 6\) / 2|one half each", text), (
                f"{name} gives away the answer to the lesson's first question: {text[:200]!r}"
            )
            assert "q1_context" not in text or cell["cell_type"] == "markdown", (
                f"{name} runs a check of q1_context, whose hints give the answer away"
            )


# --- no model answer where a learner reads ------------------------------------------------------

SOLUTION = re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.DOTALL)
SHINGLE = 8  # words in a row that would only match if a model answer were copied
# How a paraphrased model answer announces itself to the reader.
ANSWER_MARKERS = re.compile(r"\b(model answer|here is our answer|our answer:|for graders)")


def _normalised_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _written_model_answers() -> dict[str, set[tuple[str, ...]]]:
    """Every SHINGLE-word run of each written (markdown) model answer in solutions/."""
    answers: dict[str, set[tuple[str, ...]]] = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            for match in SOLUTION.finditer(_source(cell)):
                words = _normalised_words(match.group(1))
                answers[f"{path.name} cell {index}"] = {
                    tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)
                }
    return answers


def _learner_texts():
    for folder in ("notebooks", "exercises"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
                outputs = "".join(
                    "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                    for o in cell.get("outputs", []))
                yield f"{folder}/{path.name}", _source(cell) + "\n" + outputs


def test_the_written_model_answers_are_found():
    answers = _written_model_answers()
    assert answers, "no written model answer between BEGIN/END SOLUTION in a markdown cell of solutions/"
    assert all(len(shingles) > 10 for shingles in answers.values())


@pytest.mark.parametrize("folder", ["notebooks", "exercises"])
def test_no_model_answer_where_a_learner_reads(folder):
    answers = _written_model_answers()
    for where, text in _learner_texts():
        if not where.startswith(folder):
            continue
        words = _normalised_words(text)
        runs = {tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}
        for answer, shingles in answers.items():
            copied = runs & shingles
            assert not copied, f"{where} repeats the model answer of {answer}: {' '.join(sorted(copied)[0])!r}"
        lowered = " ".join(text.lower().split())
        marker = ANSWER_MARKERS.search(lowered)
        assert marker is None, f"{where} introduces an answer to a written question ({marker and marker[0]!r})"


def test_no_lesson_notebook_writes_out_the_bucket_rule_of_exercise_3_6():
    """03 states T5's bucket rule in prose and prints the engine's buckets: no code cell computes them."""
    for name in LESSONS:
        for index, cell in enumerate(_cells(name)):
            text = _source(cell)
            if cell["cell_type"] == "code" and "bucket" in text:
                assert not re.search(r"\b(np|math)\.log\b", text), f"{name}, cell {index} computes buckets by hand"


def test_07_leaves_the_reading_of_its_length_table_to_question_7_2():
    """After 07 prints the length table, its prose up to the next heading reads no mechanism's row but
    the two that section 6 measures further (the mask alone and ALiBi)."""
    cells = _cells("07_capstone")
    table = next(i for i, c in enumerate(cells) if "catalog.length_table()" in _source(c))
    after = _source(cells[table + 1]).split("\n## ")[0].lower()
    assert "7.2" in after
    assert not re.search(r"sinusoidal|rope|rotary|learned|relative|t5", after), after


# --- one set of times -------------------------------------------------------------------------

TIMES_CELL = r"(\d+)-(\d+) min / (?:(\d+)-(\d+) min|no Going deeper)"
MAP_ROW = re.compile(r"^\|\s*\[`(\d\d_\w+)`\]\([^)]*\)\s*\|\s*([^|]+?)\s*\|\s*" + TIMES_CELL + r"\s*\|", re.M)
GUIDE_ROW = re.compile(r"^\|\s*`notebooks/(\d\d_\w+)`\s*\|\s*([^|]+?)\s*\|\s*" + TIMES_CELL + r"\s*\|", re.M)

Span = tuple[int, int]


def _spans(match: re.Match, first: int) -> tuple[Span, Span | None]:
    """(core range, full range or None) from the groups of a times cell that start at ``first``."""
    core = (int(match[first]), int(match[first + 1]))
    full = None if match[first + 2] is None else (int(match[first + 2]), int(match[first + 3]))
    return core, full


def _map_times() -> dict[str, tuple[Span, Span | None]]:
    return {m[1]: _spans(m, 3) for m in MAP_ROW.finditer(_markdown("00_start_here"))}


def _guide_times() -> dict[str, tuple[Span, Span | None]]:
    text = (ROOT / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    return {m[1]: _spans(m, 3) for m in GUIDE_ROW.finditer(text)}


def _header_times(name: str) -> tuple[Span, Span | None] | None:
    for cell in _cells(name)[:3]:
        if cell["cell_type"] == "markdown" and (match := rt.TIME_PATTERN.search(_source(cell))):
            return _spans(match, 1)
    return None


def test_code_is_weighed_by_length_and_difficulty():
    one_line = rt.code_weight("print(1)")
    nested = "\n".join(["def pairs(n):", "    out = []", "    for i in range(n):", "        for j in range(i):",
                        "            out.append((i, j))", "    return out", "", "# a comment", "import numpy as np",
                        "print(len(pairs(4)))"])
    weight = rt.code_weight(nested)
    assert (one_line.lines, one_line.loops, one_line.functions, one_line.new_names) == (1, 0, 0, 0)
    assert (weight.lines, weight.loops, weight.nesting, weight.functions) == (7, 2, 1, 1)
    assert weight.new_names == 4  # pairs, out, i, j (an import is free)
    assert weight.minutes > 3 * one_line.minutes
    known = {"pairs", "out", "i", "j"}
    assert rt.code_weight(nested, known).new_names == 0


def test_a_time_is_a_range_from_the_estimate_to_a_fifth_more():
    assert rt.time_range(100) == (100, 120)
    assert rt.time_range(12) == (10, 15)
    assert rt.hour_range(450) == "7.5-9 h"


def test_map_and_guide_list_every_lesson_with_the_same_times():
    map_times, guide_times = _map_times(), _guide_times()
    assert set(map_times) == set(LESSONS[1:]), f"the map in 00 lists {sorted(map_times)}"
    assert set(guide_times) == set(LESSONS), f"the instructor guide lists {sorted(guide_times)}"
    for name in LESSONS[1:]:
        assert map_times[name] == guide_times[name], (
            f"{name}: the map in 00 says {map_times[name]}, the instructor guide {guide_times[name]}"
        )


@pytest.mark.parametrize("name", _present(LESSONS))
def test_header_states_the_computed_times(name):
    header = _header_times(name)
    times = rt.measure(NOTEBOOKS / f"{name}.ipynb")
    assert header is not None, f"{name}: no header line of the form {rt.TIME_LINE!r}"
    computed = (times.core_range, times.full_range if times.has_going_deeper else None)
    assert header == computed, (
        f"{name}: the header says {header}, tools/reading_times.py computes {computed}; write {times.time_line!r}"
    )
    guide = _guide_times()[name]
    assert guide == header, f"{name}: the instructor guide says {guide}, the header {header}"
    if name != "00_start_here":
        assert _map_times()[name] == header, f"{name}: the map in 00 says {_map_times()[name]}, the header {header}"


def test_map_and_guide_state_the_whole_courses_computed_totals():
    line = rt.totals(ROOT).line
    assert line in _markdown("00_start_here"), f"the map in 00 should say {line!r}"
    assert line in (ROOT / "docs" / "instructor-guide.md").read_text(encoding="utf-8"), (
        f"the instructor guide should say {line!r}")


def test_map_titles_are_the_notebooks_titles():
    for match in MAP_ROW.finditer(_markdown("00_start_here")):
        name, title = match[1], match[2]
        path = NOTEBOOKS / f"{name}.ipynb"
        if not path.exists():
            continue
        first = next(line for c in _cells(name) if c["cell_type"] == "markdown"
                     for line in _source(c).splitlines() if line.startswith("# "))
        assert title in first, f"the map calls {name} {title!r}, but it opens with {first!r}"
