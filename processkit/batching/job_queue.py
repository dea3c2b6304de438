"""The jobs a batch has still to start, in order, read from their source only as they start: a
job given again (a retry) is next, then the rest of the source (a ``manifest.Manifest`` read
as it goes, or the API's list). What a job needs once it started is its run's; once it ended,
its line is written and nothing of it stays here, so the batch's memory does not grow with the
number of jobs.

A source that fails while it is read (a manifest file changed since it was checked) ends the
queue; its ``failure`` is the batch's to raise once the jobs running have ended.
"""

from __future__ import annotations

from ..errors import Failure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from .manifest import Job


class JobQueue:
    __slots__ = ("_source", "_again", "_next", "failure")

    def __init__(self, source: Iterable[Job]):
        self._source: Iterator[Job] | None = iter(source)
        self._again: list[Job] = []  # given again, the last given first
        self._next: Job | None = None  # read from the source, not yet started
        self.failure: Failure | None = None

    def peek(self) -> Job | None:
        """The job that starts next, or None when there is none."""
        if self._again:
            return self._again[-1]
        if self._next is None and self._source is not None:
            try:
                self._next = next(self._source)
            except StopIteration:
                self._source = None
            except Failure as failure:
                self.failure, self._source = failure, None
        return self._next

    def pop(self) -> Job | None:
        """The job that starts next, taken off the queue."""
        job = self.peek()
        if self._again:
            self._again.pop()
        else:
            self._next = None
        return job

    def again(self, job: Job) -> None:
        """``job`` starts next (a failed attempt's retry)."""
        self._again.append(job)

    def rest(self) -> Iterator[Job]:
        """Every job left, in the order they would have started (the batch is over: their lines
        say they never did)."""
        while (job := self.pop()) is not None:
            yield job
