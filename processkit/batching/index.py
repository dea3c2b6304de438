"""The batch's ``index.html``: ``report``'s page over every job's stream (its index page; one
job's run page when the batch has one stream), rendered by a process of its own.

That process is started with the batch's first finished job and reads each job's stream as the
job ends (``Index.add``: a run's stream is complete once its run returned), on a core the batch
process leaves free, so at the end only the page is left to draw. It takes the memory the page
needs, in proportion to the batch, which the batch process itself (flat however many jobs it
ran) does not take on. The final list (``Index.finish``: every job's stream that exists, in
manifest order, those of jobs an earlier batch ran under ``--resume`` too) decides the page: a
stream read early is read again if it changed since, or if a registered runner still writes it.

The pipe carries NUL-ended records, ``+PATH`` (read this one now), then ``=`` and the final
paths; without the ``=`` (the batch died) nothing is written.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

from ..diagnostics import warn
from .manifest import Job

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..errors import Failure
    from ..report.model import Run

READ_AHEAD = b"+"
FINAL = b"="
GROUP = 16  # read-ahead records sent at once


class Index:
    """The feeding side, in the batch process. It never waits on the index process while jobs
    run: a path the pipe has no room for now is left for the final list (read then)."""

    def __init__(self, out: str):
        self.out = out
        self._proc: subprocess.Popen | None = None
        self._unstarted: str | None = None  # why the index process could not be started
        self._pending: list[bytes] = []  # read-ahead records not sent yet (read at the end if never)
        self._size = 0

    def add(self, job: Job) -> None:
        """A finished job's stream (its last attempt), for the index process to read soon: sent
        in groups (one wake-up of that process per group, not per job)."""
        record = READ_AHEAD + os.fsencode(_stream(self.out, job)) + b"\0"
        if self._pending and (len(self._pending) >= GROUP or self._size + len(record) > select.PIPE_BUF):
            self._flush()
        if len(record) <= select.PIPE_BUF:  # only a write that small is whole or nothing
            self._pending.append(record)
            self._size += len(record)

    def _flush(self) -> None:
        data = b"".join(self._pending)
        self._pending, self._size = [], 0
        proc = self._process()
        if proc is None:
            return
        assert proc.stdin is not None
        try:
            os.write(proc.stdin.fileno(), data)
        except OSError:  # full for now (BlockingIOError), or the process ended: it shows at the end
            pass

    def finish(self, jobs: list[Job]) -> None:
        """Render the page over the streams of ``jobs`` that exist, in their order; a failure is
        one warning (the batch's results stand without the page)."""
        paths = [path for path in (_stream(self.out, job) for job in jobs) if os.path.exists(path)]
        if not paths:
            if self._proc is not None:
                self._proc.communicate()  # no final list: it ends without a page
            return
        proc = self._process()
        if proc is None:
            warn(f"no index.html: {self._unstarted}")
            return
        final = FINAL + b"\0" + b"".join(os.fsencode(path) + b"\0" for path in paths)
        _, errors = proc.communicate(final)  # written as its stderr is read: neither side can block the other
        if proc.returncode != 0:
            lines = errors.decode(errors="replace").strip().splitlines()
            warn(f"no index.html: {lines[-1] if lines else f'the index process exited {proc.returncode}'}")
        elif not os.path.exists(os.path.join(self.out, "index.html")):
            # its status was taken by someone else (a run's reaper, which collects every child
            # that is not a root) after it ended early: 0 is all Popen can say then
            warn("no index.html: the index process ended early")

    def _process(self) -> subprocess.Popen | None:
        """The index process, started on first use."""
        if self._proc is None and self._unstarted is None:
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "processkit.batching.index", self.out],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # the terminal's Ctrl-C is the batch's to handle
                )
            except OSError as exc:
                self._unstarted = f"cannot start the index process: {exc.strerror}"
                return None
            assert self._proc.stdin is not None
            os.set_blocking(self._proc.stdin.fileno(), False)
        return self._proc


def _stream(out: str, job: Job) -> str:
    return os.path.join(out, job.id, "events.jsonl")


def serve(out: str, pipe) -> int:
    """The index process: read the streams as their paths come on ``pipe``, then draw the page."""
    from ..cli.report import live_streams, write_atomically
    from ..errors import Failure
    from ..report import reading, render

    read: dict[
        str, tuple[tuple[int, int, int] | None, Run | Failure]
    ] = {}  # path -> (its stat when read, what it gave)

    def load(path: str, live: bool = False) -> tuple[tuple[int, int, int] | None, Run | Failure]:
        before = _identity(path)
        try:
            return before, reading.load(path, "run-0", live=live)
        except Failure as failure:
            return before, failure

    records = _records(pipe)
    for record in records:
        if record == FINAL:
            break
        if record.startswith(READ_AHEAD):
            path = os.fsdecode(record[1:])
            read[path] = load(path)
    else:
        return 0  # no final list: the batch ended without one, no page
    final = [os.fsdecode(record) for record in records]
    live = live_streams()
    runs: list[Run] = []
    for index, path in enumerate(final):
        is_live = os.path.realpath(path) in live
        known = read.get(path)
        if known is None or is_live or known[0] is None or known[0] != _identity(path):
            known = load(path, is_live)
        result = known[1]
        if isinstance(result, Failure):
            print(f"processkit-cli: {result.message}", file=sys.stderr)
            return result.code
        result.anchor = f"run-{index}"
        runs.append(result)
    page = render.single_page(runs[0], None) if len(runs) == 1 else render.index_page(runs)
    try:
        write_atomically(os.path.join(out, "index.html"), page)
    except Failure as failure:
        print(f"processkit-cli: {failure.message}", file=sys.stderr)
        return failure.code
    return 0


def _identity(path: str) -> tuple[int, int, int] | None:
    """What tells a stream changed since it was read: its inode, size and modification time."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _records(stream):
    """The NUL-ended records of ``stream``, as they come."""
    pending = b""
    while chunk := stream.read1(64 * 1024):
        pending += chunk
        *complete, pending = pending.split(b"\0")
        yield from complete


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.stdin.buffer))
