"""Committed notebooks carry no editor noise, and cleaning them keeps what the course needs.

"Clean" is what nb-clean makes of a notebook with the options of the pre-commit hook (and of
`make clean-notebooks`): cell metadata other than tags, execution timings and transient fields
go; stored outputs, execution counts, notebook metadata (the explorers' saved widget state among
it) and tags stay. A failure here is fixed by `make clean-notebooks`, which changes no output.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("notebooks", "solutions", "exercises")


def hook_options() -> list[str]:
    """The options after `nb-clean clean` in the nb-clean hook of .pre-commit-config.yaml."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = [h for repo in config["repos"] for h in repo["hooks"] if h["id"] == "nb-clean"]
    assert len(hooks) == 1, f"expected one nb-clean hook, found {len(hooks)}"
    entry = shlex.split(hooks[0]["entry"])
    assert entry[:2] == ["nb-clean", "clean"], entry
    return entry[2:]


def makefile_options() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.search(r"^NB_CLEAN_OPTIONS\s*:?=(.*)$", text, flags=re.MULTILINE)
    assert found, "the Makefile defines no NB_CLEAN_OPTIONS"
    return found.group(1).split()


def nb_clean() -> str:
    """The nb-clean executable of this environment (the `test` extra installs it)."""
    beside = Path(sys.executable).parent / "nb-clean"
    found = str(beside) if beside.exists() else shutil.which("nb-clean")
    if found is None:
        pytest.fail("nb-clean is not installed: `pip install -e '.[test]'` (or `make test`) installs it",
                    pytrace=False)
    return found


def run_nb_clean(command: str, *paths: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([nb_clean(), command, *hook_options(), *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_makefile_and_the_hook_clean_alike() -> None:
    assert makefile_options() == hook_options()
    keep = set(hook_options())
    assert {"--preserve-cell-outputs", "--preserve-execution-counts", "--preserve-notebook-metadata"} <= keep


def test_hooks_pin_the_versions_the_test_extra_installs() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hook_pins = {dep for repo in config["repos"] for h in repo["hooks"] for dep in h.get("additional_dependencies", [])}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert {pin.split("==")[0] for pin in hook_pins} == {"ruff", "nb-clean"}, hook_pins
    for pin in hook_pins:
        assert pin in extras["test"], f"{pin} is pinned in .pre-commit-config.yaml but not in the test extra"


def test_committed_notebooks_are_clean() -> None:
    done = run_nb_clean("check", *NOTEBOOK_DIRS)
    assert done.returncode in (0, 1), f"nb-clean could not check the notebooks:\n{done.stderr}"
    assert done.returncode == 0, (
        "these notebooks carry metadata the pre-commit hook would remove; run `make clean-notebooks` "
        f"(no output changes, so no re-execution is needed) and commit:\n{done.stdout}")


def test_cleaning_removes_editor_noise_and_keeps_outputs_tags_and_widget_state(tmp_path: Path) -> None:
    source = ROOT / "notebooks" / "02_masking.ipynb"
    original = json.loads(source.read_text(encoding="utf-8"))
    assert "widgets" in original["metadata"] and any(c.get("outputs") for c in original["cells"])
    tagged = [i for i, c in enumerate(original["cells"]) if c["metadata"].get("tags")]
    assert tagged, "02_masking has no tagged cell to keep"

    dirty = json.loads(json.dumps(original))
    code = [c for c in dirty["cells"] if c["cell_type"] == "code"]
    code[0]["metadata"].update(collapsed=False, scrolled=True, ExecuteTime={"end_time": "2026-01-01T00:00:00"},
                               execution={"iopub.status.idle": "2026-01-01T00:00:00Z"})
    dirty["cells"][tagged[0]]["metadata"]["jupyter"] = {"source_hidden": True}
    dirty["metadata"]["signature"] = "sha256:0"
    path = tmp_path / source.name
    path.write_text(json.dumps(dirty, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")

    flagged = run_nb_clean("check", path)
    assert flagged.returncode == 1
    for noise in ("collapsed", "scrolled", "ExecuteTime", "execution", "jupyter", "signature"):
        assert f"metadata {noise}" in flagged.stdout or f"metadata: {noise}" in flagged.stdout, flagged.stdout

    cleaned = run_nb_clean("clean", path)
    assert cleaned.returncode == 0, cleaned.stderr
    result = json.loads(path.read_text(encoding="utf-8"))
    assert result["metadata"] == {k: v for k, v in original["metadata"].items() if k != "signature"}
    assert len(result["cells"]) == len(original["cells"])
    for before, after in zip(original["cells"], result["cells"]):
        assert after["source"] == before["source"]
        kept = {"tags": before["metadata"]["tags"]} if before["metadata"].get("tags") else {}
        assert after["metadata"] == kept
        assert after.get("outputs") == before.get("outputs")
        assert after.get("execution_count") == before.get("execution_count")
