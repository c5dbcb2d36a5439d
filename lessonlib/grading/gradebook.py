"""The gradebook: grades.csv, summary.csv, grades.json and feedback/<learner>.md, written atomically.

grades.csv has one row per learner and exercise (written questions included, with no points until
a person grades them); summary.csv one row per learner with the total; grades.json the same data
with every detail; each feedback file what a learner should read: status, points, the
misconceptions their answers show with hints, and their written answer marked for manual grading.
Hidden cases are named in feedback but their inputs and expected outputs are not shown.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_json, atomic_write_text
from lessonlib.grading.sandbox import Isolation, Limits

GRADES_COLUMNS = ("learner", "notebook", "exercise", "points", "max_points", "status", "diagnosis")
SUMMARY_COLUMNS = ("learner", "points", "max_points", "percent", "manual_pending", "passed", "exercises",
                   "flagged", "isolation")
MAX_WRITTEN = 20_000


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def _csv(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def grades_rows(results: Sequence[r.LearnerResult]) -> list[list[str]]:
    return [
        [res.learner, g.notebook, g.exercise, _num(g.points), _num(g.max_points), g.status, g.diagnosis]
        for res in results for g in res.exercises
    ]


def summary_rows(results: Sequence[r.LearnerResult]) -> list[list[str]]:
    rows = []
    for res in results:
        auto = [g for g in res.exercises if g.kind == "auto"]
        percent = 100 * res.points / res.max_points if res.max_points else 0.0
        flagged = "; ".join(f"{g.exercise}: {g.status}" for g in res.flagged)
        rows.append([res.learner, _num(res.points), _num(res.max_points), f"{percent:.1f}", _num(res.manual_pending),
                     str(sum(g.status == r.PASSED for g in auto)), str(len(auto)), flagged, res.isolation])
    return rows


def _block(text: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}\n{text}\n{fence}"


def _quote(text: str) -> str:
    if len(text) > MAX_WRITTEN:
        text = text[:MAX_WRITTEN] + "\n\n[... cut: the answer is longer than the grader copies]"
    return "\n".join("> " + line if line.strip() else ">" for line in text.splitlines())


def _exercise_md(g: r.ExerciseGrade) -> list[str]:
    words = r.STATUS_WORDS.get(g.status, g.status)
    if g.kind == "manual":
        lines = [f"### {g.exercise} (written answer, {_num(g.max_points)} points): {words}", ""]
        lines += [note for note in g.notes if note.startswith("Question:")] + [""]
        if g.answer_text:
            lines += ["Your answer:", "", _quote(g.answer_text), "",
                      f"**Needs manual grading** ({_num(g.max_points)} points): your instructor reads this answer.", ""]
        else:
            lines += [g.reason, ""]
        return lines
    lines = [f"### {g.exercise}: {_num(g.points)} / {_num(g.max_points)} points, {words}", ""]
    if g.reason:
        lines += [g.reason, ""]
    if g.diagnoses:
        lines += ["**What your answer shows**", ""]
        for d in g.diagnoses:
            lines += [f"- **{d['title']}** (`{d['name']}`): {d['message']}", f"  - Hint: {d['hint']}",
                      f"  - Reread: {d['reread']}"]
        lines.append("")
    if g.failed_cases:
        lines += ["**Cases that failed**", ""]
        for f in g.failed_cases[:4]:
            if f.get("hidden"):
                lines.append(f"- `{f['case']}` (a hidden case): {f['description']}: {f['reason'].replace('_', ' ')}")
                continue
            lines += [f"- `{f['case']}`: {f['description']}", "", "  expected:", "",
                      _indent(_block(f["expected"])), "", "  got:", "", _indent(_block(f["got"]))]
            if f.get("detail"):
                lines += ["", f"  {f['detail']}"]
            lines.append("")
        if len(g.failed_cases) > 4:
            lines.append(f"- ... and {len(g.failed_cases) - 4} more")
        lines.append("")
    for note in g.notes:
        lines += [f"Note: {note}", ""]
    return lines


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def feedback_markdown(result: r.LearnerResult) -> str:
    """The feedback file of one learner."""
    manual = [g for g in result.exercises if g.kind == "manual"]
    lines = [f"# Feedback: {result.learner}", ""]
    total = f"Automatic checks: **{_num(result.points)} / {_num(result.max_points)} points**."
    if result.manual_pending:
        total += f" Written answers ({_num(result.manual_pending)} points) are graded by hand."
    lines += [total, "", "| notebook | exercise | points | result |", "|---|---|---|---|"]
    for g in result.exercises:
        points = "to be graded" if g.points is None else f"{_num(g.points)} / {_num(g.max_points)}"
        lines.append(f"| {g.notebook.removesuffix('.ipynb')} | {g.exercise} | {points} | "
                     f"{r.STATUS_WORDS.get(g.status, g.status)} |")
    lines.append("")
    for note in result.notes:
        lines += [f"Note: {note}", ""]
    notebooks = list(dict.fromkeys(g.notebook for g in result.exercises))
    for notebook in notebooks:
        lines += [f"## {notebook}", ""]
        for g in result.exercises:
            if g.notebook == notebook:
                lines += _exercise_md(g)
    if manual:
        lines += ["---", "", "_Written answers marked \"needs manual grading\" have no points yet._", ""]
    return "\n".join(lines).rstrip() + "\n"


def gradebook_json(results: Sequence[r.LearnerResult], isolation: Isolation, limits: Limits, workers: int) -> dict:
    return {
        "tool": "lessonlib grade",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "isolation": isolation.to_dict(),
        "limits": {"cpu_seconds": limits.cpu_seconds, "wall_seconds": limits.wall_seconds,
                   "memory_mb": limits.memory_mb, "processes": limits.processes, "file_mb": limits.file_mb,
                   "result_mb": limits.result_mb},
        "workers": workers,
        "exercises": [{"exercise": e.name, "notebook": e.notebook, "max_points": e.points, "kind": "auto"}
                      for e in EXERCISES.values()]
                     + [{"exercise": q.name, "notebook": q.notebook, "max_points": q.points, "kind": "manual"}
                        for q in MANUAL_QUESTIONS.values()],
        "columns": {"grades.csv": list(GRADES_COLUMNS), "summary.csv": list(SUMMARY_COLUMNS)},
        "learners": [res.to_dict() for res in results],
    }


def write_gradebook(out: Path, results: Sequence[r.LearnerResult], isolation: Isolation, limits: Limits,
                    workers: int) -> list[Path]:
    """Write every gradebook file (each one atomically); returns their paths."""
    out = Path(out)
    written = []
    files = {
        "grades.csv": _csv(grades_rows(results), GRADES_COLUMNS),
        "summary.csv": _csv(summary_rows(results), SUMMARY_COLUMNS),
    }
    for res in results:
        files[f"feedback/{res.key}.md"] = feedback_markdown(res)
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.append(out / name)
    atomic_write_json(out / "grades.json", gradebook_json(results, isolation, limits, workers))
    written.append(out / "grades.json")
    return written
