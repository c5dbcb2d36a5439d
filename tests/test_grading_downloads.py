"""What an LMS download holds, found whole: resubmissions by one rule, notebooks in subfolders,
same-named learners kept apart, a wrong notebook flagged, the download's zip unpacked safely.

Each test reproduces a problem from issue 30 and fails on the code before the fix. Only the last
runs the grading command (one learner's stub and one wrong notebook, from a zip).
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import pytest
from grading_submissions import EXERCISES, WRONG_PADDING, masking, notebook, write_learner

from lessonlib import cli
from lessonlib.grading import records as r
from lessonlib.grading.lms import unzip
from lessonlib.grading.lms.downloads import RULE, find_learners
from lessonlib.grading.lms.unzip import DownloadError, unpack
from lessonlib.grading.run.batch import _assigned_only
from lessonlib.grading.run.notebooks import assignment_courses, course_notebooks
from lessonlib.grading.run.plans import plan_notebook

COURSES = course_notebooks()
MASKING = next(c for c in COURSES if c.name == "02_masking.ipynb")


def _age(path: Path, seconds_ago: float) -> Path:
    when = path.stat().st_mtime - seconds_ago
    os.utime(path, (when, when))
    return path


# --- one resubmission rule for both LMSs -----------------------------------------------------------


def test_moodle_grades_the_newer_resubmission_as_canvas_does(tmp_path: Path) -> None:
    folder = tmp_path / "moodle" / "Bob Smith_1001_assignsubmission_file_"
    write_learner(folder, {"02_masking.ipynb": masking({"padding_mask": WRONG_PADDING})["02_masking.ipynb"],
                           "02_masking (1).ipynb": notebook("02_masking.ipynb")})
    _age(folder / "02_masking.ipynb", 3600)
    (bob,) = find_learners([tmp_path / "moodle"], COURSES).learners
    assert bob.files["02_masking.ipynb"].name == "02_masking (1).ipynb"  # before: the older 02_masking.ipynb
    assert any("submitted 2 times" in n and "the latest, 02_masking (1).ipynb, was graded" in n and RULE in n
               for n in bob.notes)


def test_the_resubmission_number_decides_before_the_file_time(tmp_path: Path) -> None:
    folder = tmp_path / "canvas"
    write_learner(folder, {"smithbob_340934_208490100_02_masking.ipynb": notebook("02_masking.ipynb"),
                           "smithbob_340934_208490284_02_masking-1.ipynb": notebook("02_masking.ipynb",
                                                                                    source=EXERCISES)})
    _age(folder / "smithbob_340934_208490284_02_masking-1.ipynb", 3600)  # copied: its time says nothing
    (bob,) = find_learners([folder], COURSES).learners
    assert bob.files["02_masking.ipynb"].name == "smithbob_340934_208490284_02_masking-1.ipynb"


@pytest.mark.parametrize("lms", ["canvas", "moodle"])
def test_without_a_resubmission_number_the_newest_file_is_graded_on_both(tmp_path: Path, lms: str) -> None:
    if lms == "canvas":
        folder = tmp_path / "download"
        names = ["smithbob_340934_208490100_02_masking.ipynb", "smithbob_340934_208490101_my_masking.ipynb"]
        where = folder
    else:
        folder = tmp_path / "download" / "Bob Smith_1001_assignsubmission_file_"
        names = ["02_masking.ipynb", "my_masking.ipynb"]
        where = tmp_path / "download"
    write_learner(folder, {names[0]: notebook("02_masking.ipynb", source=EXERCISES),
                           names[1]: notebook("02_masking.ipynb")})
    _age(folder / names[0], 3600)
    (bob,) = find_learners([where], COURSES).learners
    assert bob.files["02_masking.ipynb"].name == names[1]  # before, on Moodle: the exactly named, older file


# --- subfolders, same names -------------------------------------------------------------------------


def test_notebooks_in_a_subfolder_of_a_learner_folder_are_found(tmp_path: Path) -> None:
    write_learner(tmp_path / "subs" / "alice" / "week2", masking())
    write_learner(tmp_path / "subs" / "bob", masking())
    learners = {lr.name: lr for lr in find_learners([tmp_path / "subs"], COURSES).learners}
    assert set(learners) == {"alice", "bob"}  # before: alice was silently absent
    assert learners["alice"].files["02_masking.ipynb"].parent.name == "week2"


def test_notebooks_in_a_subfolder_of_a_moodle_folder_are_found(tmp_path: Path) -> None:
    write_learner(tmp_path / "moodle" / "Bob Smith_1001_assignsubmission_file_" / "my work", masking())
    found = find_learners([tmp_path / "moodle"], COURSES)
    (bob,) = found.learners
    assert bob.files["02_masking.ipynb"].parent.name == "my work" and not found.unattributed


def test_two_learners_with_one_name_from_two_folders_stay_apart(tmp_path: Path) -> None:
    first = write_learner(tmp_path / "week2" / "alice", masking())
    second = write_learner(tmp_path / "late" / "alice", masking({"padding_mask": WRONG_PADDING}))
    learners = find_learners([tmp_path / "week2", tmp_path / "late"], COURSES).learners
    assert sorted(lr.key for lr in learners) == ["alice", "alice-2"]  # before: one alice, the newer file won
    assert {lr.files["02_masking.ipynb"].parent for lr in learners} == {first, second}
    assert all(any("2 submissions are named 'alice'" in n for n in lr.notes) for lr in learners)


# --- a notebook of another assignment --------------------------------------------------------------


def test_a_notebook_of_another_assignment_is_flagged_not_just_missing(tmp_path: Path) -> None:
    write_learner(tmp_path / "subs" / "bob", {"03_position.ipynb": notebook("03_position.ipynb")})
    (bob,) = find_learners([tmp_path / "subs"], COURSES).learners
    bob = _assigned_only(bob, assignment_courses(["02_masking"]))
    assert bob.instead == ["03_position.ipynb"] and not bob.files
    plans, _ = plan_notebook(MASKING, None, instead=bob.instead)
    assert {p.status for p in plans} == {r.WRONG_NOTEBOOK}  # before: not_submitted, unflagged
    assert r.WRONG_NOTEBOOK in r.FLAGGED and "03_position.ipynb" in plans[0].reason


def test_an_unknown_notebook_handed_in_is_kept_for_the_flag(tmp_path: Path) -> None:
    write_learner(tmp_path / "subs" / "bob", {"homework.ipynb": "{}"})
    (bob,) = find_learners([tmp_path / "subs"], COURSES).learners
    assert bob.instead == ["homework.ipynb"]
    plans, _ = plan_notebook(MASKING, None)
    assert {p.status for p in plans} == {r.NOT_SUBMITTED}  # nothing handed in at all: just missing


# --- the download's zip ------------------------------------------------------------------------------


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


def _nb(name: str, **kwargs: object) -> bytes:
    import nbformat

    return nbformat.writes(notebook(name, **kwargs)).encode()


def test_a_zip_is_refused_with_a_message_unless_it_may_be_unpacked(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "submissions.zip",
                   {"smithbob_340934_208490100_02_masking.ipynb": _nb("02_masking.ipynb")})
    with pytest.raises(DownloadError, match="unzip it first"):
        find_learners([archive], COURSES)  # before: a learner called "submissions" with 0 points
    found = find_learners([archive], COURSES, unpack_to=tmp_path / "unpacked")
    (bob,) = found.learners
    assert (bob.name, bob.lms_id) == ("smithbob", "340934")
    assert bob.files["02_masking.ipynb"].is_relative_to(tmp_path / "unpacked")


@pytest.mark.parametrize("name", ["../evil.ipynb", "/tmp/evil.ipynb", "a/../../evil.ipynb", "..\\evil.ipynb",
                                  "C:/evil.ipynb"])
def test_a_zip_whose_entries_climb_out_is_refused(tmp_path: Path, name: str) -> None:
    archive = _zip(tmp_path / "submissions.zip", {"ok.ipynb": b"{}", name: b"{}"})
    with pytest.raises(DownloadError, match="outside the folder"):
        unpack(archive, tmp_path / "out" / "x")
    assert not (tmp_path / "evil.ipynb").exists() and not (tmp_path / "out" / "x").exists()


def test_a_zip_holding_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("alice/02_masking.ipynb")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(DownloadError, match="symbolic link"):
        unpack(archive, tmp_path / "out")


def test_a_zip_bomb_is_refused_before_it_fills_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unzip, "MAX_UNPACKED_BYTES", 1 << 20)
    archive = _zip(tmp_path / "bomb.zip", {"a.ipynb": b"\0" * (4 << 20)})  # 4 MB of zeros, 4 kB zipped
    assert archive.stat().st_size < 20_000
    with pytest.raises(DownloadError, match="would unpack to"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_zip_that_packs_far_more_than_notebooks_do_is_refused_before_unpacking(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """64 MB of zeros in 64 kB: well under the 2 GB cap, which once let a 1.85 MB zip unpack to 1.9 GB,
    and a thousand times what it takes packed. The command line refuses it, naming the entry and the
    ratio, before writing anything."""
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("smithbob_340934_208490100_02_masking.ipynb", _nb("02_masking.ipynb"))
        with zf.open("jonesamy_412233_208490300_02_masking.ipynb", "w") as entry:
            for _ in range(64):
                entry.write(bytes(1 << 20))
    assert archive.stat().st_size < (1 << 20)
    out = tmp_path / "week2"
    code = cli.main(["grade", str(archive), "--out", str(out), "--timezone", "UTC", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert "the entry 'jonesamy_412233_208490300_02_masking.ipynb' would unpack to 67,108,864 bytes" in err
    assert f"more than the {unzip.MAX_RATIO} times a notebook packs to (a zip bomb?)" in err
    assert not (out / ".grading" / "unpacked").exists()


def test_a_zip_whose_small_entries_together_pack_too_well_is_refused(tmp_path: Path) -> None:
    """Entries below the size where one is judged alone (they may even share their packed bytes)
    are judged together, against the zip's own size."""
    archive = _zip(tmp_path / "bomb.zip", {f"{n}.ipynb": bytes(unzip.RATIO_FROM) for n in range(4)})
    with pytest.raises(DownloadError, match=r"it would unpack to 4,194,304 bytes from [\d,]+, [\d,]+ times"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_zip_whose_entry_lies_about_its_size_is_refused(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "liar.zip", {"a.ipynb": b"\0" * (4 << 20)})
    data = bytearray(archive.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # declared size: 1 kB
        at = data.find(signature)
        struct.pack_into("<I", data, at + offset, 1024)
    archive.write_bytes(bytes(data))
    with pytest.raises(DownloadError):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_grading_the_download_zip_finds_its_learners_and_flags_a_wrong_notebook(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive = _zip(tmp_path / "submissions.zip", {
        "smithbob_340934_208490100_03_position.ipynb": _nb("03_position.ipynb"),
        "jonesamy_412233_208490300_02_masking.ipynb": _nb("02_masking.ipynb"),
    })
    out = tmp_path / "out"
    code = cli.main(["grade", str(archive), "--out", str(out), "--notebooks", "02_masking", "--timeout", "2",
                     "--memory", "512", "--workers", "1", "--quiet", "--timezone", "UTC"])
    _, err = capsys.readouterr()
    assert code == 0, err
    learners = {lr["key"]: lr for lr in json.loads((out / "grades.json").read_text())["learners"]}
    assert set(learners) == {"smithbob_340934", "jonesamy_412233"}  # before: one learner called "submissions"
    assert {g["status"] for g in learners["smithbob_340934"]["exercises"]} == {r.WRONG_NOTEBOOK}
    assert all(g["status"] == r.PASSED for g in learners["jonesamy_412233"]["exercises"])
    summary = (out / "summary.csv").read_text()
    assert "wrong_notebook" in summary


def test_files_unpacked_from_a_zip_keep_their_times_for_the_newest_file_rule(tmp_path: Path) -> None:
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:  # the newer file first: the order in the zip decides nothing
        zf.writestr(zipfile.ZipInfo("smithbob_340934_208490101_my_masking.ipynb", (2026, 3, 2, 10, 0, 0)),
                    _nb("02_masking.ipynb"))
        zf.writestr(zipfile.ZipInfo("smithbob_340934_208490100_02_masking.ipynb", (2026, 3, 1, 10, 0, 0)),
                    _nb("02_masking.ipynb", source=EXERCISES))
    (bob,) = find_learners([archive], COURSES, unpack_to=tmp_path / "unpacked").learners
    assert bob.files["02_masking.ipynb"].name == "smithbob_340934_208490101_my_masking.ipynb"
