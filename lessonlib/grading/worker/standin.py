"""What a child puts between learner code and the grader: a stand-in ``lessonlib``, a sink for
printed text, and a bound on the size of a returned value.

The stand-in answers every import of ``lessonlib`` and its submodules with a module whose
functions refuse to run and are recorded (the status ``uses_lessonlib``). It is not the only
barrier: at level bubblewrap the installed package's folder is empty inside the sandbox, so
learner code that removes the stand-in finds nothing to import instead (``sandbox.bwrap_command``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import io
import sys
import types
from typing import Any


# The grader's own exceptions are named "grader.*" (see runner.error_types): a class that learner
# code defines is named "__main__.*", so it is never taken for one of these.
class LessonlibUnavailable(RuntimeError):
    """Raised by every function of the stand-in ``lessonlib`` seen by learner code."""

    __module__ = "grader"


class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every import of ``lessonlib`` with a stand-in module; ``calls`` records what was called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def install(self) -> None:
        for name in [m for m in sys.modules if m == "lessonlib" or m.startswith("lessonlib.")]:
            del sys.modules[name]
        sys.meta_path.insert(0, self)

    def since(self, mark: int) -> list[str]:
        """Stand-in functions called since ``mark`` (names cut short; learner code chooses them)."""
        return sorted({name[:200] for name in self.calls[mark:]})[:20]

    def refuse(self, qualname: str) -> Any:
        def standin(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(qualname)
            raise LessonlibUnavailable(
                f"{qualname} is the course's own implementation and is not available while grading: "
                "write the answer with NumPy"
            )

        standin.__name__ = standin.__qualname__ = qualname.rsplit(".", 1)[-1]
        return standin

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "lessonlib" or fullname.startswith("lessonlib."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__dict__["_standin"] = self
        module.__all__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _StandInModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_standin":
            raise AttributeError(attr)
        # check() does nothing here: checks run in the grading process
        value = (lambda *args, **kwargs: None) if attr == "check" else \
            self.__dict__["_standin"].refuse(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


class Sink(io.TextIOBase):
    """Counts what is printed and keeps nothing: printing cannot flood the grader."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.count += len(s)
        return len(s)

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class ResultTooLarge(Exception):
    """A returned value holds more array data than the grader accepts."""

    __module__ = "grader"


def _megabytes(n: float) -> str:
    return f"{n / 2**20:,.1f} MB" if n < 2**30 else f"{n / 2**30:,.1f} GB"


def _estimate(obj: Any, limit: int, depth: int = 0) -> int:
    """Bytes the grader would copy to describe ``obj`` (arrays counted without copying them)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        return int(np.ndarray.nbytes.__get__(obj, type(obj)))  # a subclass cannot make it smaller
    if isinstance(obj, (list, tuple)):
        if len(obj) > 1_000_000:
            return len(obj) * 8
        total = 8 * len(obj)
        if depth < 3:
            for item in obj:
                total += _estimate(item, limit, depth + 1)
                if total > limit:
                    break
        return total
    return 8


def check_size(obj: Any, limit: int) -> None:
    size = _estimate(obj, limit)
    if size > limit:
        raise ResultTooLarge(
            f"the returned value holds {_megabytes(size)} of data, more than the grader accepts "
            f"({_megabytes(limit)}); the expected result is far smaller"
        )


class Guarded:
    """Calls the answer, then refuses results too large to describe. Keeps the answer's code
    object visible, so an error still names the line of the answer cell."""

    def __init__(self, answer: Any, limit: int) -> None:
        self._answer = answer
        self._limit = limit

    @property
    def __code__(self) -> Any:
        return getattr(self._answer, "__code__", None)

    def __call__(self, *args: Any) -> Any:
        result = self._answer(*args)
        check_size(result, self._limit)
        return result
