"""check(): stubs, bad returns, the report, and the run/judge split a batch grader relies on."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from helpers.exercise_answers import (
    CORRECT,
    masked_where,
    masked_zeroed_after,
    sdpa_matmul,
    tiled_dense,
    tiled_online,
)

from lessonlib.exercises import (
    ERROR,
    EXERCISES,
    FAILED,
    MANUAL_QUESTIONS,
    NOT_ATTEMPTED,
    PASSED,
    SECTIONS,
    Outcome,
    Value,
    check,
    get_exercise,
    hidden_cases,
    judge,
    public_cases,
    run_case,
    run_cases,
)
from lessonlib.exercises.runner import build_probe, is_probe

ROOT = Path(__file__).resolve().parents[1]


def _stub(*args):
    raise NotImplementedError("write this")


# --- not attempted ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXERCISES))
def test_stub_reads_not_attempted(name, capsys):
    answer = None if EXERCISES[name].kind == "value" else _stub
    result = check(name, answer)
    assert result.status == NOT_ATTEMPTED
    assert result.points == 0 and result.max_points == EXERCISES[name].points
    assert result.diagnoses == [] and result.failed_cases == []
    assert "not attempted yet" in capsys.readouterr().out


def test_partly_written_answer_is_not_not_attempted():
    def partial(scores, allowed):
        if np.ndim(scores) > 1:
            raise NotImplementedError("batches later")
        return masked_where(scores, allowed)

    result = check("masked_softmax", partial, quiet=True)
    assert result.status == FAILED
    assert {f.reason for f in result.failed_cases} == {"not_implemented"}
    assert 0 < result.points < result.max_points


# --- bad returns --------------------------------------------------------------------------------


def _raises(*args):
    raise ValueError("operands could not be broadcast together")


def _exits(*args):
    raise SystemExit(1)


BAD = [
    ("wrong shape", lambda s, a: masked_where(s, a)[..., :-1], "wrong_shape"),
    ("a list", lambda s, a: masked_where(s, a).tolist(), "not_an_array"),
    ("NaN", lambda s, a: np.full(np.broadcast_shapes(np.shape(s), np.shape(a)), np.nan), "non_finite"),
    ("an exception", _raises, "raised"),
    ("SystemExit", _exits, "raised"),
    ("None", lambda s, a: None, "wrong_type"),
    ("a string", lambda s, a: "weights", "wrong_type"),
    ("an object array", lambda s, a: np.array([object()] * 3), "wrong_type"),
    ("booleans", lambda s, a: np.asarray(a) & (np.asarray(s) > 0), "wrong_dtype"),
]


@pytest.mark.parametrize(("label", "answer", "reason"), BAD, ids=[b[0] for b in BAD])
def test_bad_return_gives_a_clear_failed_case(label, answer, reason, capsys):
    result = check("masked_softmax", answer)
    assert result.status == FAILED
    assert result.points == 0
    assert reason in {f.reason for f in result.failed_cases}
    for failed in result.failed_cases:
        assert failed.expected and failed.got and failed.description
    out = capsys.readouterr().out
    assert "expected:" in out and "got:" in out and "Traceback" not in out


def test_list_with_right_entries_says_so():
    result = check("causal_mask", lambda n: np.tril(np.ones((n, n), dtype=bool)).tolist(), quiet=True)
    assert {f.reason for f in result.failed_cases} == {"not_an_array"}
    assert "entries are right" in result.failed_cases[0].detail


def test_exception_names_the_line_of_the_answer():
    def answer(scores, allowed):
        x = 1
        return x / 0

    result = check("masked_softmax", answer, quiet=True)
    assert re.search(r"ZeroDivisionError: division by zero \(line \d+ of the answer cell\)",
                     result.failed_cases[0].got)


def test_tuple_answers_need_both_parts():
    result = check("scaled_dot_product_attention", lambda q, k, v: sdpa_matmul(q, k, v)[0], quiet=True)
    assert {f.reason for f in result.failed_cases} == {"wrong_type"}
    assert "(output, weights)" in result.failed_cases[0].detail


def test_float_byte_count_is_refused_with_a_reason():
    result = check("score_matrix_bytes", lambda b, h, n, e: b * h * n * n * e / 1, quiet=True)
    assert {f.reason for f in result.failed_cases} == {"wrong_type"}
    assert "int" in result.failed_cases[0].detail


def test_value_answer_is_not_revealed():
    result = check("q1_context", 3.0, quiet=True)
    assert result.status == FAILED
    assert "4" not in result.failed_cases[0].expected + result.failed_cases[0].detail


def test_non_function_answer_fails_without_raising():
    result = check("causal_mask", 42, quiet=True)
    assert result.status == FAILED and result.failed_cases[0].reason == "raised"


def test_unknown_exercise_is_an_error_result_not_an_exception(capsys):
    result = check("masked_sofmax", masked_where)
    assert result.status == ERROR
    assert "masked_softmax" in capsys.readouterr().out


def test_an_answer_that_writes_into_its_inputs_is_told_so_and_judged_on_the_original_inputs():
    def in_place(scores, allowed):
        out = masked_where(scores, allowed)
        scores[...] = 0.0  # vandalise the caller's array
        return out

    result = check("masked_softmax", in_place, quiet=True)
    assert result.status == FAILED and result.points == 0 and result.diagnosis_names == []
    assert {f.reason for f in result.failed_cases} == {"changed_input"}
    assert all("`scores`" in f.got and "returned value is right" in f.detail for f in result.failed_cases)


def test_writing_into_the_buffers_of_a_cached_step_is_allowed():
    from helpers.exercise_answers import step_vectorised

    def in_place(query, key, value, cache_keys, cache_values, length):
        n = query.shape[-2]
        cache_keys[..., length:length + n, :], cache_values[..., length:length + n, :] = key, value
        out, weights, _, _ = step_vectorised(query, key, value, cache_keys, cache_values, length)
        return out, weights, cache_keys, cache_values

    assert check("cached_attention_step", in_place, seed=3, quiet=True).status == PASSED


def _rope_float32(x, positions):
    x = x.astype(np.float32)
    d = x.shape[-1]
    t = np.asarray(positions, dtype=np.float32)[:, None] / np.float32(10000) ** (
        np.arange(0, d, 2, dtype=np.float32) / np.float32(d))
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(t) - x[..., 1::2] * np.sin(t)
    out[..., 1::2] = x[..., 0::2] * np.sin(t) + x[..., 1::2] * np.cos(t)
    return out


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4])
def test_an_answer_computed_in_float32_passes(seed):
    assert check("apply_rope", _rope_float32, seed=seed, quiet=True).status == PASSED


def test_no_numpy_warnings_escape(recwarn):
    check("scaled_dot_product_attention", CORRECT["scaled_dot_product_attention"][0], quiet=True)
    check("masked_softmax", masked_zeroed_after, quiet=True)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# --- the report ---------------------------------------------------------------------------------


def test_report_names_misconception_hint_and_section():
    result = check("masked_softmax", masked_zeroed_after, quiet=True)
    text, page = result.report_text(), result.report_html()
    diag = result.diagnoses[0]
    assert diag.name == "zeroed_after_softmax"
    assert diag.notebook == "notebooks/02_masking.ipynb"
    for part in (diag.title, diag.hint, diag.reread, "public-1"):
        assert part in text
    assert "<code>zeroed_after_softmax</code>" in page and "failed" in page
    assert str(result) == text


def test_passed_report_is_one_line():
    result = check("causal_mask", CORRECT["causal_mask"][0], quiet=True)
    assert result.report_text() == "causal_mask: passed, 1 / 1 points (all 3 cases)"


def test_html_report_escapes_what_the_answer_returned():
    result = check("q1_context", "<script>", quiet=True)
    assert "<script>" not in result.report_html()


def test_result_is_plain_data():
    result = check("masked_softmax", masked_zeroed_after, quiet=True)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["status"] == "failed"
    assert data["diagnoses"][0]["name"] == "zeroed_after_softmax"
    assert data["diagnoses"][0]["reread"].startswith("notebooks/02_masking.ipynb, section ")


# --- one source of truth: cases, hidden cases, and the run / judge split --------------------------


@pytest.mark.parametrize("name", list(EXERCISES))
def test_hidden_cases_come_from_the_seed(name):
    first, again, other = hidden_cases(name, 11), hidden_cases(name, 11), hidden_cases(name, 12)
    assert len(first) == len(again)
    for a, b in zip(first, again):
        assert a.id == b.id and a.description == b.description
        for x, y in zip(a.args, b.args):
            np.testing.assert_array_equal(x, y)
    if first:  # another seed, other numbers (the shapes, and so most descriptions, are every seed's)
        assert any(not np.array_equal(x, y) for a, b in zip(first, other) for x, y in zip(a.args, b.args))
    ids = [c.id for c in public_cases(name) + first]
    assert len(ids) == len(set(ids))


def test_case_inputs_are_plain_data():
    for name in EXERCISES:
        for case in public_cases(name) + hidden_cases(name, 3):
            for arg in case.args:
                assert isinstance(arg, (np.ndarray, int, float, str)) and not isinstance(arg, bool), (name, case.id)
                if isinstance(arg, np.ndarray):
                    assert arg.dtype != object
                if isinstance(arg, str):  # a function handed to the answer, described as data
                    assert is_probe(arg) and callable(build_probe(arg)), (name, case.id)


def _to_wire(outcome: Outcome) -> tuple[str, dict[str, bytes]]:
    """What a worker could send back: JSON plus .npy bytes (no pickles)."""
    arrays: dict[str, bytes] = {}

    def value(v: Value | None, key: str):
        if v is None:
            return None
        data = v.data
        if isinstance(data, np.ndarray):
            buf = io.BytesIO()
            np.save(buf, data, allow_pickle=False)
            arrays[key] = buf.getvalue()
            data = {"npy": key}
        items = None if v.items is None else [value(item, f"{key}.{i}") for i, item in enumerate(v.items)]
        return {"type_name": v.type_name, "data": data, "items": items}

    doc = {"status": outcome.status, "error": outcome.error, "peak_bytes": outcome.peak_bytes,
           "value": value(outcome.value, "v")}
    return json.dumps(doc), arrays


def _from_wire(text: str, arrays: dict[str, bytes]) -> Outcome:
    def value(d):
        if d is None:
            return None
        data = d["data"]
        if isinstance(data, dict):
            data = np.load(io.BytesIO(arrays[data["npy"]]), allow_pickle=False)
        items = None if d["items"] is None else tuple(value(i) for i in d["items"])
        return Value(d["type_name"], data, items)

    doc = json.loads(text)
    return Outcome(doc["status"], value(doc["value"]), doc["error"], doc["peak_bytes"])


@pytest.mark.parametrize(
    ("name", "answer"),
    [("masked_softmax", masked_zeroed_after), ("scaled_dot_product_attention", sdpa_matmul),
     ("tiled_attention", tiled_dense), ("q1_context", 8.0), ("causal_mask", _raises)],
)
def test_judging_outcomes_sent_back_as_plain_data_matches_check(name, answer):
    exercise = get_exercise(name)
    cases = public_cases(name) + hidden_cases(name, 5)
    outcomes = [
        _from_wire(*_to_wire(run_case(answer, c.args, call=c.call, trace_memory=c.trace_memory)))
        for c in cases
    ]
    graded = judge(name, cases, outcomes).for_learner()  # check() gives a learner nothing of hidden cases
    direct = check(name, answer, seed=5, quiet=True)
    assert graded.status == direct.status
    assert graded.points == direct.points
    assert graded.diagnosis_names == direct.diagnosis_names
    assert [f.reason for f in graded.failed_cases] == [f.reason for f in direct.failed_cases]
    assert graded.max_points == exercise.points


def test_judge_never_raises_on_malformed_outcomes():
    cases = public_cases("masked_softmax")
    junk = [Outcome("returned", Value("numpy.ndarray", np.array(["a"]))), Outcome("weird"),
            Outcome("returned", None), Outcome("returned", Value("tuple", None, (Value("int", 3),))),
            Outcome("raised", error="boom")]
    result = judge("masked_softmax", cases, junk)
    assert result.status == FAILED and result.points == 0
    assert judge("masked_softmax", cases, junk[:2]).status == ERROR
    assert judge("no_such_exercise", cases, junk).status == ERROR


def test_memory_requirement_counts_only_with_memory_cases():
    name = "tiled_attention"
    dense = check(name, tiled_dense, quiet=True)
    assert "builds_full_score_matrix" in dense.diagnosis_names
    assert dense.points == pytest.approx(0.5 * dense.max_points)
    hidden = hidden_cases(name, 1)
    plain = [c for c in hidden if "memory" not in c.tags]
    assert len(plain) == len(hidden) - 1  # one hidden memory case: where the grader reads its verdict
    assert judge(name, plain, run_cases(tiled_dense, plain)).status == PASSED
    assert judge(name, hidden, run_cases(tiled_dense, hidden)).failed_cases[-1].case == "memory"
    assert check(name, tiled_online, quiet=True).points == 3


def _full_matrix_then_query_blocks(rows: int):
    def answer(query, key, value, block_size):
        scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])  # (L, S) first, whole
        out = np.empty(scores.shape[:-1] + (value.shape[-1],))
        for q0 in range(0, scores.shape[-2], rows):  # then "tiled" over query blocks of its own size
            block = scores[..., q0:q0 + rows, :]
            w = np.exp(block - block.max(-1, keepdims=True))
            out[..., q0:q0 + rows, :] = (w / w.sum(-1, keepdims=True)) @ value
        return out

    return answer


@pytest.mark.parametrize("rows", [1, 16, 128, 4096])
def test_a_full_matrix_is_caught_whatever_block_the_loop_uses(rows):
    result = check("tiled_attention", _full_matrix_then_query_blocks(rows), quiet=True)
    assert result.diagnosis_names == ["builds_full_score_matrix"]
    assert [f.reason for f in result.failed_cases] == ["memory"]
    assert result.points == pytest.approx(0.5 * result.max_points)


# --- sections and the written question ----------------------------------------------------------


def _headings(path: Path) -> set[str]:
    nb = nbformat.read(path, as_version=4)
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                # drop a "3. " section number and a " [unit · everything]" route mark
                match = re.match(r"^#{1,6}\s+(?:\d+\.\s+)?(.*?)(?:\s+\[[a-z ·]+\])?\s*$", line)
                if match:
                    found.add(match.group(1))
    return found


@pytest.mark.parametrize("key", list(SECTIONS))
def test_pointed_heading_exists_in_its_notebook(key):
    section = SECTIONS[key]
    path = ROOT / section.notebook
    if not path.exists():
        pytest.skip(f"{section.notebook} is not written yet")
    assert section.heading in _headings(path), f"{section.notebook} has no heading {section.heading!r}"


def test_every_section_is_used():
    from lessonlib.exercises import all_diagnoses

    used = {d.section for d in all_diagnoses().values()} | {q.section for q in MANUAL_QUESTIONS.values()}
    assert used == set(SECTIONS)


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_written_question_cell_is_tagged_for_manual_grading(folder):
    for question in MANUAL_QUESTIONS.values():
        nb = nbformat.read(ROOT / folder / question.notebook, as_version=4)
        cells = [c for c in nb.cells if c.get("id") == question.cell_id]
        assert len(cells) == 1
        cell = cells[0]
        assert cell.cell_type == "markdown"
        assert {"answer", "manual"} <= set(cell.metadata.get("tags", []))
        assert ("### BEGIN SOLUTION" in cell.source) == (folder == "solutions")


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_each_exercise_has_answer_and_check_cells(folder):
    for name, exercise in EXERCISES.items():
        nb = nbformat.read(ROOT / folder / exercise.notebook, as_version=4)
        checks = [c for c in nb.cells if c.cell_type == "code" and c.source.strip() == f'check("{name}", {name})']
        assert len(checks) == 1, (folder, name)
        answers = [c for c in nb.cells if "answer" in c.metadata.get("tags", []) and c.cell_type == "code"
                   and re.search(rf"^(def {name}\(|{name} =)", c.source, re.M)]
        assert len(answers) == 1, (folder, name)


def test_one_status_enum_serves_checks_and_the_grader():
    from lessonlib.exercises.results import Status
    from lessonlib.grading import notebooks, records

    assert Status("passed") is Status.PASSED and Status.PASSED == "passed"
    assert records.TIMEOUT is Status.TIMEOUT and notebooks.CELL_ERROR is Status.CELL_ERROR
    assert set(records.STATUS_WORDS) == set(Status)  # every status has its words in the feedback
    assert json.loads(json.dumps({"status": Status.NEEDS_MANUAL})) == {"status": "needs_manual_grading"}


def test_grader_notes_read_the_cells_as_typed_so_a_magic_is_not_a_missing_name(monkeypatch) -> None:
    """In a kernel, ``In`` holds ``%matplotlib inline`` as a get_ipython() call; the grader reads the
    notebook, where the magic is a line it skips. check() must judge from the typed cells too."""
    from types import SimpleNamespace

    from lessonlib.exercises import checker

    typed = ["", "%matplotlib inline\nimport numpy as np\n\ndef masked_softmax(scores, allowed):\n"
                 "    return np.where(allowed, scores, 0.0)\n"]
    magic_call = "get_ipython().run_line_magic('matplotlib', 'inline')"
    translated = [typed[0], typed[1].replace("%matplotlib inline", magic_call)]
    shell = SimpleNamespace(history_manager=SimpleNamespace(input_hist_raw=typed), user_ns={"In": translated})
    monkeypatch.setattr(checker, "jupyter_shell", lambda: shell)
    assert checker.grader_notes("masked_softmax") == []
    # the same cell read from the translated history would name get_ipython: the reason to prefer the typed one
    shell.history_manager.input_hist_raw = []
    assert any("get_ipython" in note for note in checker.grader_notes("masked_softmax"))
