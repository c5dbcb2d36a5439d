"""Which explorers each lesson notebook shows, and one keyboard move per explorer with its expected result.

A row per notebook (by file stem): the explorers in the order the notebook shows them. For each,
the control to move (by the label beside it), the keys pressed once it has focus, and the fields
of its ``Settings`` after the move (the others keep the values the notebook's ``show()`` call
used; every notebook calls ``show()`` with the defaults). The browser test compares the page's
readout with ``describe(compute(Settings(**after)))`` computed in the test process.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat


@dataclass(frozen=True)
class Move:
    """One keyboard move on one explorer and the settings it should lead to."""

    explorer: str  # module name under lessonlib.explorers
    control: str  # the label shown beside the control
    keys: tuple[str, ...]  # pressed once the control has focus
    after: dict[str, Any] = field(default_factory=dict)  # Settings fields after the move
    option: str | None = None  # toggle buttons: the text of the button to focus

    def module(self) -> ModuleType:
        return importlib.import_module(f"lessonlib.explorers.{self.explorer}")

    def expected_readout(self) -> str:
        """describe(compute(settings after the move)), computed here, outside the browser."""
        module = self.module()
        return module.describe(module.compute(module.Settings(**self.after))).strip()


# A focused drop-down: open its list, go one down, choose. (Headless Chromium ignores a bare
# ArrowDown on a closed <select>; Alt+ArrowDown opens the list, as for a keyboard user of Chromium.)
PICK_NEXT = ("Alt+ArrowDown", "ArrowDown", "Enter")

EXPLORER_MOVES: dict[str, tuple[Move, ...]] = {
    "00_start_here": (),
    "01_scaling": (Move("scaling", "d_k", PICK_NEXT, {"d_k": 128}),),
    "02_masking": (Move("masking", "where the mask is applied", PICK_NEXT, {"order": "after"}),),
    "03_position": (Move("position", "position", PICK_NEXT, {"mechanism": "sinusoidal"}),),
    "04_cost": (Move("cost", "length n", PICK_NEXT, {"n": 8192}),),
    "05_interpretation": (Move("interpretation", "exclude it (mask)", ("Space",), {"exclude": True}),),
    "06_training": (Move("training", "evaluation length", PICK_NEXT, {"length": 32}),),
    "07_capstone": (Move("generation", "position mechanism", PICK_NEXT, {"mechanism": "alibi"}),),
}

_IMPORT = re.compile(r"from[ \t]+lessonlib\.explorers[ \t]+import[ \t]+(\([^)]*\)|[\w \t,]+)")
_IMPORT_AS = re.compile(r"import\s+lessonlib\.explorers\.(\w+)\s+as\s+(\w+)")


def explorers_shown(path: Path) -> list[str]:
    """The explorer modules whose ``show()`` the notebook's code cells call, in order."""
    nb = nbformat.read(path, as_version=4)
    sources = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    aliases: dict[str, str] = {}
    for source in sources:
        for match in _IMPORT.finditer(source):
            for item in match.group(1).replace("(", "").replace(")", "").split(","):
                words = item.split()
                if len(words) == 1:
                    aliases[words[0]] = words[0]
                elif len(words) == 3 and words[1] == "as":
                    aliases[words[2]] = words[0]
        for module, alias in _IMPORT_AS.findall(source):
            aliases[alias] = module
    shown = []
    for source in sources:
        for name in re.findall(r"\b(\w+)\.show\(", source):
            if name in aliases:
                shown.append(aliases[name])
    return shown


def moves_for(path: Path) -> tuple[Move, ...]:
    """The table's row for ``path``; an AssertionError says what to add when it is missing or stale."""
    stem = path.stem
    shown = explorers_shown(path)
    hint = (f"add or fix the row EXPLORER_MOVES[{stem!r}] in {Path(__file__).name}: one Move per explorer "
            f"the notebook shows, in order ({shown}), naming the control to move, the keys and the Settings "
            "fields after the move")
    assert stem in EXPLORER_MOVES, f"{path.name} has no row in the browser test's explorer table: {hint}"
    listed = [move.explorer for move in EXPLORER_MOVES[stem]]
    assert listed == shown, f"{path.name} shows explorers {shown}, the table lists {listed}: {hint}"
    return EXPLORER_MOVES[stem]
