"""The grader's parts that run no learner code: wire format, cell selection, learners, statuses, gradebook."""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from helpers.submissions import ANSWER_CELLS, SOLUTIONS, correct_learner, masking, notebook, write_learner

from lessonlib import cli
from lessonlib.exercises import EXERCISES, Outcome, Value, get_exercise, run_case
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.isolation import sandbox, trial, wire
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.lms.submissions import discover
from lessonlib.grading.notebooks import CourseNotebook, Notebook, course_notebooks, read_notebook
from lessonlib.grading.reports.gradebook import GRADES_COLUMNS, feedback_markdown, write_gradebook
from lessonlib.grading.run.assess import assess, manual_grade
from lessonlib.grading.run.plans import ManualAnswer, plan_notebook
from lessonlib.grading.run.results import TaskResult, read_results
from lessonlib.grading.run.resume import forgive_dead_grader, load_suspects

COURSES = course_notebooks()
MASKING = next(c for c in COURSES if c.name == "02_masking.ipynb")
LIMITS = Limits(cpu_seconds=2, memory_mb=256)


# --- wire format ------------------------------------------------------------------------------------


def _round_trip(outcome: Outcome) -> Outcome:
    arrays: list[np.ndarray] = []
    encoded = wire.encode_outcome(outcome, arrays)
    stream = wire.json_frame(encoded) + b"".join(wire.npy_frame(a) for a in arrays)
    parsed, problem = wire.read_frames(io.BytesIO(stream), len(stream), array_limit=2**20)
    assert problem is None
    return wire.decode_outcome(parsed[0], parsed[1:], Outcome, Value)


def test_outcomes_cross_as_json_and_npy_unchanged() -> None:
    weights = np.array([[0.25, 0.75], [1.0, 0.0]])
    outcome = run_case(lambda q: (weights @ q, weights, 3, 2.5, np.float32(np.inf), True, 1 + 2j), (np.ones(2),))
    back = _round_trip(outcome)
    assert back.status == "returned" and back.value.type_name == "tuple"
    items = back.value.items
    np.testing.assert_array_equal(items[1].data, weights)
    assert [i.data for i in items[2:]] == [3, 2.5, np.inf, True, 1 + 2j]
    assert items[4].type_name == "numpy.float32"
    failed = _round_trip(run_case(lambda: _raise(BlockingIOError(11, "no more")), ()))
    assert failed.error.startswith("BlockingIOError") and failed.value is None
    assert failed.error_types == ("BlockingIOError", "OSError", "Exception") and failed.errno == 11


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_cut_stream_is_reported() -> None:
    stream = wire.json_frame({"kind": "done"}) + wire.npy_frame(np.zeros(3)) + wire.json_frame({"kind": "next"})
    f = io.BytesIO(stream)
    frames, problem = wire.read_frames(f, len(stream) - 20, array_limit=2**20)
    assert frames[0] == {"kind": "done"} and len(frames) == 2  # the frames before the cut are kept
    assert "cut off" in problem and f.tell() == len(stream) - 20


@pytest.mark.parametrize("array", [np.array([{"a": 1}], dtype=object),
                                   np.zeros(2, dtype=[("x", "f8"), ("y", "i4")]),
                                   np.array(["text"])])
