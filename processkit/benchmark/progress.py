"""On a terminal: one progress line per command (bar, runs, current mean, ETA), redrawn in place
after each run and erased before the summary; more commands than the terminal has rows share
one line, the command that just ran. Off a terminal nothing is drawn."""

from __future__ import annotations

import os
import statistics

from ..text import sanitize
from .plan import Command
from .result import TimedRun
from .summary import duration

WIDTH = 30
ERASE_LINE = "\x1b[2K"


class ProgressBars:
    def __init__(self, commands: list[Command], fd: int):
        self.fd = fd
        self.lines = [f"{sanitize(c.name)[:40]:<40} [{' ' * WIDTH}]   0/?" for c in commands]
        self.drawn = False
        try:
            rows = os.get_terminal_size(fd).lines
        except OSError:
            rows = 24
        self.shared = len(commands) >= rows - 1  # one line for all, else one each

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.fd, data) :]

    def _draw(self, index: int) -> None:
        if self.shared:
            self._write(f"\r{ERASE_LINE}{self.lines[index]}")
        else:
            up = f"\x1b[{len(self.lines)}F" if self.drawn else ""
            self._write(up + "".join(f"{ERASE_LINE}{line}\n" for line in self.lines))
        self.drawn = True

    def update(self, index: int, runs: list[TimedRun], target: int, spent: float) -> None:
        """After a run: ``spent`` is what the command's runs took in all (for the ETA)."""
        done = len(runs)
        filled = WIDTH * min(done, target) // max(target, 1)
        times = [run.wall for run in runs if run.wall is not None]
        figures = ""
        if times:
            remaining = max(target - done, 0) * spent / done
            figures = f"mean {duration(statistics.fmean(times))}, ETA {remaining:.1f} s"
        name = self.lines[index][:40]
        self.lines[index] = f"{name} [{'#' * filled}{' ' * (WIDTH - filled)}] {done:>3}/{target} {figures}"
        self._draw(index)

    def close(self) -> None:
        if not self.drawn:
            return
        if self.shared:
            self._write(f"\r{ERASE_LINE}")
        else:
            count = len(self.lines)
            self._write(f"\x1b[{count}F" + f"{ERASE_LINE}\n" * count + f"\x1b[{count}F")
