"""``lessonlib export``: the LMS files in a folder of their own, for every learner or, after a
regrade, only for the learners whose grade or feedback changed since the last export."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pytest
from helpers.submissions import masking, write_learner

from lessonlib import cli

MASKING = "02_masking.ipynb"
ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section,Attention homework (98765),Current Score\n"
          "    Points Possible,,,,,20,\n"
          "\"Smith, Bob\",340934,S1,bsmith,A,,50\n\"Jones, Amy\",412233,S2,ajones,A,,60\n"
          "\"Lee, Cy\",512345,S3,clee,B,,70\n")
KEYS = {"smithbob_340934": "340934", "jonesamy_412233": "412233", "leecy_512345": "512345"}


def _imported(folder: Path) -> list[str]:
    """The learner ids lms-import.csv grades (Canvas's Points Possible row left out)."""
    with open(folder / "lms-import.csv", newline="") as f:
        return [row["ID"] for row in csv.DictReader(f) if row["ID"]]


def _zipped(folder: Path) -> list[str]:
    with zipfile.ZipFile(folder / "canvas-reupload.zip") as archive:
        return sorted(name.split("_")[1] for name in archive.namelist())


def test_a_changed_only_export_after_an_override_holds_exactly_that_learner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    download = tmp_path / "canvas"
    for n, key in enumerate(KEYS):  # Canvas's names: login_userid_submissionid_file
        write_learner(download, {f"{key}_{9000 + n}_{MASKING}": masking()[MASKING]})
    roster = tmp_path / "gradebook-export.csv"
    roster.write_text(ROSTER)
    out = tmp_path / "week2"
    assert cli.main(["grade", str(download), "--out", str(out), "--roster", str(roster), "--assignment",
                     "Attention homework", "--notebooks", MASKING, "--timeout", "2", "--memory", "512",
                     "--quiet"]) == 0

    assert cli.main(["export", "--out", str(out), "--to", str(tmp_path / "upload-1"), "--changed-only"]) == 0
    assert "no earlier export" in capsys.readouterr().out  # the first export holds everyone
    assert sorted(_imported(tmp_path / "upload-1")) == sorted(KEYS.values())
    assert _zipped(tmp_path / "upload-1") == sorted(KEYS.values())

    assert cli.main(["override", "--out", str(out), "jonesamy_412233", "masked_softmax", "0", "--reason",
                     "the answer was copied from the lesson"]) == 0
    assert cli.main(["export", "--out", str(out), "--to", str(tmp_path / "upload-2"), "--changed-only"]) == 0
    assert "jonesamy_412233" in capsys.readouterr().out
    assert _imported(tmp_path / "upload-2") == ["412233"]
    assert _zipped(tmp_path / "upload-2") == ["412233"]
    with open(tmp_path / "upload-2" / "lms-import.csv", newline="") as f:
        assert [row["Student"].strip() for row in csv.DictReader(f)][0] == "Points Possible"  # Canvas needs it

    assert cli.main(["export", "--out", str(out), "--to", str(tmp_path / "upload-3"), "--changed-only"]) == 0
    assert _imported(tmp_path / "upload-3") == [] and not (tmp_path / "upload-3" / "canvas-reupload.zip").exists()

    capsys.readouterr()
    assert cli.main(["history", "--out", str(out)]) == 0
    exports = [line for line in capsys.readouterr().out.splitlines() if " export " in line]
    assert len(exports) == 3 and "'learners': ['jonesamy_412233']" in exports[1]
