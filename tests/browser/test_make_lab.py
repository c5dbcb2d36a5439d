"""`make lab` from a fresh clone lands on notebooks/00_start_here: in the link it prints, in the page
the browser is sent to, and in a fresh workspace in Chromium.

The test copies what `make lab` reads of a clone (the Makefile, pyproject.toml, notebooks/) into a
temporary folder and runs `make lab` there as a learner would, with the environment these tests run
in (`VENV=`, and `-o` on its stamp so make does not install it again). Jupyter's config, data,
runtime, settings and workspace folders are temporary and empty; a config file there sets the
address, port and token, and BROWSER names a script that records what the server asks a browser to
open (a redirect page holding the address). The first two checks need no browser; the third opens
the server's root in Chromium and reads the page's address and the notebook it shows.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from lab_driver import LabServer, free_port, kernel_idle, lab_environment

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix) if sys.prefix != sys.base_prefix else None  # the virtual environment running the tests
START_PAGE = "/lab/tree/notebooks/00_start_here.ipynb"
RECORDER = """#!/bin/sh
# what the server asks a browser to open: an address, or a redirect page that holds one
printf '%s' "$1" > "{record}"
"""
REDIRECT = re.compile(r"""url=([^"'\s>]+)""")


@dataclass
class MadeLab(LabServer):
    """`make lab` running in a copy of the course; ``process`` is make, leader of its own process group."""

    opened: Path = Path()  # where the browser script writes what it was given

    def send(self, sig: int) -> None:
        """Signal make and the server it started: their own process group, led by make."""
        os.killpg(self.process.pid, sig)


def _fresh_clone(folder: Path) -> Path:
    """What `make lab` reads of a clone, with the files' times kept (make compares them)."""
    folder.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, folder / name)
    shutil.copytree(ROOT / "notebooks", folder / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return folder


def _wait(what: str, found: Any, lab: MadeLab, timeout: float = 90.0) -> Any:
    """Poll ``found()`` until it returns something; fail with the server's log if make stops or time runs out."""
    deadline = time.monotonic() + timeout
    while (result := found()) is None:
        if lab.process.poll() is not None:
            pytest.fail(f"`make lab` exited with code {lab.process.returncode} before {what}:\n"
                        f"{lab.log_tail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:.0f} s:\n{lab.log_tail()}")
        time.sleep(0.2)
    return result


@pytest.fixture(scope="module")
def made_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MadeLab]:
    if VENV is None or not (VENV / "bin" / "jupyter-lab").exists():
        pytest.skip("the tests do not run in a virtual environment with JupyterLab (`make .venv/.installed`)")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    home = tmp_path_factory.mktemp("make-lab")
    clone = _fresh_clone(home / "course")
    env = lab_environment(home / "jupyter")
    port, token = free_port(), secrets.token_hex(24)
    config = {"ServerApp": {"ip": "127.0.0.1", "port": port, "port_retries": 0, "terminals_enabled": False},
              "IdentityProvider": {"token": token}, "LabApp": {"expose_app_in_browser": True}}
    (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").write_text(json.dumps(config))
    opened = home / "opened.txt"
    browser = home / "browser.sh"
    browser.write_text(RECORDER.format(record=opened))
    browser.chmod(0o755)
    env["BROWSER"] = str(browser)
    log = home / "make-lab.log"
    stamp = VENV / ".installed"
    with log.open("w") as out:
        process = subprocess.Popen(["make", "--no-print-directory", "lab", f"VENV={VENV}", "-o", str(stamp)],
                                   cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    lab = MadeLab(process, f"http://127.0.0.1:{port}", token, clone, log, opened)
    try:
        yield lab
    finally:
        lab.stop()


def _printed_link(lab: MadeLab) -> str | None:
    found = re.search(re.escape(lab.base_url) + r"(/\S*)\?token=", lab.log_tail(10**6))
    return found.group(1) if found else None


def _browser_page(lab: MadeLab) -> str | None:
    """The path the browser was sent to, read through the server's redirect page when it used one."""
    if not lab.opened.exists() or not (given := lab.opened.read_text().strip()):
        return None
    if given.startswith("file://"):
        page = Path(urlsplit(given).path).read_text(encoding="utf-8")
        given = REDIRECT.search(page).group(1)
    return urlsplit(given).path


def test_make_lab_prints_the_start_page(made_lab: MadeLab) -> None:
    path = _wait("printed link", lambda: _printed_link(made_lab), made_lab)
    assert path == START_PAGE, f"`make lab` printed a link to {path}, not {START_PAGE}"


def test_make_lab_sends_the_browser_to_the_start_page(made_lab: MadeLab) -> None:
    path = _wait("page sent to the browser", lambda: _browser_page(made_lab), made_lab)
    assert path == START_PAGE, f"`make lab` sent the browser to {path}, not {START_PAGE}"


def test_make_lab_opens_the_start_page_in_a_fresh_workspace(made_lab: MadeLab, page: Any) -> None:
    _wait("printed link", lambda: _printed_link(made_lab), made_lab)
    page.goto(f"{made_lab.base_url}/?token={made_lab.token}")  # the server's root, as a bookmark would be
    page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=60_000)
    shown = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path")
    assert urlsplit(page.url).path == START_PAGE, f"the root led to {page.url}"
    assert shown == START_PAGE.removeprefix("/lab/tree/"), f"the page shows {shown!r}"
    kernel_idle(page, 60_000)  # a kernel still starting would hold the server's shutdown
