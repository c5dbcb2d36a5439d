"""Maintainer tools for the committed notebooks: execute in place, and find unexecuted cells.

    python -m lessonlib.notebook_tools execute notebooks/01_scaling.ipynb [more paths or folders]
    python -m lessonlib.notebook_tools check notebooks solutions exercises
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat

KERNEL_NAME = "python3"


def notebook_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Expand folders into their ``*.ipynb`` files (sorted), skipping checkpoints."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        elif path.suffix == ".ipynb" and path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path} is neither a notebook nor a folder of notebooks")
    return found


def execute_notebook(path: Path, *, timeout: int = 120) -> None:
    """Run every cell of ``path`` in a fresh kernel (cwd = its folder) and save it with outputs."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name=KERNEL_NAME, record_timing=False,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute()
    nbformat.write(nb, path)


def unexecuted_cells(path: Path) -> list[int]:
    """Indices of non-empty code cells with no execution count: nbval would check nothing there."""
    nb = nbformat.read(path, as_version=4)
    return [
        i for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.get("execution_count") is None
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lessonlib.notebook_tools", description=__doc__)
    parser.add_argument("command", choices=["execute", "check"])
    parser.add_argument("paths", nargs="+", help="notebooks or folders of notebooks")
    args = parser.parse_args(argv)
    status = 0
    for path in notebook_paths(args.paths):
        if args.command == "execute":
            print(f"executing {path}", flush=True)
            execute_notebook(path)
        elif missing := unexecuted_cells(path):
            print(f"{path}: code cells {missing} were never executed")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
