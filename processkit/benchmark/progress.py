"""On a terminal: one progress line per command (bar, runs, current mean, ETA), drawn from the
first moment (each command's initial run estimate), redrawn after each run and, while a run
goes on, every tick of the run's loop with its elapsed time (so a 30 s command is never a blank
screen), and erased before the summary. More commands than the terminal has rows share one
line, the command that is running. Off a terminal nothing is drawn."""

from __future__ import annotations

import os
import statistics
import time

from ..text import sanitize
from .plan import Command
from .result import TimedRun
from .printout import duration

WIDTH = 30
NAME_WIDTH = 40
ERASE_LINE = "\x1b[2K"


class ProgressBars:
    def __init__(self, commands: list[Command], fd: int, initial: int | None = None):
        self.fd = fd
        self.names = [f"{sanitize(c.label)[:NAME_WIDTH]:<{NAME_WIDTH}}" for c in commands]
        guess = f"{initial}" if initial is not None else "?"
        self.lines = [f"{name} [{' ' * WIDTH}]   0/{guess} (estimate)" for name in self.names]
        self.base = list(self.lines)  # each line as the last finished run left it
        self.current: tuple[int, str, float] | None = None  # (command, which run, started)
        self.drawn = False
        try:
            rows, self.columns = os.get_terminal_size(fd).lines, os.get_terminal_size(fd).columns
        except OSError:
            rows, self.columns = 24, 80
        self.shared = len(commands) >= rows - 1  # one line for all, else one each

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.fd, data) :]

    def _draw(self, index: int) -> None:
        fit = max(self.columns - 1, 1)  # a line that wrapped would throw the cursor moves off
        if self.shared:
            self._write(f"\r{ERASE_LINE}{self.lines[index][:fit]}")
        else:
            up = f"\x1b[{len(self.lines)}F" if self.drawn else ""
            self._write(up + "".join(f"{ERASE_LINE}{line[:fit]}\n" for line in self.lines))
        self.drawn = True

    def start(self) -> None:
        """The first moment: every command's line with its initial estimate."""
        if self.lines:
            self._draw(0)

    def running(self, index: int, what: str) -> None:
        """A run of command ``index`` begins (``run-N`` or ``warmup-N``)."""
        self.current = (index, what, time.monotonic())
        self.tick()

    def tick(self) -> None:
        """While a run goes on: its line says which run it is and how long it has taken."""
        if self.current is None:
            return
        index, what, started = self.current
        kind, _, number = what.partition("-")
        doing = f"warm-up {number}" if kind == "warmup" else f"run {number}"
        self.lines[index] = f"{self.base[index]}  ({doing}: {time.monotonic() - started:.1f} s elapsed)"
        self._draw(index)

    def update(self, index: int, runs: list[TimedRun], target: int, spent: float) -> None:
        """After a run: ``spent`` is what the command's runs took in all (for the ETA)."""
        self.current = None
        done = len(runs)
        filled = WIDTH * min(done, target) // max(target, 1)
        times = [run.wall for run in runs if run.wall is not None]
        figures = ""
        if times:
            remaining = max(target - done, 0) * spent / done
            figures = f"mean {duration(statistics.fmean(times))}, ETA {remaining:.1f} s"
        self.base[index] = f"{self.names[index]} [{'#' * filled}{' ' * (WIDTH - filled)}] {done:>3}/{target} {figures}"
        self.lines[index] = self.base[index]
        self._draw(index)

    def close(self) -> None:
        if not self.drawn:
            return
        if self.shared:
            self._write(f"\r{ERASE_LINE}")
        else:
            count = len(self.lines)
            self._write(f"\x1b[{count}F" + f"{ERASE_LINE}\n" * count + f"\x1b[{count}F")
