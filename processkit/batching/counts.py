"""How a batch's jobs ended, as its closing sentence and exit code say it (``JobCounts``): kept
apart from ``recorder``, which counts each job's line into it as the line is written."""

from __future__ import annotations

from ..engine.endings import stop_named
from ..summary_line import JobLine
from ..text import plural
from .job_lines import HALTED, OUTCOMES, outcome


class JobCounts:
    """How the jobs ended, as the batch's closing sentence and exit code say it: a count per
    kind of ``job_lines.outcome``."""

    __slots__ = (
        "total",
        "skipped",
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "task_failed",
        "not_started",
        "cancelled_by",
        "halted",
        "need_failed",
        "flaky",
        "leaked",
        "leaked_unknown",
        "unrecorded",
        "input_left",
        "gone",
        "own",
    )

    def __init__(self, total: int):
        self.total = total
        self.skipped = 0  # --resume: exited 0 in an earlier batch
        self.succeeded = 0
        self.failed = 0
        self.timed_out = 0
        self.cancelled = 0  # ended by a cancellation (the batch's stop, or `cancel`/`kill` on the job)
        self.task_failed = 0  # --dask-scheduler: the task carrying it failed before its stream ended
        self.not_started = 0
        self.cancelled_by: str | None = None  # the stop's source, when one stopped the batch
        self.halted = 0  # not started: --halt-on-failure stopped the batch (said, as a stop's source is)
        self.need_failed = 0  # skipped: a need did not exit 0
        self.flaky = 0  # exited 0 on a retry after a failed attempt
        self.leaked = 0  # left processes running when its command exited (killed at its cleanup)
        self.leaked_unknown = 0  # whose members could not be read then: leaky or not, unknown
        self.unrecorded = False  # jobs never started left out: a stop again, or their read failed
        self.input_left = False  # a template's pipe left unread by a stop or the halt: its jobs' number unknown
        self.gone: frozenset[str] = frozenset()  # --resume: the earlier summary's jobs this batch has not
        self.own: set[str] | None = None  # --resume over lines: the ids this batch wrote a line for (None: all)

    def count(self, line: JobLine) -> None:
        kind = outcome(line)
        setattr(self, kind, getattr(self, kind) + 1)
        if kind == "succeeded":
            self.flaky += line.flaky
        self.halted += line.source == "halted"
        if line.leaked:
            self.leaked += 1
        self.leaked_unknown += line.leaked_unknown

    @property
    def unsuccessful(self) -> int:
        """The jobs recorded that did not exit 0, whatever their outcome."""
        return sum(getattr(self, kind) for kind, _ in OUTCOMES)

    def sentence(self) -> str:
        """The batch's closing words: ``3 of 5 jobs exited 0, 1 failed, 1 not started`` (``0 of 1
        job exited 0, 1 failed``: the noun agrees with the count it follows). After
        ``--resume`` the count is of the jobs this batch was to run, the ones skipped as passed
        before said apart (``2 of 2 jobs to run exited 0, 2 skipped (--resume: passed before)``),
        so a resumed batch whose jobs all passed never reads ``0 of 4 jobs exited 0``, and one
        that had none left to run says so (``no job to run: 2 skipped (--resume: passed before)``)."""
        none_to_run = bool(self.skipped) and self.skipped == self.total
        if none_to_run:
            parts = [f"no job to run: {self.skipped} skipped (--resume: passed before)"]
        elif self.skipped:
            parts = [f"{self.succeeded} of {plural(self.total - self.skipped, 'job')} to run exited 0"]
        else:
            parts = [f"{self.succeeded} of {plural(self.total, 'job')} exited 0"]
        counted = [(getattr(self, kind), words) for kind, words in OUTCOMES]
        for count, words in (
            *counted,
            (self.flaky, "flaky"),
            (self.leaked, "leaky (left processes running)"),
            (self.leaked_unknown, "with leaks unknown (members unread)"),
            (0 if none_to_run else self.skipped, "skipped (--resume: passed before)"),
        ):
            if count:
                parts.append(f"{count} {words}")
        if self.cancelled_by is not None:
            parts.append(f"cancelled by {stop_named(self.cancelled_by)}")  # the summary keeps the word
        elif self.halted or self.input_left:  # the halt left jobs unstarted, or a pipe unread
            parts.append(HALTED)
        if self.input_left:
            parts.append("its input not read to its end")
        if self.unrecorded:
            parts.append("the rest not recorded")
        return ", ".join(parts)
