"""Code put in one canonical form before the similarity report fingerprints it, so that padding a copy
with statements that do nothing, or shuffling statements that do not depend on each other, hides
nothing.

:func:`normalise` parses the code (code that does not parse is returned as it is) and, in every
block of statements:

- drops statements that do nothing: ``pass``, an expression that calls nothing (a docstring, a bare
  name or constant, ``x.y``), ``x = x``; a block left empty holds one ``pass``;
- orders the statements that do not depend on each other: statement B depends on an earlier A when
  one writes a name the other reads or writes (a call of a method that changes its object, such as
  ``x.append(...)`` or ``x.sort()``, and an assignment to ``x[i]`` or ``x.y`` write ``x``; other
  calls are taken to change nothing but what they return), or when either ends the block's flow (``return``, ``raise``,
  ``break``, ``continue``). Among the statements whose earlier dependencies are placed, the one that
  comes first in a name-blind order goes next (its syntax tree with every name replaced), so two
  copies that differ in names and order come out in the same order;

and returns the code written back by ``ast.unparse`` (comments are gone with the parse).
"""

from __future__ import annotations

import ast
import heapq

FLOW = (ast.Return, ast.Raise, ast.Break, ast.Continue)
# Methods that change the object they are called on (lists, dicts, sets, arrays): a call to one writes it.
MUTATING = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "sort", "reverse", "add",
                      "discard", "setdefault", "popitem", "fill", "resize", "put", "itemset", "partition", "setflags",
                      "write", "seek", "send"})
BLOCKS = ("body", "orelse", "finalbody")


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """(read, written) names of one statement."""
    read: set[str] = set()
    written: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (written if isinstance(sub.ctx, (ast.Store, ast.Del)) else read).add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            written.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            written.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            written.update(_base(sub))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in MUTATING:
            written.update(_base(sub.func.value))  # x.append(...) changes x (np.zeros(...) changes nothing)
    return read, written


def _base(node: ast.AST) -> set[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return {node.id} if isinstance(node, ast.Name) else set()


def _does_nothing(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):
        return not any(isinstance(sub, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                       for sub in ast.walk(node.value))
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
        return isinstance(target, ast.Name) and isinstance(value, ast.Name) and target.id == value.id
    return False


class _Blind(ast.NodeTransformer):
    """Every name replaced by ``_``: the order key of a statement."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name("_", node.ctx)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.arg("_", None)


def _key(node: ast.stmt) -> str:
    return ast.dump(_Blind().visit(ast.parse(ast.unparse(node))))


def _ordered(statements: list[ast.stmt]) -> list[ast.stmt]:
    """The statements in the canonical order of the module docstring (a stable topological sort)."""
    uses = [_names(s) for s in statements]
    after: list[set[int]] = [set() for _ in statements]  # after[j]: the earlier statements j depends on
    for j in range(len(statements)):
        for i in range(j):
            (ri, wi), (rj, wj) = uses[i], uses[j]
            if (isinstance(statements[i], FLOW) or isinstance(statements[j], FLOW)
                    or wi & (rj | wj) or wj & ri):
                after[j].add(i)
    keys = [_key(s) for s in statements]
    ready = [(keys[j], j) for j in range(len(statements)) if not after[j]]
    heapq.heapify(ready)
    placed: list[int] = []
    done: set[int] = set()
    while ready:
        _, j = heapq.heappop(ready)
        placed.append(j)
        done.add(j)
        for k in range(len(statements)):
            if k not in done and j in after[k] and after[k] <= done and all(k != q for _, q in ready):
                heapq.heappush(ready, (keys[k], k))
    return [statements[j] for j in placed]


class _Canonical(ast.NodeTransformer):
    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in BLOCKS:
            block = getattr(node, name, None)
            if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                kept = [s for s in block if not _does_nothing(s)]
                setattr(node, name, _ordered(kept) if kept else [ast.Pass()])
        return node


def normalise(source: str) -> str:
    """``source`` in the canonical form of the module docstring (unchanged when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return source
    try:
        return ast.unparse(ast.fix_missing_locations(_Canonical().visit(tree)))
    except (ValueError, RecursionError):
        return source
