"""Drive JupyterLab in the system Chromium: a throwaway server, and what a learner does in a page.

The server runs on 127.0.0.1 with a token, with every Jupyter config, data, runtime, settings and
workspace folder in a temporary directory, and serves copies of the course folders (so nothing
the page does can touch the committed notebooks). Autosave is off, the news pop-up is off and
notebook windowing is off (every cell stays in the page, so cell i of the file is cell i of the
page). ``window.jupyterapp`` is exposed so the test can read each output's type from the model:
an error and a stderr stream render alike.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))  # Debian's package; never a download
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
INSTALL_HINT = "install Chromium with `apt-get install chromium` (Debian/Ubuntu)"
VIEWPORT = {"width": 1400, "height": 1000}

# User settings written into the throwaway settings folder: plugin id -> values.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}
IDLE = re.compile(r"\| Idle$")  # the status bar's kernel item: "Python 3 (ipykernel) | Idle"


def browser_unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM}: {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the playwright package is missing: pip install -e '.[test]', then {INSTALL_HINT}"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LabServer:
    """A running JupyterLab: its process, address, token and the folder it serves."""

    process: subprocess.Popen
    base_url: str
    token: str
    root: Path
    log: Path

    def url(self, path: str) -> str:
        """A page address with the token; ``reset`` opens a clean workspace."""
        return f"{self.base_url}/{path.lstrip('/')}?reset&token={self.token}"

    def api(self, method: str, path: str) -> Any:
        """Call the REST API; returns the decoded JSON body (None when empty)."""
        request = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def delete_sessions_and_kernels(self) -> int:
        """Shut down every session and kernel (a kernel outlives its page); returns how many."""
        count = 0
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")
            count += 1
        for kernel in self.api("GET", "/api/kernels"):
            self.api("DELETE", f"/api/kernels/{kernel['id']}")
            count += 1
        return count

    def log_tail(self, n_chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n_chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """Delete kernels, then stop the server by its PID (SIGTERM, then SIGKILL after 20 s)."""
        if self.process.poll() is None:
            try:
                self.delete_sessions_and_kernels()
            except OSError:
                pass
            self.send(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.send(signal.SIGKILL)
                self.process.wait(timeout=10)

    def send(self, sig: int) -> None:
        """Signal the server's process."""
        os.kill(self.process.pid, sig)


def lab_environment(home: Path) -> dict[str, str]:
    """The server's environment: every Jupyter folder under ``home``, and no inherited MPLBACKEND."""
    env = dict(os.environ)
    folders = {
        "JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
        "JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces", "IPYTHONDIR": "ipython",
    }
    for variable, name in folders.items():
        (home / name).mkdir(parents=True, exist_ok=True)
        env[variable] = str(home / name)
    env.pop("MPLBACKEND", None)  # it would reach the kernel and remove inline figures
    for plugin, values in LAB_SETTINGS.items():
        target = home / "settings" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    return env


