"""The progress display of ``lessonlib grade``: a tqdm bar on a terminal, a line per learner graded.

Learners saved by an earlier run are counted, not listed: the points saved for them are from
before manual.csv's marks (the gradebook written at the end has both).

Learner names come from folder names and the LMS: they are shown through ``printable``, so that a
name holding an escape sequence cannot rewrite or clear the instructor's terminal.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from tqdm import tqdm

from lessonlib.grading import records as r
from lessonlib.grading.isolation.sandbox import Isolation
from lessonlib.grading.run.batch import GradeSettings, Reporter
from lessonlib.grading.safe_text import printable


class Progress(Reporter):
    """Writes to ``stream`` (stderr): a bar on a terminal (not with ``quiet``), plain lines in a log."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.lock = threading.Lock()
        self.total = self.finished = 0
        self.running_now: list[str] = []
        self.bar: tqdm | None = None
        self._stop = threading.Event()

    def _line(self, text: str) -> None:
        tqdm.write(text, file=self.stream)  # above the bar, which is drawn again below it

    def start(self, *, total: int, resumed: int, isolation: Isolation, settings: GradeSettings) -> None:
        self.total, self.finished = total, resumed
        if isolation.warning:  # printed even with --quiet: the instructor must know
            self._line(isolation.warning)
            self._line(f"  (isolation: {isolation.level}; {isolation.reason})")
        if self.quiet:
            return
        again = f", {resumed} already graded (resuming; their points are in summary.csv)" if resumed else ""
        self._line(f"lessonlib grade: {total} learner(s){again}; {settings.workers} worker(s), "
                   f"{settings.timeout:g} s CPU and {settings.memory_mb} MB per exercise")
        self._line(f"isolation: {isolation.level}: {isolation.summary}")
        if isolation.reason:
            self._line(f"  ({isolation.reason})")
        if hasattr(self.stream, "isatty") and self.stream.isatty():
            self.bar = tqdm(total=total, initial=resumed, file=self.stream, unit="learner", leave=False,
                            dynamic_ncols=True)
            threading.Thread(target=self._tick, daemon=True).start()  # the clock moves while a slow learner runs

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self.lock:
                if self.bar is not None:
                    self.bar.refresh()

    def _show_running(self) -> None:
        if self.bar is not None:
            now = ", ".join(printable(n) for n in self.running_now[:3]) + (" ..." if len(self.running_now) > 3 else "")
            self.bar.set_postfix_str(f"grading {now}" if now else "", refresh=True)

    def running(self, learner: str) -> None:
        with self.lock:
            self.running_now.append(learner)
            self._show_running()

    def done(self, result: r.LearnerResult, *, resumed: bool = False) -> None:
        """A learner graded now is listed; one saved earlier was counted by :meth:`start`."""
        if resumed:
            return
        with self.lock:
            self.finished += 1
            if result.learner in self.running_now:
                self.running_now.remove(result.learner)
            if not self.quiet:
                flagged = printable(", ".join(f"{g.exercise} {g.status}" for g in result.flagged))
                self._line(f"[{self.finished:>{len(str(self.total))}}/{self.total}] {printable(result.learner)}: "
                           f"{result.points:g}/{result.max_points:g} points ({result.seconds:.1f} s)"
                           + (f"  flagged: {flagged}" if flagged else ""))
            if self.bar is not None:
                self.bar.update(1)
                self._show_running()

    def close(self) -> None:
        self._stop.set()
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
