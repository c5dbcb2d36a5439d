"""Which statements of a notebook an exercise's answer needs, and which of them cannot be run.

``check`` runs in the learner's kernel and sees everything the notebook has run. A grader runs
the answer cell in full and, from the other cells, only what is safe and needed. This module
decides that second part, for the grader and for ``check`` alike, so the two agree or say why not:

- every *definition* in another cell: an import (not of a plotting or widget library), ``def``,
  ``class``, or an assignment of a constant expression (``SCALE = 2.0``);
- every other top-level statement that binds or changes a name the answer uses, directly or
  through what it uses in turn (``SCALE = np.sqrt(8)`` when a helper the answer calls reads
  ``SCALE``);
- never a statement that (re)defines an exercise's name outside that exercise's answer cell, a
  plotting or widget import, or ``from ... import *``.

For each name the answer needs that no runnable statement provides, :func:`slice_cells` returns
a note saying where it is defined (if anywhere) and why that statement is not run. Nothing here
runs learner code: sources are only parsed (``ast``, ``symtable``).
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# The tag of an answer cell, and what `lessonlib exercises build` leaves in a written answer's cell: the
# build writes them, the grader reads them.
ANSWER_TAG = "answer"
WRITTEN_STUB = "_Write your answer here._"

DRAWING_MODULES = frozenset({
    "matplotlib", "ipywidgets", "IPython", "ipympl", "mpl_toolkits", "seaborn", "plotly", "bokeh",
    "altair", "tqdm", "widgetsnbextension",
})
JUPYTER_NAMES = frozenset({"display", "get_ipython", "__IPYTHON__", "In", "Out", "_", "__", "___"})
BUILTIN_NAMES = frozenset(dir(builtins)) - JUPYTER_NAMES  # IPython adds display() to builtins in a kernel


# Bounds on the learner cells the grader parses in its own process. Python 3.10 builds the syntax tree
# of 1+1+...+1 recursively in C and crashes the whole process past about 100,000 terms, so a cell with
# more operator characters than MAX_OPERATORS (a tree nests at most one level per operator or bracket)
# is refused before the parser sees it. A tree deeper than MAX_DEPTH is refused after parsing: Python
# 3.11+ raise RecursionError from about 2,000 levels, 3.10 parses far deeper, and the analysis of a
# cell recurses through its tree; with one bound, every Python gives the same verdict. The course's
# own cells nest about 15 levels and hold a few hundred operators.
MAX_OPERATORS = 20_000
MAX_DEPTH = 200
_OPERATOR_CHARACTER = re.compile(r"[-+*/%@&|^~<>.=!(\[{]")

# One syntax tree is built at a time in this process. CPython up to 3.12 keeps the depth it has reached
# while building a tree's Python objects in one counter per interpreter, not per thread; when a garbage
# collection in the middle of a build runs a finalizer that lets another thread parse, the first build
# ends with "SystemError: AST constructor recursion depth mismatch". The grader parses learners'
# notebooks in several threads at once.
_PARSING = threading.Lock()

# Bounds on a whole notebook's code, checked before any of it is parsed (too_much_code). The grader
# plans every exercise in the grading process itself, before any limit applies, slicing the whole
# notebook once per exercise; the slicer's work grows linearly with the code, and these bounds keep it
# well under a second per exercise on the worst cases of benchmarks/planning.py. The exercise
# notebooks hold about 50 lines and 3,000 characters of code.
MAX_STATEMENTS = 2_500
MAX_CODE_CHARS = 128 * 1024


def _children(node: ast.AST) -> list[ast.AST]:
    """The direct children of ``node``, as ``ast.iter_child_nodes`` gives them, at a third of its cost."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found += [item for item in value if isinstance(item, ast.AST)]
    return found


