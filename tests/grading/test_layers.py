"""The grader's rooms form layers, read from the import graph of the package as installed.

Every ``import`` and ``from ... import`` in ``lessonlib/grading`` (at the top of a module or inside a
function) is an arrow from its module's room to the room it names. A room is a subpackage
(``run``, ``store``, ...) or, on the ground floor, one of the modules beside them. An arrow may
point down or sideways within the ground floor, never up, never between two rooms of one floor,
and no room reaches itself again through others. The engine and the exercises import nothing of
the grader: it stands on them.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import pytest

import lessonlib

PACKAGE = Path(lessonlib.__file__).parent
GROUND = ("records", "learners", "notebooks", "safe_text", "files", "zones", "arguments")
LAYERS = (  # bottom first
    GROUND,
    ("store", "isolation", "worker"),
    ("run", "lms"),
    ("reports",),
    ("gradescope",),
    ("app",),  # the application: it drives every room below, for each command
)
FLOOR = {room: n for n, rooms in enumerate(LAYERS) for room in rooms}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imported(path: Path) -> frozenset[str]:
    """Every lessonlib module ``path`` names in an import, relative ones resolved (a name imported
    from a package counts as its module when there is one)."""
    package = _module(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[:len(package) - node.level + 1], *[node.module or ""]]).strip(".") \
                if node.level else node.module or ""
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return frozenset(n for n in names if n.startswith("lessonlib") and _exists(n))


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _room(module: str) -> str | None:
    """``lessonlib.grading.run.batch`` -> ``run``; ``lessonlib.grading.records`` -> ``records``."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["lessonlib", "grading"] and len(parts) > 2 else None


@functools.cache
def arrows() -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the imports that make that arrow, as "module imports module"."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted((PACKAGE / "grading").rglob("*.py")):
        source = _room(_module(path))
        if source is None:
            continue  # the package's own __init__: its names load lazily, by name
        for target in sorted(_imported(path)):
            room = _room(target)
            if room is not None and room != source:
                found[source, room].append(f"{_module(path)} imports {target}")
    return found


def test_every_room_has_a_floor() -> None:
    rooms = {_room(_module(p)) for p in (PACKAGE / "grading").rglob("*.py")} - {None}
    assert rooms == set(FLOOR), f"without a floor: {sorted(rooms - set(FLOOR))}; gone: {sorted(set(FLOOR) - rooms)}"


def test_no_import_runs_up_or_across_a_floor() -> None:
    wrong = [line for (source, target), lines in arrows().items()
             if FLOOR[target] > FLOOR[source] or (FLOOR[target] == FLOOR[source] and FLOOR[source] > 0)
             for line in lines]
    assert not wrong, "imports that run up a floor or across one:\n" + "\n".join(wrong)


def test_no_room_reaches_itself_through_others() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in arrows():
        graph[source].add(target)

    def reached(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            room = todo.pop()
            if room not in seen:
                seen.add(room)
                todo += graph[room]
        return seen

    loops = [f"{source} -> {target}: {lines[0]}" for (source, target), lines in arrows().items()
             if source in reached(target)]
    assert not loops, "rooms that import each other, directly or through another:\n" + "\n".join(loops)


@pytest.mark.parametrize("area", ["engine", "exercises", "explorers", "training"])
def test_the_engine_and_the_exercises_import_nothing_of_the_grader(area: str) -> None:
    paths = ([p for p in PACKAGE.glob("*.py") if p.name != "cli.py"] if area == "engine"
             else sorted((PACKAGE / area).rglob("*.py")))
    wrong = [f"{_module(p)} imports {t}" for p in paths for t in sorted(_imported(p)) if _room(t) or t ==
             "lessonlib.grading"]
    assert not wrong, "\n".join(wrong)


def test_the_worker_imports_nothing_of_lessonlib() -> None:
    """It runs learner code: it is loaded by path, and a stand-in takes lessonlib's place there (its
    modules import one another, relatively, and nothing else of lessonlib)."""
    wrong = [f"{_module(p)} imports {t}" for p in sorted((PACKAGE / "grading" / "worker").glob("*.py"))
             for t in sorted(_imported(p)) if not t.startswith("lessonlib.grading.worker")]
    assert not wrong, "\n".join(wrong)
