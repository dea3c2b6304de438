"""``batch``'s terminal (``cli/batch.py``): a line per finished job, on a terminal a progress bar
below them, ``--show-output``'s blocks, and at the end the failed and flaky jobs named above
the closing line."""

from __future__ import annotations

import sys
import time

from ..engine.endings import stop_named
from ..engine.signals import STOP_SIGNALS
from ..text import killed_by, milliseconds, sanitize
from ..batching.failures import FAILURES_NAMED, NAMED_AT_THE_END, capture_cut, ended, ending, heading
from ..batching.job_lines import OUTCOMES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..summary_line import JobLine


# A job ended with one of these sources never ran its child: its line says why, since no
# stream and no capture does (a timeout or a cancellation is in the stream, and needs no words).
UNSTARTED_CHILD = ("setup", "spawn_error", "container_error", "internal")
# A job's line says "exit N" alone for these outcomes (``job_lines.outcome``), else the outcome's
# words first (the failures named at the end are failures.NAMED_AT_THE_END).
PLAIN_EXITS = ("succeeded", "failed")


def _counted(tally) -> str:
    """Every job done that did not exit 0, by the closing line's words (their reason in
    parentheses left off: ``skipped`` sums a need's and ``--resume``'s), so the counts add up to
    the bar's: ``failed`` always, the others when there are any."""
    counts: dict[str, int] = {}
    for kind, words in (*OUTCOMES, ("skipped", "skipped")):
        name = words.split(" (")[0]
        counts[name] = counts.get(name, 0) + getattr(tally, kind)
    return "".join(f", {count} {name}" for name, count in counts.items() if count or name == "failed")