def start_lab(home: Path, folders: list[Path], *, timeout: float = 90.0) -> LabServer:
    """Copy ``folders`` under ``home/root`` and serve them; returns once the API answers."""
    root = home / "root"
    root.mkdir(parents=True)
    for folder in folders:
        shutil.copytree(folder, root / folder.name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = lab_environment(home)
    port, token = free_port(), secrets.token_hex(24)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True", "--ServerApp.terminals_enabled=False",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = home / "server.log"
    with log.open("w") as log_file:
        process = subprocess.Popen(command, env=env, cwd=root, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    server = LabServer(process, f"http://127.0.0.1:{port}", token, root, log)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode}:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status")
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{server.log_tail()}") from None
            time.sleep(0.2)


# --- In the page --------------------------------------------------------------------------------

PROMPTS_JS = "() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]" \
             ".map(e => e.textContent.trim())"

# Each cell's outputs as the notebook model holds them: output_type, and ename/evalue for errors.
MODEL_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.model.cells;
  const found = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    const outputs = [];
    if (cell.type === 'code') {
      for (let j = 0; j < cell.outputs.length; j++) {
        const out = cell.outputs.get(j).toJSON();
        outputs.push({type: out.output_type, ename: out.ename || '', evalue: out.evalue || ''});
      }
    }
    found.push({type: cell.type, count: cell.type === 'code' ? cell.executionCount : null, outputs});
  }
  return found;
}"""


def kernel_idle(page: Any, timeout_ms: float) -> None:
    """Wait until the status bar reads '<kernel> | Idle' (the toolbar dot is idle before any kernel)."""
    page.locator("#jp-main-statusbar").get_by_text(IDLE).wait_for(timeout=timeout_ms)


def open_notebook(page: Any, lab: LabServer, relpath: str, *, timeout_ms: float = 60_000) -> None:
    """Open ``relpath`` in a clean workspace and wait until its kernel is idle."""
    page.goto(lab.url(f"lab/tree/{relpath}"))
    page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=timeout_ms)
    kernel_idle(page, timeout_ms)


def clear_all_outputs(page: Any) -> None:
    """Edit > Clear Outputs of All Cells: prompts go back to [ ] so a fresh run can be told apart."""
    page.get_by_role("menuitem", name="Edit", exact=True).click()
    page.get_by_role("menuitem", name="Clear Outputs of All Cells").click()
    page.wait_for_function(f"() => ({PROMPTS_JS})().every(p => p === '[ ]:')")


# The run has ended when no prompt reads [*] and either every non-empty code cell has an
# execution count or a cell not tagged raises-exception holds an error (which stops Run All).
RUN_ENDED_JS = f"""() => {{
  if (({PROMPTS_JS})().includes('[*]:')) return false;
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  let pending = false, stopped = false;
  for (let i = 0; i < cells.length; i++) {{
    const cell = cells.get(i);
    if (cell.type !== 'code' || !cell.sharedModel.getSource().trim()) continue;
    if (cell.executionCount === null) pending = true;
    const tags = cell.getMetadata('tags') || [];
    for (let j = 0; j < cell.outputs.length; j++) {{
      if (cell.outputs.get(j).toJSON().output_type === 'error' && !tags.includes('raises-exception')) stopped = true;
    }}
  }}
  return !pending || stopped;
}}"""


def restart_and_run_all(page: Any, *, timeout_ms: float = 180_000) -> None:
    """The toolbar's restart-and-run-all button, accept the dialog, wait until the run has ended.

    Run All runs the cells one after another (the kernel goes idle between them), so the end is
    read from the notebook model: see RUN_ENDED_JS. Outputs are cleared first, so counts left
    from the stored notebook cannot pass for a finished run.
    """
    clear_all_outputs(page)
    page.locator('.jp-NotebookPanel-toolbar [data-command="notebook:restart-run-all"]').click()
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_function(RUN_ENDED_JS, timeout=timeout_ms, polling=100)
    kernel_idle(page, timeout_ms)


def model_cells(page: Any) -> list[dict[str, Any]]:
    """The open notebook's cells as the page's model holds them (type, count, outputs)."""
    return page.evaluate(MODEL_JS)


# --- Explorers ------------------------------------------------------------------------------------

CONTROL_TARGETS = ".noUi-handle, select, input[type=checkbox], button, input, textarea"
FOCUSABLE = ("input:not([type=hidden]), select, button, textarea, [contenteditable='true'], "
             "[tabindex]:not([tabindex='-1'])")

# Index of the explorer box's child whose label reads ``description`` (-1 when none does).
FIND_CONTROL_JS = """(box, description) => [...box.children].findIndex(child =>
  [...child.querySelectorAll('label, .widget-label, .widget-label-basic span')]
    .some(label => label.textContent.trim() === description))"""

# Mark each child of the box that holds something focusable; return their indices.
MARK_CONTROLS_JS = """(box, focusable) => {
  const marked = [];
  [...box.children].forEach((child, i) => {
    if (child.querySelector(focusable)) { child.dataset.lessonlibControl = String(i); marked.push(i); }
  });
  return marked;
}"""
ACTIVE_CONTROL_JS = """() => {
  const holder = document.activeElement && document.activeElement.closest('[data-lessonlib-control]');
  return holder ? Number(holder.dataset.lessonlibControl) : -1;
}"""

# Time from the next keydown anywhere to the first change inside the readout, in ms.
ARM_LATENCY_JS = """(readout) => {
  const probe = {t0: null, t1: null};
  window.__lessonlibLatency = probe;
  const observer = new MutationObserver(() => {
    if (probe.t1 === null) { probe.t1 = performance.now(); observer.disconnect(); }
  });
  observer.observe(readout, {subtree: true, childList: true, characterData: true});
  document.addEventListener('keydown', () => { if (probe.t0 === null) probe.t0 = performance.now(); },
                            {capture: true, once: true});
}"""


def explorer_boxes(page: Any) -> list[Any]:
    """One locator per explorer in the page, in order: the box holding its controls and readout."""
    readouts = page.locator(".lessonlib-readout")
    return [readouts.nth(i).locator("xpath=..") for i in range(readouts.count())]


def readout_text(box: Any) -> str:
    return box.locator(".lessonlib-readout").inner_text().strip()


def control(box: Any, description: str) -> Any:
    """The explorer's control whose label reads ``description``."""
    found = box.evaluate(FIND_CONTROL_JS, description)
    if found < 0:
        raise LookupError(f"no control labelled {description!r} in this explorer")
    return box.locator(f"xpath=./*[{found + 1}]")


def focus_target(box: Any, description: str, option: str | None = None) -> Any:
    """The element inside a control that takes keyboard focus (a toggle button by its text)."""
    holder = control(box, description)
    if option is not None:
        return holder.get_by_role("button", name=option, exact=True)
    return holder.locator(CONTROL_TARGETS).first


def tab_reaches_every_control(page: Any, box: Any) -> tuple[list[int], list[int]]:
    """Focus the first control, press Tab repeatedly; returns (controls, controls reached)."""
    controls = box.evaluate(MARK_CONTROLS_JS, FOCUSABLE)
    if not controls:
        return [], []
    presses = box.locator(FOCUSABLE).count() + 3
    box.locator(f"[data-lessonlib-control='{controls[0]}']").locator(FOCUSABLE).first.focus()
    reached = {page.evaluate(ACTIVE_CONTROL_JS)}
    for _ in range(presses):
        page.keyboard.press("Tab")
        reached.add(page.evaluate(ACTIVE_CONTROL_JS))
    return controls, sorted(i for i in reached if i >= 0)


def keyboard_latency(page: Any, box: Any, target: Any, keys: tuple[str, ...], *,
                     timeout_ms: float = 10_000) -> float | None:
    """Focus ``target``, press ``keys``; ms from the first keydown to a changed readout (None: no change)."""
    target.focus()
    box.locator(".lessonlib-readout").evaluate(ARM_LATENCY_JS)
    for key in keys:
        page.keyboard.press(key)
    try:
        page.wait_for_function("() => window.__lessonlibLatency.t1 !== null", timeout=timeout_ms, polling="raf")
    except Exception:  # playwright's TimeoutError: the key changed nothing
        return None
    probe = page.evaluate("() => window.__lessonlibLatency")
    return probe["t1"] - probe["t0"]