def test_only_numeric_arrays_are_accepted_back(array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    with pytest.raises(wire.WireError):
        wire.load_npy(buffer.getvalue(), 2**20)


def test_npy_header_must_match_its_data_and_the_size_limit() -> None:
    data = wire.npy_frame(np.zeros((4, 4)))[wire.HEADER_SIZE:]
    with pytest.raises(wire.WireError, match="does not match"):
        wire.load_npy(data[:-8], 2**20)
    with pytest.raises(wire.WireError):
        wire.load_npy(data, 64)
    with pytest.raises(wire.WireError):
        wire.load_json(b"[" * 100_000)


# --- reading notebooks and choosing cells -------------------------------------------------------------


@pytest.mark.parametrize("text, problem", [
    ('{"cells": [', "not valid JSON"),
    ("[1, 2]", "not a notebook"),
    ('{"cells": [], "nbformat": 3}', "format 3"),
    ('{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4}', "malformed cell"),
])
def test_unreadable_notebooks_are_described(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "02_masking.ipynb"
    path.write_text(text)
    assert problem in read_notebook(path).problem


def _plans(nb: nbformat.NotebookNode, tmp_path: Path) -> dict:
    path = tmp_path / "02_masking.ipynb"
    nbformat.write(nb, path)
    plans, _ = plan_notebook(MASKING, read_notebook(path))
    return {p.exercise: p for p in plans}


def test_the_answer_cell_runs_whole_and_other_cells_only_define(tmp_path: Path) -> None:
    extra = [(3, "%matplotlib inline\nimport matplotlib.pyplot as plt\nSCALE = 2.0\nplt.plot([1])\n"
                 "def helper(x):\n    return x\nprint('side effect')\nfrom lessonlib import causal_mask")]
    plans = _plans(notebook("02_masking.ipynb", extra=extra), tmp_path)
    program = plans["masked_softmax"].program
    sources = "\n".join(step.source for step in program)
    assert [s.label for s in program].count("answer") == 1
    assert "SCALE = 2.0" in sources and "def helper" in sources and "import numpy as np" in sources
    for absent in ("plt", "print(", "check(", "%matplotlib", "from lessonlib import causal_mask"):
        assert absent not in sources.replace("import math", ""), absent
    answer = next(s for s in program if s.label == "answer")
    assert answer.filename == f"<answer cell {ANSWER_CELLS['masked_softmax']}>"


def test_answer_cell_found_by_id_when_its_tag_is_gone(tmp_path: Path) -> None:
    nb = notebook("02_masking.ipynb")
    for cell in nb.cells:
        cell.metadata.pop("tags", None)
    plans = _plans(nb, tmp_path)
    assert all(p.status is None for p in plans.values())


def test_an_untagged_cell_defining_the_function_is_graded_with_a_note(tmp_path: Path) -> None:
    nb = notebook("02_masking.ipynb", delete=("padding_mask",),
                  extra=[(5, "def padding_mask(lengths, max_length):\n    return None")])
    plan = _plans(nb, tmp_path)["padding_mask"]
    assert plan.status is None and "was graded instead" in plan.notes[0]


def test_syntax_error_in_the_answer_cell(tmp_path: Path) -> None:
    plan = _plans(notebook("02_masking.ipynb", answers={"causal_mask": "def causal_mask(n:\n    pass"}),
                  tmp_path)["causal_mask"]
    assert plan.status == "cell_error" and "not valid Python" in plan.reason


def test_learners_are_named_by_folder_or_file(tmp_path: Path) -> None:
    write_learner(tmp_path / "class" / "amy", masking())
    write_learner(tmp_path / "class" / "ben", {"renamed copy.ipynb": notebook("03_position.ipynb"),
                                               "notes.ipynb": nbformat.v4.new_notebook()})
    nbformat.write(notebook("01_scaling.ipynb"), tmp_path / "cat_01_scaling.ipynb")
    learners = discover([tmp_path / "class", tmp_path / "cat_01_scaling.ipynb"], COURSES)
    by_name = {lr.name: lr for lr in learners}
    assert sorted(by_name) == ["amy", "ben", "cat"]
    assert list(by_name["ben"].files) == ["03_position.ipynb"]  # recognised by its cells
    assert "notes.ipynb is not one of the exercise notebooks" in by_name["ben"].notes[0]
    assert list(by_name["cat"].files) == ["01_scaling.ipynb"]


# --- statuses from what the worker reported -----------------------------------------------------------


def _task(**fate: object) -> TaskResult:
    base = {"timed_out": None, "over_limit": False, "exit_code": 0, "signal": None}
    return TaskResult(fate={**base, **fate}, cells=[{"label": "answer", "raised": None, "lessonlib": []}],
                      defined=True)


def _assess(task: TaskResult | None, **kwargs: object) -> r.ExerciseGrade:
    plan = plan_notebook(MASKING, Notebook(Path("x.ipynb"), []))[0][0]
    plan.status = None
    exercise = get_exercise("masked_softmax")
    return assess(exercise, plan, exercise.public_cases(), task, LIMITS, **kwargs)


@pytest.mark.parametrize("fate, status, words", [
    ({"timed_out": "cpu", "signal": 24}, "timeout", "CPU time"),
    ({"timed_out": "wall", "signal": 9}, "timeout", "still running after 5 s"),
    ({"over_limit": True}, "result_too_large", "more than 32 MB"),
    ({"exit_code": 7}, "exited", "exit status 7"),
    ({"signal": 11, "exit_code": None}, "crashed", "SIGSEGV"),
])
def test_a_process_that_did_not_finish_never_counts_as_passed(fate: dict, status: str, words: str) -> None:
    exercise = get_exercise("masked_softmax")
    task = _task(**fate)
    first = exercise.public_cases()[0]  # one case finished, correctly, before the end
    task.outcomes[first.id] = run_case(exercise.reference, first.args)
    grade = _assess(task)
    assert grade.status == status and words in grade.reason
    assert 0 < grade.points < exercise.points and "only those count" in grade.reason


def test_lessonlib_calls_and_stopped_grader() -> None:
    task = _task()
    task.done = True
    task.lessonlib = {"lessonlib.masked_softmax"}
    for case in get_exercise("masked_softmax").public_cases():
        task.outcomes[case.id] = Outcome("raised", error="LessonlibUnavailable: not available while grading")
    grade = _assess(task)
    assert grade.status == "uses_lessonlib" and grade.points == 0
    assert _assess(None, stopped_grader=True).status == "stopped_grader"


# --- resuming after the grading process died ----------------------------------------------------------


def _marker(job: Path, key: str, finished: bool = False) -> None:
    """The worker's output as a dead grading process left it: ``key`` started (and maybe finished)."""
    job.mkdir(parents=True, exist_ok=True)
    records = wire.record({"kind": "started", "key": key})
    records += wire.record({"kind": "result", "key": key, "fate": {}}) if finished else b""
    with open(job / sandbox.OUT_FILE, "ab") as f:
        f.write(records)


def test_worker_records_are_read_once_into_task_results(tmp_path: Path) -> None:
    key = "02_masking--causal_mask"
    arrays: list[np.ndarray] = []
    outcome = wire.encode_outcome(run_case(lambda n: np.tri(n, dtype=bool), (3,)), arrays)
    public = (wire.json_frame({"kind": "cells", "cells": [{"label": "answer"}], "defined": True})
              + wire.json_frame({"kind": "case", "id": "c1", "outcome": outcome, "arrays": 1})
              + wire.npy_frame(arrays[0]) + wire.json_frame({"kind": "done"}))
    hidden = wire.json_frame({"kind": "case", "id": "hidden-1", "outcome": outcome, "arrays": 1})  # cut: no array
    data = (wire.record({"kind": "started", "key": key})
            + wire.record({"kind": "result", "key": key, "fate": {"exit_code": 0}, "hidden_fate": {"exit_code": 0},
                           "split": len(public)}, public + hidden)
            + wire.record({"kind": "started", "key": "02_masking--padding_mask"}))
    (tmp_path / sandbox.OUT_FILE).write_bytes(data[:-3])  # the grading process died mid-record
    report = read_results(tmp_path, LIMITS)
    task = report.results[key]
    assert task.done and not task.broken and task.fate == {"exit_code": 0}
    np.testing.assert_array_equal(task.outcomes["c1"].value.data, np.tri(3, dtype=bool))
    assert task.hidden is not None and not task.hidden.outcomes and "missing arrays" in task.hidden.broken
    assert report.in_flight() == [] and report.fatal is None  # the cut-off record is not read
    (tmp_path / sandbox.OUT_FILE).write_bytes(data + wire.record({"kind": "fatal", "error": "no python"}))
    report = read_results(tmp_path, LIMITS)
    assert report.in_flight() == ["02_masking--padding_mask"] and report.fatal == "no python"


def test_a_dead_grader_is_never_blamed_on_the_learner(tmp_path: Path) -> None:
    """Learner code cannot kill the grading process at any level: what was running when it died,
    alone or beside others, is run again and given no stopped_grader; a worker's death recorded
    before (suspects.json) stands, and a finished learner's job folder goes."""
    _marker(tmp_path / "one", "02_masking--masked_softmax")  # alone
    _marker(tmp_path / "one", "02_masking--causal_mask", finished=True)
    _marker(tmp_path / "two", "01_scaling--q1_context")  # two learners at once
    _marker(tmp_path / "three", "01_scaling--q1_context")
    (tmp_path / "three" / "suspects.json").write_text('{"02_masking--causal_mask": "culprit"}')
    _marker(tmp_path / "done", "02_masking--causal_mask", finished=True)
    forgive_dead_grader(tmp_path, {"done"})
    assert load_suspects(tmp_path / "one") == {} and load_suspects(tmp_path / "two") == {}
    assert load_suspects(tmp_path / "three") == {"02_masking--causal_mask": "culprit"}
    assert not list(tmp_path.glob(f"*/{sandbox.OUT_FILE}"))  # nothing left to blame on the next run either
    assert not (tmp_path / "done").exists()


def test_a_rerun_shows_no_points_of_the_earlier_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Resuming after hand-grading: a progress line with the saved result's points would show the
    earlier total (without manual.csv's marks), not the one the gradebook now holds."""
    out = tmp_path / "out"
    args = ["grade", str(correct_learner(tmp_path / "subs" / "alice")), "--out", str(out), "--timeout", "2"]
    assert cli.main([*args, "--quiet"]) == 0
    with open(out / "manual.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["points"] = rows[0]["max_points"]  # the written answer, graded by hand
    with open(out / "manual.csv", "w", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerows([dict(zip(rows[0], rows[0])), *rows])
    capsys.readouterr()
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    with open(out / "summary.csv", newline="") as f:
        total = float(next(csv.DictReader(f))["points"])
    shown = [float(p) for p in re.findall(r"alice: ([\d.]+)/[\d.]+ points", err)]
    assert all(p == total for p in shown), (shown, total)
    assert "1 learner(s), 1 already graded" in err


# --- gradebook ------------------------------------------------------------------------------------------


def _result() -> r.LearnerResult:
    q = next(c for c in COURSES if c.manual).manual[0]
    failed = r.ExerciseGrade("02_masking.ipynb", "masked_softmax", 1.0, 3.0, "failed", "x [y]", "1 of 3 cases.",
                             failed_cases=[{"case": "hidden-2", "description": "a hidden one", "reason": "wrong_values",
                                            "expected": "SECRET-EXPECTED", "got": "SECRET-GOT", "detail": "",
                                            "hidden": True}], hidden_passed=3, hidden_total=4)
    manual = manual_grade(ManualAnswer(q, "Weights are not effects.\n\nAblate a key.", "needs_manual_grading"))
    return r.LearnerResult("Zoë O'Neil", "Zo_O_Neil", "f", "bubblewrap", "now", [failed, manual])


def test_gradebook_files(tmp_path: Path) -> None:
    result = _result()
    write_gradebook(tmp_path, [result], Isolation("bubblewrap", "s"), LIMITS, 2)
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == GRADES_COLUMNS
    assert rows[1]["points"] == "" and rows[1]["status"] == "needs_manual_grading"
    summary = (tmp_path / "summary.csv").read_text().splitlines()
    pending = result.exercises[1].max_points  # the written question's points, all pending
    total = 3 + pending
    assert summary[1].startswith(f"{result.key},Zoë O'Neil,1,{total:g},{100 / total:.1f},{pending:g},0,1,,bubblewrap,,")
    text = feedback_markdown(result)
    assert "SECRET" not in text and "hidden-2" not in text and "a hidden one" not in text
    assert "3 of 4 hidden cases passed." in text
    assert "```\nWeights are not effects.\n\nAblate a key.\n```" in text and "**Needs manual grading**" in text
    assert json.loads((tmp_path / "grades.json").read_text())["learners"][0]["manual_pending"] == pending
    assert not list(tmp_path.glob(".*tmp"))


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "grades.csv"
    atomic_write_text(target, "old\n")

    class Boom(str):
        def encode(self, *args: object) -> bytes:
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write_text(target, Boom("new"))
    assert target.read_text() == "old\n" and len(list(tmp_path.iterdir())) == 1


@pytest.mark.skipif(sandbox.bwrap() is None, reason="bubblewrap (bwrap) is not installed")
def test_the_sandbox_binds_the_interpreter_and_nothing_of_the_course(tmp_path: Path) -> None:
    protected = sandbox.protected_folders(tmp_path / "out", [SOLUTIONS / "02_masking.ipynb"])
    command = sandbox.bwrap_command(["-c", "pass"], LIMITS, protected=protected)
    bound = [command[i + 1] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind", "--ro-bind-try")]
    root = SOLUTIONS.resolve().parent
    worker_files = {str(sandbox.WORKER), str(sandbox.RUNNER), str(sandbox.WIRE)}  # bound as single files
    assert not [b for b in bound if (root == Path(b) or root in Path(b).parents)
                and "/.venv" not in b and b not in worker_files]
    assert "--bind" not in command and "/tmp" not in bound and "/etc" not in bound
    assert sys.executable in command and "--as-pid-1" in command
    chdir = command.index("--chdir")  # /dev and the root are made read-only last, just before it
    assert command[chdir - 4:chdir] == ["--remount-ro", "/dev", "--remount-ro", "/"]
    with pytest.raises(sandbox.IsolationError, match="must not see"):
        sandbox.bwrap_command(["-c", "pass"], LIMITS, protected=[Path(sys.prefix).resolve() / "inside"])


# --- the command -------------------------------------------------------------------------------------


def test_grade_command_options() -> None:
    args = cli.build_parser().parse_args(["grade", "a", "b", "--out", "d", "--timeout", "3", "--memory", "256",
                                          "--workers", "1", "--seed", "7"])
    assert (args.timeout, args.memory, args.workers, args.seed, args.isolation) == (3.0, 256, 1, 7, "auto")


def test_a_different_seed_for_the_same_assignment_is_refused(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from lessonlib.grading import store

    write_learner(tmp_path / "subs" / "amy", masking())
    with store.open_gradebook(tmp_path / "gradebook.db", "test") as gb:
        store.ensure_assignment(gb, "out", ["02_masking.ipynb"], seed=1)
    capsys.readouterr()
    assert cli.main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--seed", "2",
                     "--notebooks", "02_masking.ipynb"]) == 2
    assert "keeps the seed it was first graded with" in capsys.readouterr().err
    assert cli.main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"), "--seed", "1"]) == 2
    assert "no such notebook, zip or folder" in capsys.readouterr().err


def test_every_exercise_belongs_to_a_course_notebook() -> None:
    names = [e for c in COURSES for e in c.exercises]
    assert sorted(names) == sorted(EXERCISES) and isinstance(COURSES[0], CourseNotebook)
    assert set(ANSWER_CELLS) == set(EXERCISES)


def test_pathological_cells_do_not_break_planning(tmp_path: Path) -> None:
    huge = "x = " + "+".join(["1"] * 21_000)  # more operators than parse() reads
    deep = "y = " + "+".join(["1"] * 15_000)  # 3.11+ raise RecursionError on it; 3.10 parses it
    plans = _plans(notebook("02_masking.ipynb", extra=[(3, huge), (3, deep)],
                            answers={"causal_mask": huge + "\ndef causal_mask(n):\n    return n"}), tmp_path)
    assert plans["masked_softmax"].status is None
    assert plans["causal_mask"].status == "cell_error"
    assert "21001 operators and brackets (at most 20000 are parsed)" in plans["causal_mask"].reason
    plans = _plans(notebook("02_masking.ipynb", answers={"causal_mask": deep + "\ndef causal_mask(n):\n    return n"}),
                   tmp_path)
    assert "nests more than 200 levels deep" in plans["causal_mask"].reason  # the same on every Python
    crash = "x = " + "+".join(["1"] * 200_000)  # Python 3.10's parser would crash the grading process on it
    plans = _plans(notebook("02_masking.ipynb", extra=[(3, crash)]), tmp_path)
    assert {p.status for p in plans.values()} == {"too_long"}  # refused before any cell is parsed


def test_cells_parse_in_several_threads_at_once() -> None:
    """The grader plans learners in several threads. A garbage collection during one thread's parse can
    run a finalizer that hands the interpreter to another thread's parse; CPython up to 3.12 then ends
    the first with "AST constructor recursion depth mismatch" unless parses take turns."""
    import threading
    import time

    from lessonlib.exercises.cells import parse

    source = "\n".join(f"def f{i}(x):\n    return [(a, b) for a in range(x) for b in {{'k': x + {i}}}]"
                       for i in range(60))
    failures: list[str] = []

    class Cycle:  # garbage only the collector frees: its finalizer yields the interpreter
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            time.sleep(0)

    def planner() -> None:
        for _ in range(20):
            for _ in range(40):
                Cycle()
            try:
                parse(source)
            except SystemError as exc:
                failures.append(str(exc))

    threads = [threading.Thread(target=planner) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_symbolic_links_in_a_learner_folder_are_not_followed(tmp_path: Path) -> None:
    folder = write_learner(tmp_path / "sly", {})
    (folder / "02_masking.ipynb").symlink_to(SOLUTIONS / "02_masking.ipynb")
    (learner,) = discover([folder], COURSES)
    assert learner.files == {} and "symbolic link" in learner.notes[0]


@pytest.mark.parametrize("path", [*sorted(sandbox.WORKER.glob("*.py")), sandbox.WIRE, sandbox.RUNNER],
                         ids=lambda p: p.name)
def test_the_worker_loads_nothing_of_lessonlib(path: Path) -> None:
    """The worker's package, and the files it loads by path before learner code runs, may import
    only the standard library, NumPy and the worker's own modules (learner code must find no real
    lessonlib in the worker). The files are those of the lessonlib imported, installed or not."""
    tree = ast.parse(path.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and not n.level}  # a relative import stays in the package
    own = {"worker"} if path.parent == sandbox.WORKER else set()
    assert imported <= set(sys.stdlib_module_names) | {"numpy", "__future__"} | own, imported


def test_without_bubblewrap_the_grader_falls_back_loudly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, level limits runs learner code as nobody, with a warning that says what it can reach;
    an ordinary user's learner code would run as the owner of the output folder, so the level is
    refused in one line that says which level to use instead."""
    monkeypatch.setattr(sandbox, "bwrap", lambda: None)
    (tmp_path / "course" / "week3").mkdir(parents=True)  # the course folder of an installed package: the cwd
    (tmp_path / "course" / "week3" / "notes.md").write_text("the instructor's notes\n")
    monkeypatch.chdir(tmp_path / "course")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".profile").write_text("export SECRET=1\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    if why := sandbox.python_refused_to_nobody():  # root, with a Python nobody cannot start: no level at all
        with pytest.raises(sandbox.IsolationError, match="learner code runs as nobody, who cannot start this Python"):
            trial.choose_isolation("auto", LIMITS, work=tmp_path, out_dir=out, submissions=[])
        pytest.skip(f"level limits is not available here: {why}")
    if os.geteuid() != 0:
        user = sandbox.user_name(os.getuid())
        with pytest.raises(sandbox.IsolationError) as refused:
            trial.choose_isolation("auto", LIMITS, work=tmp_path, out_dir=out, submissions=[])
        assert str(refused.value).startswith("no isolation level could be set up: bubblewrap: bwrap is not installed "
                                             f"| limits: learner code would run as {user}, who can read the output "
                                             "folder")
        assert "Grade at level bubblewrap (install it: sudo apt install bubblewrap" in str(refused.value)
        return
    isolation = trial.choose_isolation("auto", LIMITS, work=tmp_path, out_dir=out, submissions=[])
    assert isolation.level == "limits" and "bwrap is not installed" in isolation.reason
    assert isolation.warning.startswith("WARNING: learner code is NOT isolated")
    for said in ("solutions/", "network", "the output folder and the gradebook are the grader's alone"):
        assert said in isolation.warning
    assert isolation.verified["course_files_readable"] and isolation.verified["network"]  # the probe saw it
    # root's learner code runs as nobody, which cannot enter a home folder of root's, nor the output folder
    assert not any(isolation.verified[k] for k in ("home_folder_readable", "output_folder_readable",
                                                    "output_folder_writable", "can_signal_grader"))
    assert isolation.verified["runs_as"] == "nobody"
    with pytest.raises(sandbox.IsolationError, match="bwrap is not installed"):
        trial.choose_isolation("bubblewrap", LIMITS, work=tmp_path, out_dir=out, submissions=[])


def test_a_python_environment_under_tmp_is_bound_over_the_sandbox_s_empty_tmp(monkeypatch) -> None:
    """A checkout in a temporary folder keeps its virtual environment under /tmp. The sandbox's
    empty /tmp must be mounted first and the environment bound on top, or the worker's Python
    would vanish inside the sandbox."""
    venv = Path("/tmp/course-checkout/.venv")
    monkeypatch.setattr(sandbox, "bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "interpreter_folders", lambda: [venv])
    command = sandbox.bwrap_command(["worker.py"], Limits(), protected=[Path("/tmp/course-checkout")])
    pairs = list(zip(command, command[1:]))
    empty_tmp = pairs.index(("--tmpfs", "/tmp"))
    bound = pairs.index(("--ro-bind", str(venv)))
    assert empty_tmp < bound
    assert ("--dir", "/tmp/course-checkout") in pairs and ("--dir", "/tmp") not in pairs
    assert not any(a == "--bind" or (a == "--ro-bind" and b == "/tmp/course-checkout") for a, b in pairs)


def test_an_installed_package_is_bound_and_the_folder_the_grader_started_in_is_protected(tmp_path, monkeypatch) -> None:
    """`pip install lessonlib` puts the package inside the environment the sandbox binds. Learners have
    lessonlib anyway: that is no reason to refuse bubblewrap. What stays protected without a checkout is
    the folder the instructor started the grader in (their course folder), with the output folder and
    the submissions."""
    venv, course = tmp_path / "venv", tmp_path / "course"
    (venv / "lib" / "site-packages" / "lessonlib").mkdir(parents=True)
    course.mkdir()
    monkeypatch.chdir(course)
    monkeypatch.setattr(sandbox, "project_root", lambda: None)
    monkeypatch.setattr(sandbox, "bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "interpreter_folders", lambda: [venv])
    protected = sandbox.protected_folders(tmp_path / "out", [tmp_path / "submissions" / "ann.ipynb"])
    assert protected == [course, tmp_path / "out", tmp_path / "submissions"]
    command = sandbox.bwrap_command(["worker.py"], Limits(), protected=protected)
    pairs = list(zip(command, command[1:]))
    assert ("--ro-bind", str(venv)) in pairs
    assert not any(b == str(course) for a, b in pairs if a in ("--ro-bind", "--bind"))
    monkeypatch.chdir(venv / "lib")  # a course folder inside the environment would be exposed: refused
    with pytest.raises(sandbox.IsolationError, match="must not see"):
        sandbox.bwrap_command(["worker.py"], Limits(), protected=sandbox.protected_folders(tmp_path / "out", []))


def test_the_probe_tries_a_course_file_outside_the_python_environment(tmp_path, monkeypatch) -> None:
    """The trial sandbox must find the course unreadable. With an installed package the course is the
    folder the grader started in; a file of the environment inside it is readable on purpose."""
    course = tmp_path / "course"
    (course / ".venv" / "lib").mkdir(parents=True)
    (course / ".venv" / "lib" / "a.py").write_text("")
    (course / "week3").mkdir()
    (course / "week3" / "notes.md").write_text("")
    monkeypatch.chdir(course)
    monkeypatch.setattr(sandbox, "project_root", lambda: None)
    installed = {course / ".venv"}
    assert trial._course_file(installed) == course / "week3" / "notes.md"
    (course / "week3" / "notes.md").unlink()
    assert trial._course_file(installed) is None  # nothing to try: the probe leaves that check out


def test_scratch_folders_of_killed_graders_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root at level limits, nobody's scratch folders live in one folder per grading process; a
    grader killed with kill -9 leaves its folder, and the next one removes it (not a live one's)."""
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"{sandbox.SCRATCH_PREFIX}{dead.pid}-x1"
    live = tmp_path / f"{sandbox.SCRATCH_PREFIX}{os.getpid()}-x2"
    for top in (left, live):
        (top / "job").mkdir(parents=True)
    sandbox._sweep_scratch()
    assert not left.exists() and live.exists()
