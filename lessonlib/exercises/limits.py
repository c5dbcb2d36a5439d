"""What keeps ``check()`` from hanging or flooding the notebook: a time limit per case and a cap on printing.

``check()`` runs the learner's function in the learner's own kernel, usually on the main thread
of an IPython kernel. A function that never returns cannot be killed from outside without killing
the kernel, and a thread left running it would keep the kernel busy for good; so the function is
interrupted from inside, by an exception raised in its own thread once its time is up:

- on the main thread of a system with ``signal.setitimer`` (Linux, macOS): a SIGALRM timer whose
  handler raises :class:`CaseTimeout`. It interrupts any Python code, and sleeps and waits too;
- elsewhere (Windows, or a call from another thread): a watchdog thread that hands the running
  thread :class:`CaseTimeout` through ``PyThreadState_SetAsyncExc``, which interrupts Python code.

Neither can stop a single long call inside a C library before it returns. The exception derives
from BaseException, so ``except Exception`` in the function lets it through, and it is raised
again every REPEAT_SECONDS until the function has ended, so a loop that swallows one meets the next.
"""

from __future__ import annotations

import ctypes
import io
import signal
import threading
import time
from types import TracebackType

REPEAT_SECONDS = 0.1  # after the limit, the interruption is repeated this often until the function ends
DRAIN_SECONDS = 1.0  # at most this long spent on leaving, to let an interruption handed to a thread arrive


class CaseTimeout(BaseException):
    """Raised inside a function that ran past its time limit."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        _handed_over.discard(threading.get_ident())  # raised at last: nothing waits for this thread now


_handed_over: set[int] = set()  # threads handed a CaseTimeout by a watchdog that has not been raised yet


class Deadline:
    """``with Deadline(seconds):`` raises CaseTimeout in this thread once ``seconds`` have passed.

    ``passed`` tells afterwards whether it fired. A CaseTimeout of its own that reaches the end of
    the block is swallowed there (the caller reads ``passed``); everything is put back as it was on
    leaving, even when the interruption arrives while leaving, and a Deadline may run inside another.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.passed = False
        self._active = False

    def _fire(self) -> bool:
        """Note that time is up; True while the block is still running (so it should be interrupted)."""
        if self._active:
            self.passed = True
        return self._active

    def __enter__(self) -> Deadline:
        self._active = True
        self._use_signal = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        if self._use_signal:
            self._start = time.monotonic()
            self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            self._previous_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds, REPEAT_SECONDS)
        else:
            self._thread_id = threading.get_ident()
            self._lock = threading.Lock()  # an exception is handed over only while the block runs
            self._done = threading.Event()
            self._watcher = threading.Thread(target=self._watch, name="lessonlib-check-deadline", daemon=True)
            self._watcher.start()
        return self

    def _on_alarm(self, _signum: int, _frame: object) -> None:
        if self._fire():
            raise CaseTimeout

    def _watch(self) -> None:
        """The watchdog thread: after ``seconds``, interrupt the thread running the block, again and again."""
        if self._done.wait(self.seconds):
            return
        while not self._done.is_set():
            with self._lock:
                if not self._fire():
                    return
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id),
                                                           ctypes.py_object(CaseTimeout))
                _handed_over.add(self._thread_id)  # after handing over: if raised in between, only a wait is lost
            self._done.wait(REPEAT_SECONDS)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        while True:  # an interruption arriving while this runs is caught and the clean-up started again
            try:
                self._stop()
                break
            except CaseTimeout:
                continue
        return self.passed and kind is not None and issubclass(kind, CaseTimeout)

    def _stop(self) -> None:
        """Disarm: the timer and handler put back (an earlier timer with what it had left), or the watchdog ended."""
        if self._use_signal:
            self._active = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous_handler)
            delay, interval = self._previous_timer
            if delay:
                delay = max(delay - (time.monotonic() - self._start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, delay, interval)
        else:
            with self._lock:
                self._active = False
            self._done.set()
            self._watcher.join()
            self._drain()

    def _drain(self) -> None:
        """Let an exception the watchdog handed over and that has not been raised yet be raised here, and catch it.

        It is raised at the thread's next check for one, which a loop reaches at once. It is not
        withdrawn instead, because withdrawing one (``PyThreadState_SetAsyncExc`` with NULL) leaves
        the interpreter checking at every instruction from then on, which slows all later code,
        traced code above all. The wait is bounded, in case C code swallowed one unseen.
        """
        end = time.monotonic() + DRAIN_SECONDS
        while self._thread_id in _handed_over and time.monotonic() < end:
            try:
                for _ in range(100):
                    pass
            except CaseTimeout:
                pass
        _handed_over.discard(self._thread_id)


class CappedOutput(io.TextIOBase):
    """A stand-in for sys.stdout and sys.stderr: keeps the first ``max_lines`` lines or ``max_characters``
    characters of what is written, whichever ends first, and counts the rest without keeping it."""

    def __init__(self, max_lines: int, max_characters: int) -> None:
        super().__init__()
        self.max_lines, self.max_characters = max_lines, max_characters
        self.kept: list[str] = []
        self.kept_lines = self.kept_characters = 0
        self.cut_lines = self.cut_characters = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        piece = self._room_for(text)
        self.kept.append(piece)
        self.kept_lines += piece.count("\n")
        self.kept_characters += len(piece)
        self.cut_lines += text.count("\n", len(piece))
        self.cut_characters += len(text) - len(piece)
        return len(text)

    def _room_for(self, text: str) -> str:
        """The start of ``text`` that still fits: up to the character budget and the last line allowed."""
        if self.cut_characters:  # already full
            return ""
        piece = text[: self.max_characters - self.kept_characters]
        end = -1
        for _ in range(self.max_lines - self.kept_lines):
            end = piece.find("\n", end + 1)
            if end < 0:
                return piece
        return piece[: end + 1]

    @property
    def text(self) -> str:
        return "".join(self.kept)

    def note(self) -> str:
        """What was cut, as a line for the reader; "" when nothing was."""
        if not self.cut_characters:
            return ""
        lines = f"{self.cut_lines:,} more line{'' if self.cut_lines == 1 else 's'}, " if self.cut_lines else ""
        return (f"[... {lines}{self.cut_characters:,} more characters of printed output cut: check() shows the "
                f"first {self.max_lines} lines or {self.max_characters:,} characters]")
