"""The progress display of ``lessonlib grade``: one status line on a terminal, a line per learner otherwise.

Learner names come from folder names and the LMS: they are shown through ``printable``, so that a
name holding an escape sequence cannot rewrite or clear the instructor's terminal.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from lessonlib.grading import records as r
from lessonlib.grading.batch import GradeSettings, Reporter
from lessonlib.grading.safe_text import printable
from lessonlib.grading.sandbox import Isolation


class Progress(Reporter):
    """Writes to ``stream`` (stderr): a redrawn bar on a terminal, plain lines in a log."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.lock = threading.Lock()
        self.total = 0
        self.finished = 0
        self.running_now: list[str] = []
        self.started = time.perf_counter()
        self._stop = threading.Event()

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + "\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _bar(self) -> None:
        if not self.tty or self.quiet:
            return
        width = 24
        filled = int(width * self.finished / max(self.total, 1))
        elapsed = int(time.perf_counter() - self.started)
        now = ", ".join(printable(n) for n in self.running_now[:3]) + (" ..." if len(self.running_now) > 3 else "")
        self.stream.write(f"\r\033[K[{'#' * filled}{'.' * (width - filled)}] {self.finished}/{self.total}"
                          f"  {elapsed // 60}:{elapsed % 60:02d}" + (f"  grading {now}" if now else ""))
        self.stream.flush()

    def start(self, *, total: int, resumed: int, isolation: Isolation, settings: GradeSettings) -> None:
        self.total, self.started = total, time.perf_counter()
        if isolation.warning:  # printed even with --quiet: the instructor must know
            self._line(isolation.warning)
            self._line(f"  (isolation: {isolation.level}; {isolation.reason})")
        if self.quiet:
            return
        again = f", {resumed} already graded (resuming)" if resumed else ""
        self._line(f"lessonlib grade: {total} learner(s){again}; {settings.workers} worker(s), "
                   f"{settings.timeout:g} s CPU and {settings.memory_mb} MB per exercise")
        self._line(f"isolation: {isolation.level}: {isolation.summary}")
        if isolation.reason:
            self._line(f"  ({isolation.reason})")
        if self.tty:  # keep the clock moving while a slow learner runs
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self.lock:
                self._bar()

    def running(self, learner: str) -> None:
        with self.lock:
            self.running_now.append(learner)
            self._bar()

    def done(self, result: r.LearnerResult, *, resumed: bool = False) -> None:
        with self.lock:
            self.finished += 1
            if result.learner in self.running_now:
                self.running_now.remove(result.learner)
            if not self.quiet:
                flagged = printable(", ".join(f"{g.exercise} {g.status}" for g in result.flagged))
                timing = "saved earlier" if resumed else f"{result.seconds:.1f} s"
                self._line(f"[{self.finished:>{len(str(self.total))}}/{self.total}] {printable(result.learner)}: "
                           f"{result.points:g}/{result.max_points:g} points ({timing})"
                           + (f"  flagged: {flagged}" if flagged else ""))
            self._bar()

    def close(self) -> None:
        self._stop.set()
        if self.tty and not self.quiet:
            with self.lock:
                self.stream.write("\r\033[K")
                self.stream.flush()
