"""On a terminal: one progress line per command (bar, runs, current mean, ETA), drawn from the
first moment (each command's initial run estimate), redrawn after each run and, while a run
goes on, every tick of the run's loop with its elapsed time (so a 30 s command is never a blank
screen), and erased before the summary; for a command run in a row (sequential order) erased
before its ``Benchmark N:`` line as it begins and drawn again below it, then erased before the
rest of its block once it is over and drawn again below that without that command's line. More commands
than the terminal has rows share one line, the command that is running. Off a terminal nothing
is drawn (unless ``--style full``)."""

from __future__ import annotations

import time

from ..progress import LiveLines, bar, eta, terminal_rows
from ..text import sanitize
from .plan import Command
from .result import BenchResult, TimedRun
from .printout import duration
from .stats import fmean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

NAME_WIDTH = 40


class ProgressBars:
    """The lines, drawn by ``processkit.progress`` as ``batch``'s bar is."""

    def __init__(self, commands: list[Command], fd: int, initial: int | None = None):
        self.live = LiveLines(fd, draw=True)  # made only when the bench draws (cli/bench.py's --style)
        self.names = [f"{sanitize(c.label)[:NAME_WIDTH]:<{NAME_WIDTH}}" for c in commands]
        guess = f"{initial}" if initial is not None else "?"
        self.lines = [f"{name} {bar(0, None)}   0/{guess} (estimate)" for name in self.names]
        self.base = list(self.lines)  # each line as the last finished run left it
        self.current: tuple[int, str, float] | None = None  # (command, which run, started)
        self.shared = len(commands) >= terminal_rows(fd) - 1  # one line for all, else one each
        self.gone: set[int] = set()  # the commands whose blocks are printed: their lines are drawn no more

    def _draw(self, index: int) -> None:
        drawn = [line for shown, line in enumerate(self.lines) if shown not in self.gone]
        self.live.show([self.lines[index]] if self.shared else drawn)

    def above(
        self, shown: Callable[[BenchResult, int], None], printed_for_good: bool = True
    ) -> Callable[[BenchResult, int], None]:
        """``shown`` (a command's ``Benchmark N:`` line as it begins; its block once it is over,
        ``printed_for_good``) with the lines erased before it and drawn again below it, once the
        block is out without that command's."""

        def printed(result: BenchResult, index: int) -> None:
            self.live.clear()
            shown(result, index)
            if printed_for_good:
                self.gone.add(index)
            left = [other for other in range(len(self.lines)) if other not in self.gone]
            if left:
                self._draw(left[0])

        return printed

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
        times = [run.wall for run in runs if run.wall is not None]
        figures = ""
        if times:
            figures = f"mean {duration(fmean(times))}, ETA {eta(spent, done, target):.1f} s"
        self.base[index] = f"{self.names[index]} {bar(done, max(target, 1))} {done:>3}/{target} {figures}"
        self.lines[index] = self.base[index]
        self._draw(index)

    def close(self) -> None:
        self.live.clear()