class Progress:
    """The batch's terminal: a line per finished job; on a terminal, a bar redrawn below them
    (as each job ends, and each second: how many run, and the one running longest), drawn by
    ``processkit.progress`` as ``bench``'s lines are; at the end, every failed job named with
    its exit, its stderr capture and that file's last lines (as make and parallel leave the
    compiler's error last on the screen)."""

    def __init__(
        self, total: Callable[[], int | None], out: str, show_output: bool, quiet: bool = False, slow_ms: int = 0
    ):
        from ..progress import LiveLines, drawable

        self._total = total
        self._out = out
        self._show = show_output
        self.quiet = quiet  # nothing on stderr (--error-format json); --show-output's stdout stays
        fd = sys.stderr.fileno()
        from .batch_output import LiveOutput

        self.output = LiveOutput(sys.stdout.fileno(), fd)  # on the batch's loop while it turns
        self._live = LiveLines(fd, draw=not quiet and drawable(fd), out=self.output.stderr)
        self.output.before_said = self._live.clear  # a warning on a row of its own, never after the bar
        self._started = time.monotonic()
        self._done = 0
        self._failed: list[JobLine] = []
        self._failed_count = 0
        self._endings: dict[str, int] = {}  # the jobs named at the end by how they ended (failures.ending)
        self._flaky: list[JobLine] = []  # named at the end with their earlier attempts' ends
        self._flaky_count = 0  # the first FAILURES_NAMED named, the rest counted
        self._running: dict[str, float] = {}  # run_batch's: job id -> its monotonic start
        self._slow_ms = slow_ms  # --slow-after: a running job's SLOW line each period (0: none)
        self._slow: dict[tuple[str, float], int] = {}  # (id, the attempt's start) -> the periods said
        self.attempts_allowed = 1  # --retries + 1, for a flaky job's line
        self._unshown = False  # a job not named at the end kept output no line showed: said where
        from ..batching.job_lines import HALTED, WORDS, outcome, retried

        self._words = WORDS, outcome, HALTED, retried  # imported once here: each job's line reads them

    def finished(self, line: JobLine, tally) -> None:
        with self.output.drawing:  # a Dask watcher's warning waits for the bar (``LiveOutput._said``)
            self._finished(line, tally)

    def _finished(self, line: JobLine, tally) -> None:
        WORDS, outcome, HALTED, retried = self._words  # noqa: N806 - job_lines' names, as imported once
        self._done += 1
        code = line.exit_code
        kind = outcome(line)
        state = f"exit {code}" if kind in PLAIN_EXITS else WORDS[kind] + ("" if code is None else f" (exit {code})")
        if line.signal is not None:
            state = f"{killed_by(line.signal)}, exit {code}"
        state += line.notes()
        if line.source == "skipped":
            state = f"skipped, {line.message}"
        elif line.source == "halted":  # why, on its own line too: a CI log is read from a job's line
            state += f", {HALTED}"
        elif line.source == "cancelled" and code is None and tally.cancelled_by in STOP_SIGNALS.values():  # a stop's
            state += f", cancelled by {stop_named(tally.cancelled_by)}"  # as the closing line says it
        took = "" if line.duration_ms is None else f" in {milliseconds(line.duration_ms)}"
        tries = f", {line.attempts} attempts" if line.attempts > 1 else ""
        unstarted = line.source in UNSTARTED_CHILD or (line.started_at is None and line.earlier_attempts)
        # retries left, not a stop's own cancellation: a stop or the halt came before its retry
        unretried = retried(line) and line.attempts < self.attempts_allowed
        why = f": {sanitize(line.message)}" if (unstarted or unretried) and line.message else ""
        text = f"batch: {sanitize(line.id)}: {state}{took}{tries}{why}"
        if line.flaky:  # nextest's words: passed on attempt 2 of the 3 allowed
            text = f"batch: FLAKY {line.attempts}/{self.attempts_allowed} {sanitize(line.id)}: {state}{took}"
        elif line.leaked and code == 0:  # nextest's LEAK: passed, its processes left running
            text = f"batch: LEAK {sanitize(line.id)}: {state}{took}"
        if kind not in NAMED_AT_THE_END and not self._show:  # the closing block and --show-output say theirs
            for name, info in (("stdout", line.stdout), ("stderr", line.stderr)):
                cut = "" if info is None else capture_cut(name, info, line.run_id)
                text += f"; {name}'s capture{cut}" if cut else ""
                self._unshown = self._unshown or bool(info is not None and info.bytes and info.path)
        if line.flaky:
            self._flaky_count += 1
            if len(self._flaky) < FAILURES_NAMED:
                self._flaky.append(line)
        if kind in NAMED_AT_THE_END:
            self._failed_count += 1
            for said in ending(line, kind):
                self._endings[said] = self._endings.get(said, 0) + 1
            if len(self._failed) < FAILURES_NAMED:
                self._failed.append(line)
        if self._show and code is not None:  # the job's output below its line, then the bar again
            if not self.quiet:
                self._live.above(text)
            self._print_captured(line)
            self._redraw(tally)
        elif not self.quiet:
            self._live.above(text, [self._bar_text(tally)] if self._live.draw else None)

    def tick(self, running: dict[str, float], tally) -> None:
        """Each second: a SLOW line for each job run past another ``--slow-after`` period, and the
        bar redrawn (off a terminal, nothing)."""
        self._running = running
        with self.output.drawing:
            self._tick(tally)

    def _tick(self, tally) -> None:
        if self._slow_ms and not self.quiet:
            self._say_slow(self._running)
        self._redraw(tally)

    def _say_slow(self, running: dict[str, float]) -> None:
        """nextest's ``SLOW [> 60.000s] ID``: a job (an attempt: a retry starts its own count)
        running past each period, said once per period as the second's tick sees it, so a CI
        log that shows no bar still says what runs long. The second's lines go out as one
        write, the bar left for the tick to draw once below them."""
        now = time.monotonic()
        seen: dict[tuple[str, float], int] = {}
        lines = []
        for job, since in running.items():
            periods = int((now - since) * 1000 // self._slow_ms)
            said = self._slow.get((job, since), 0)
            seen[(job, since)] = max(periods, said)
            if periods > said:
                lines.append(f"batch: SLOW [> {periods * self._slow_ms / 1000:.3f}s] {sanitize(job)}")
        self._slow = seen  # the jobs ended are let go
        if lines:
            self._live.above("\n".join(lines))

    def _redraw(self, tally) -> None:
        if self._live.draw:  # the bar's text only when it is drawn: it looks at every job running
            self._live.show([self._bar_text(tally)])

    def _print_captured(self, line: JobLine) -> None:
        """The job's captured stdout on stdout under a header naming the job, and its stderr on
        stderr (not under --error-format json: it stays in its capture file): as one block each,
        queued as its file on the batch's live output (``batch_output``), read a chunk at a time
        as the reader takes it, so neither a stalled reader nor a job with no cap on its capture
        holds the batch's loop or its memory."""
        stderr = None if self.quiet else line.stderr
        header = f"==> {sanitize(line.id)} ({ended(line)}) <==\n".encode()  # a signal, a timeout named
        for name, info, out in (("stdout", line.stdout, self.output.stdout), ("stderr", stderr, self.output.stderr)):
            if out.gone:  # a reader that went away (| head) ended the showing on its stream
                continue
            path = info.path if info is not None and info.bytes else None  # no path: --keep failed
            if path:  # the header and its block as one: never a header shown without its block
                out.copy(path, header if name == "stdout" else b"")
            elif name == "stdout":
                out.write(header)
            if path and info is not None:
                cut = "" if self.quiet else capture_cut(name, info, line.run_id)
                if cut:  # the block shown is not the job's whole output: said below it
                    self._live.above(f"batch: {sanitize(line.id)}: {name} above{cut}")
            elif info is not None and info.bytes and not self.quiet:  # an empty block is no silent job's
                from ..events.render import size

                self._live.above(
                    f"batch: {sanitize(line.id)}: its {size(info.bytes)} of {name} not kept (--keep failed)"
                )

    def _bar_text(self, tally) -> str:
        from ..progress import bar, eta

        # --resume's skipped jobs (counted as they are met) are done over the whole manifest, so
        # the bar only rises; the ETA goes by the jobs run here, not the skipped ones
        done, total = self._done + tally.skipped, self._total()  # None: not known yet
        elapsed = time.monotonic() - self._started
        # the counts in the closing line's words and order (``N exited 0, N failed``): one word for one thing
        text = (
            f"{bar(done, total)} {done}/{'?' if total is None else total}: {tally.succeeded} exited 0{_counted(tally)}"
        )
        text += "" if total is None else f", ETA {eta(elapsed, self._done, total - tally.skipped):.0f}s"
        if self._running:
            job, since = min(self._running.items(), key=lambda item: item[1])
            text += f", running {len(self._running)}, longest {sanitize(job, 40)} ({time.monotonic() - since:.0f}s)"
        return text

    def failures_named(self) -> str:
        """The first failed jobs in one clause, for ``--error-format json``'s envelope
        (``batching.failures.named``)."""
        from ..batching.failures import named

        return named(self._failed, self._failed_count, self._out)

    def end(self, tally, shell_way: str, said: str | None = None) -> None:
        """The closing block and line: ``tally``'s sentence, or ``said`` in its place (a batch
        with no job: what it did with its reports)."""
        with self.output.drawing:
            if tally.skipped and not self.quiet:  # --resume's jobs skipped after the last one ended
                self._redraw(tally)
            self._end(tally.sentence() if said is None else said, shell_way)

    def abandon(self) -> None:
        """The batch is over, however it ended: the bar taken away (a failure's line said next
        goes on a row of its own) and its warnings straight to stderr again (``release``)."""
        with self.output.drawing:
            try:
                self._live.clear()
            finally:
                self.output.release()

    def _end(self, sentence: str, shell_way: str) -> None:
        if self.quiet:
            return
        self._live.clear()
        from ..batching.failures import closing, flaky_block, output_kept

        text = flaky_block(self._flaky, self._flaky_count, self._out)
        if self._failed:
            text += heading(self._endings)
        text += closing(self._failed, self._failed_count, self._out, shell_way=shell_way)
        self._live.above(text + f"batch: {sentence}{output_kept(self._out) if self._unshown else ''}\n")