def _deeper_than(tree: ast.AST, limit: int) -> bool:
    """True when some node of ``tree`` lies more than ``limit`` levels below its root (no recursion)."""
    level = [tree]
    for _ in range(limit):
        level = [child for node in level for child in _children(node)]
        if not level:
            return False
    return True


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``; ValueError for a cell beyond MAX_OPERATORS or MAX_DEPTH (see above)."""
    operators = len(_OPERATOR_CHARACTER.findall(source))
    if operators > MAX_OPERATORS:
        raise ValueError(f"the cell has {operators} operators and brackets (at most {MAX_OPERATORS} are parsed)")
    too_deep = ValueError(f"the cell's code nests more than {MAX_DEPTH} levels deep")
    try:
        with _PARSING:
            tree = ast.parse(source)
    except RecursionError:
        raise too_deep from None
    if _deeper_than(tree, MAX_DEPTH):
        raise too_deep
    return tree


def statement_bound(source: str) -> int:
    """An upper bound on the statements in ``source``, found without parsing it: its lines of code
    (neither blank nor only a comment), plus one for every ``;`` (``a; b`` is two statements)."""
    lines = sum(1 for line in source.split("\n") if line.strip() and not line.lstrip().startswith("#"))
    return lines + source.count(";")


def too_much_code(sources: Sequence[str]) -> str:
    """Why a notebook whose code cells are ``sources`` is too long to analyse, or "" when it is not.

    Cheap by design (no parsing): it is asked before anything else is done with the code.
    """
    chars = sum(len(s) for s in sources)
    if chars > MAX_CODE_CHARS:
        return (f"its code cells hold {chars:,} characters of code, and the grader analyses at most "
                f"{MAX_CODE_CHARS:,} in one notebook")
    statements = sum(statement_bound(s) for s in sources)
    if statements > MAX_STATEMENTS:
        return (f"its code cells hold {statements:,} lines of code (`a; b` counts as two), and the grader "
                f"analyses at most {MAX_STATEMENTS:,} in one notebook")
    return ""


def python_source(source: str) -> str:
    """The cell without IPython syntax (``%magic``, ``!shell``), keeping line numbers."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        lines[0] = ""  # a cell magic such as %%time: its body is Python
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _static(node: ast.expr) -> bool:
    """True for expressions that compute nothing that could loop or draw: constants and names."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return _static(node.value)
    if isinstance(node, ast.UnaryOp):
        return _static(node.operand)
    if isinstance(node, ast.BinOp):
        return not isinstance(node.op, ast.Pow) and _static(node.left) and _static(node.right)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return len(node.elts) <= 64 and all(_static(e) for e in node.elts)
    return False


def is_drawing_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in DRAWING_MODULES
    return any(a.name.split(".")[0] in DRAWING_MODULES for a in node.names)


def binds(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds (also inside if/try/with/for, not inside functions)."""
    names: set[str] = set()

    def visit(body: Iterable[ast.stmt]) -> None:
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
                continue
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for target in targets:
                    names.update(x.id for x in ast.walk(target) if isinstance(x, ast.Name)
                                 and isinstance(x.ctx, ast.Store))
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                for target in ([n.target] if isinstance(n, (ast.For, ast.AsyncFor))
                               else [i.optional_vars for i in n.items if i.optional_vars is not None]):
                    names.update(x.id for x in ast.walk(target) if isinstance(x, ast.Name))
            for attr in ("body", "orelse", "finalbody"):
                inner = getattr(n, attr, None)
                if isinstance(inner, list):
                    visit(inner)
            for handler in getattr(n, "handlers", []) or []:
                visit(handler.body)

    visit([node])
    return names


def _changes(node: ast.stmt) -> set[str]:
    """Names whose object a statement changes without rebinding: ``T[0] = 1``, ``T.x += 1``, ``T.append(2)``."""
    names: set[str] = set()

    def add_base(expr: ast.expr) -> None:
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        if isinstance(expr, ast.Name):
            names.add(expr.id)

    stack: list[ast.AST] = [node]
    while stack:  # a loop, not recursion: a statement may be large
        n = stack.pop()
        if isinstance(n, (ast.Name, ast.Constant)):
            continue  # a leaf (most nodes are): nothing below it changes anything
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a body runs later, if at all
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            add_base(n.func.value)  # a method call may change its object
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                add_base(t)
        stack += _children(n)
    return names


def uses(source: str) -> set[str]:
    """Global names a piece of code reads: at its top level, and inside its functions and classes."""
    found = _table_uses(source)
    return set() if found is None else found


