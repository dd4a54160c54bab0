"""How the demo talks: the story on stdout, a spinner per step on a terminal's stderr, plain text when piped."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MARKS = {"ok": "✓", "fail": "✗"}


class Narrator:
    """Prints each step's header and lines; while a step runs, a spinner shows the latest progress line.

    The spinner is drawn only when stderr is a terminal (and `animate` is not False); piped output gets the
    same story as plain lines, and nothing of the spinner.
    """

    def __init__(
        self, out: TextIO | None = None, err: TextIO | None = None, animate: bool | None = None
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.animate = self.err.isatty() if animate is None else animate
        self._lock = threading.Lock()
        self._label = ""
        self._detail = ""
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- the story ----------------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        with self._lock:
            self._clear()
            self.out.write(text + "\n")
            self.out.flush()

    def begin(self, label: str) -> None:
        """A step starts: its label on the spinner line until `end`."""
        self.say(label)
        with self._lock:
            self._label, self._detail, self._started = label, "", time.monotonic()
        if self.animate:
            self._stop.clear()
            self._thread = threading.Thread(target=self._spin, name="demo-spinner", daemon=True)
            self._thread.start()

    def detail(self, text: str) -> None:
        """The latest progress line of the running step (shown on the spinner line only)."""
        with self._lock:
            self._detail = text

    def end(self, ok: bool, text: str) -> float:
        """The step is over: stop the spinner, print its result; returns the step's seconds."""
        seconds = time.monotonic() - self._started
        self._halt()
        self.say(f"  {MARKS['ok' if ok else 'fail']} {text} ({seconds:.1f} s)")
        return seconds

    # ---- the spinner --------------------------------------------------------------------------------

    def _spin(self) -> None:
        frame = 0
        while not self._stop.wait(0.1):
            with self._lock:
                elapsed = time.monotonic() - self._started
                line = f"{FRAMES[frame % len(FRAMES)]} {elapsed:4.1f}s  {self._detail or self._label}"
                width = shutil.get_terminal_size((100, 20)).columns - 1
                self.err.write("\r\x1b[2K" + line[:width])
                self.err.flush()
            frame += 1

    def _halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        if self.animate:
            self.err.write("\r\x1b[2K")
            self.err.flush()

    def close(self) -> None:
        self._halt()
