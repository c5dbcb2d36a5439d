"""The seed of `lessonlib grade`: drawn at random for each assignment, kept, and never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.submissions import write_learner

from lessonlib import cli
from lessonlib.grading.notebooks import course_notebooks


def _seed_of(out: Path) -> int:
    """The assignment's seed, where it lives: the course gradebook beside ``out``."""
    import sqlite3

    with sqlite3.connect(out.parent / "gradebook.db") as conn:
        return int(conn.execute("SELECT seed FROM assignments WHERE name = ?", (out.name,)).fetchone()[0])


def test_grade_without_seed_draws_a_secret_seed_once_per_assignment(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No --seed: each new output folder (assignment) draws its own seed at random, keeps it for
    every later run, and never prints it. --seed chooses one; a folder graded with one seed keeps
    it when resumed without --seed."""
    write_learner(tmp_path / "subs" / "amy", {"02_masking.ipynb": "not a notebook"})
    subs = str(tmp_path / "subs")  # no learner code runs: the notebook is not one
    for out in ("one", "two"):
        assert cli.main(["grade", subs, "--out", str(tmp_path / out), "--quiet"]) == 0
    first = _seed_of(tmp_path / "one")
    assert first != _seed_of(tmp_path / "two")
    assert first not in (assignment_hash(c.name for c in course_notebooks()), 0)
    assert cli.main(["grade", subs, "--out", str(tmp_path / "one"), "--quiet"]) == 0
    assert _seed_of(tmp_path / "one") == first  # the same assignment keeps its seed
    said = capsys.readouterr()
    files = [p for p in (tmp_path / "one").rglob("*") if p.is_file() and ".grading" not in p.parts]
    everything = said.out + said.err + "".join(p.read_text(errors="replace") for p in files)
    assert str(first) not in everything
    assert os.stat(tmp_path / "one" / ".grading").st_mode & 0o077 == 0
    assert cli.main(["grade", subs, "--out", str(tmp_path / "term"), "--seed", "7", "--quiet"]) == 0
    assert cli.main(["grade", subs, "--out", str(tmp_path / "term"), "--quiet"]) == 0
    assert _seed_of(tmp_path / "term") == 7


def assignment_hash(names) -> int:
    """The seed the grader used to derive from the notebooks' names, which anyone could compute."""
    import hashlib

    joined = "\n".join(sorted(set(names))).encode()
    return int.from_bytes(hashlib.sha256(b"lessonlib assignment\n" + joined).digest()[:4], "big")