def _table_uses(source: str) -> set[str] | None:
    """:func:`uses`, or None when ``source`` has no symbol table (it does not compile)."""
    try:
        table = symtable.symtable(source, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    names: set[str] = set()

    def visit(t: symtable.SymbolTable, top: bool) -> None:
        for sym in t.get_symbols():
            if sym.is_referenced() and (top or sym.is_global()):
                names.add(sym.get_name())
        for child in t.get_children():
            visit(child, False)

    visit(table, True)
    return names - BUILTIN_NAMES


@dataclass(eq=False)
class _Statement:
    cell: int
    node: ast.stmt
    first: int  # first line, 0-based within the cell (decorators included)
    last: int
    binds: set[str]
    changes: set[str]
    definition: bool
    refused: str = ""  # why it must not run, even when needed
    text: str | None = None  # its own source, when the cell's line numbers can be trusted
    _uses: set[str] | None = None

    @property
    def uses(self) -> set[str]:
        """Global names the statement reads; worked out when first asked, since only statements the
        answer reaches need them. Read from its own source (unparsing the tree costs more)."""
        if self._uses is None:
            found = _table_uses(self.text) if self.text is not None else None
            self._uses = found if found is not None else uses(ast.unparse(self.node))
        return self._uses


@dataclass
class Slice:
    """What to run from each cell, and the notes about what the answer needs but cannot have.

    kept: cell index -> that cell's source with only the statements to run (others blanked, line
    numbers kept); the answer cell is kept whole. notes: one sentence per missing name.
    """

    kept: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    needed: set[str] = field(default_factory=set)


def _segment(lines: Sequence[str], encoded: dict[int, bytes], node: ast.stmt, first: int, last: int) -> str:
    """The source text of a top-level statement that spans ``lines[first:last + 1]``.

    Column offsets count UTF-8 bytes: a line that is not ASCII is encoded once (``encoded``), not
    once per statement on it. A decorated definition starts at its first decorator, in column 0.
    """
    def cut(n: int, start: int, end: int | None) -> str:
        line = lines[n]
        if line.isascii():
            return line[start:end]
        if n not in encoded:
            encoded[n] = line.encode("utf-8")
        return encoded[n][start:end].decode("utf-8", "replace")

    start = node.col_offset if first == node.lineno - 1 else 0
    end = node.end_col_offset
    if first == last:
        return cut(first, start, end)
    return "\n".join([cut(first, start, None), *lines[first + 1:last], cut(last, 0, end)])


def _statements(index: int, source: str, tree: ast.Module, refused_names: Mapping[str, str]) -> list[_Statement]:
    out = []
    lines = source.split("\n")
    encoded: dict[int, bytes] = {}
    trusted = "\r" not in source and "\f" not in source  # ast counts a lone \r as a line break; split does not
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        last = (node.end_lineno or node.lineno) - 1
        bound = binds(node)
        text = _segment(lines, encoded, node, first, last) if trusted and node.end_col_offset is not None else None
        s = _Statement(index, node, first, last, bound, _changes(node) - bound, is_definition(node), text=text)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and is_drawing_import(node):
            s.refused = "it imports a plotting or widget library, which the grader does not load"
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            s.refused = "it is a `from ... import *`, whose names cannot be known without running it"
        else:
            clash = sorted(n for n in bound if n in refused_names)
            if clash:
                s.refused = (f"it defines `{clash[0]}`, which only the answer cell of `{clash[0]}` may define "
                             f"({refused_names[clash[0]]})")
        out.append(s)
    return out


def is_definition(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return all(isinstance(t, ast.Name) for t in targets) and node.value is not None and _static(node.value)
    return False


def slice_cells(
    cells: Sequence[str], answer: int, exercise: str, owners: Mapping[str, int] | None = None,
    labels: Sequence[str] | None = None, parsed: Mapping[int, ast.Module] | None = None,
) -> Slice:
    """What to run of ``cells`` (code cell sources, in notebook order) for the answer in ``cells[answer]``.

    owners: each exercise's name -> the index of its own answer cell (``exercise`` itself maps to
    ``answer``); a statement elsewhere that binds one of those names is never run. labels: how
    notes name the cells (default "cell 1", "cell 2", ...). parsed: trees of cells already parsed
    (``parse(python_source(cell))``), so that a caller slicing one notebook per exercise parses it once.
    """
    labels = list(labels) if labels is not None else [f"cell {i + 1}" for i in range(len(cells))]
    owners = dict(owners or {})
    owners[exercise] = answer
    sources = [python_source(s) for s in cells]
    trees: dict[int, ast.Module] = {}
    broken: list[int] = []
    for i, src in enumerate(sources):
        if parsed is not None and i in parsed:
            trees[i] = parsed[i]
            continue
        try:
            trees[i] = parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            broken.append(i)
    result = Slice()
    if answer not in trees:
        return result
    statements: list[_Statement] = []
    for i, tree in trees.items():
        if i == answer:
            continue
        refused_names = {name: "its answer cell" for name, owner in owners.items() if owner != i}
        statements += _statements(i, sources[i], tree, refused_names)
    modules = {name for s in statements if isinstance(s.node, (ast.Import, ast.ImportFrom)) for name in s.binds}
    for s in statements:  # calling a module's function (np.random.seed) is not taken to change the module
        s.changes -= modules
    answer_binds = set().union(*(binds(n) for n in trees[answer].body)) if trees[answer].body else set()
    needed = uses(sources[answer]) - answer_binds
    chosen = _reached(statements, needed)
    result.needed = needed
    run = {k for k, s in enumerate(statements) if not s.refused and (k in chosen or s.definition)}
    by_cell: dict[int, list[int]] = {}  # cell -> its statements' positions, in order
    for k, s in enumerate(statements):
        by_cell.setdefault(s.cell, []).append(k)
    provided = set(answer_binds)
    for i in trees:
        if i == answer:
            result.kept[i] = sources[i]
            continue
        lines = sources[i].split("\n")
        keep = [False] * len(lines)
        drop = [False] * len(lines)
        here = by_cell.get(i, [])
        for k in here:
            s = statements[k]
            mark = keep if k in run else drop
            for n in range(s.first, s.last + 1):
                mark[n] = True
        for s in (statements[k] for k in here if k in run):
            if any(drop[n] for n in range(s.first, s.last + 1)):
                if (s.binds | s.changes) & needed:
                    result.notes.append(
                        f"{labels[i]}: a statement the answer needs shares a line with one the grader does not "
                        "run (`a; b`), so neither runs; put it on a line of its own.")
            else:
                provided |= s.binds
        text = "\n".join(line if keep[n] and not drop[n] else "" for n, line in enumerate(lines))
        if text.strip():
            result.kept[i] = text
    missing = sorted(needed - provided - BUILTIN_NAMES)
    last_binder = {name: s for s in statements for name in s.binds} if missing else {}
    for name in missing:
        result.notes.append(_missing_note(name, exercise, last_binder.get(name), labels, broken))
    return result


def _reached(statements: Sequence[_Statement], needed: set[str]) -> set[int]:
    """Positions of the runnable statements that bind or change a name in ``needed``, following
    what they use in turn; ``needed`` grows to every name reached.

    Each name is looked up once in an index of the statements by the names they bind or change,
    so the work grows with the notebook's size, not with its square.
    """
    providers: dict[str, list[int]] = {}
    for k, s in enumerate(statements):
        if not s.refused:
            for name in s.binds | s.changes:
                providers.setdefault(name, []).append(k)
    chosen: set[int] = set()
    frontier = list(needed)
    while frontier:
        for k in providers.get(frontier.pop(), ()):
            if k in chosen:
                continue
            chosen.add(k)
            for name in statements[k].uses - needed:
                needed.add(name)
                frontier.append(name)
    return chosen


def _missing_note(name: str, exercise: str, binder: _Statement | None, labels: Sequence[str],
                  broken: Sequence[int]) -> str:
    """Why the answer lacks ``name``: the statement that defines it and why it is not run, if any."""
    if binder is not None:
        s = binder
        return (f"`{exercise}` uses `{name}`, defined in {labels[s.cell]} (line {s.first + 1}) by a statement "
                f"the grader does not run: {s.refused}.")
    if name in JUPYTER_NAMES:
        return f"`{exercise}` uses `{name}`, which Jupyter provides and the grader does not."
    if broken:
        return (f"`{exercise}` uses `{name}`, which no readable cell defines ({labels[broken[0]]} is not "
                "valid Python, so nothing in it runs).")
    return f"`{exercise}` uses `{name}`, which no cell defines at its top level."


def check_notes(exercise: str, history: Sequence[str], other_exercises: Iterable[str] = ()) -> list[str]:
    """Notes for ``check``: what a grader would not run of ``history`` (the cells run so far, in order).

    The answer cell is the last one that binds ``exercise``; another exercise's name belongs to the
    last cell that binds it. Empty when the answer cell cannot be found.
    """
    owners: dict[str, int] = {}
    answer = None
    for i, src in enumerate(history):
        try:
            tree = parse(python_source(src))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        bound = set().union(*(binds(n) for n in tree.body)) if tree.body else set()
        for name in set(other_exercises) & bound:
            owners[name] = i
        if exercise in bound:
            answer = i
    if answer is None:
        return []
    cells = list(history)
    labels = [f"the cell you ran as In[{i}]" for i in range(len(cells))]
    return slice_cells(cells, answer, exercise, owners, labels).notes
