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
LEFT_OUT = "left out: "  # the index process's stderr line for a stream the page goes without


class Index:
    """The feeding side, in the batch process. It never waits on the index process while jobs
    run: a path the pipe has no room for now is left for the final list (read then). The pipe's
    write end is this object's own descriptor, checked to be that pipe before each write; if it
    is not (closed, its number reused) or the process ended early, the page is drawn at the end
    by a fresh index process given every path, as when nothing was read ahead."""

    def __init__(self, out: str):
        self.out = out
        self._proc: subprocess.Popen | None = None
        self._feed = -1  # the write end of the index process's stdin; -1 once given up
        self._feed_id: tuple[int, int] | None = None  # (device, inode) of that pipe
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
        if self._proc is None and self._unstarted is None:
            self._proc = self._start()
        if not self._feeding():
            return
        try:
            os.write(self._feed, data)
        except OSError:  # full for now (BlockingIOError), or the process ended: it shows at the end
            pass

    def finish(self, jobs: list[Job]) -> None:
        """Render the page over the streams of ``jobs`` that exist, in their order; a failure is
        one warning (the batch's results stand without the page)."""
        paths = [path for path in (_stream(self.out, job) for job in jobs) if os.path.exists(path)]
        final = FINAL + b"\0" + b"".join(os.fsencode(path) + b"\0" for path in paths)
        proc, self._proc = self._proc, None
        if proc is not None:
            sent = bool(paths) and self._feeding() and proc.poll() is None and self._send(final)
            errors = self._end(proc)
            if sent and proc.returncode != 0:
                _warn(proc.returncode, errors)
                return
            if sent and os.path.exists(os.path.join(self.out, "index.html")):
                _warn(0, errors)
                return
        if not paths:
            return
        fresh = self._start(pipe=False)  # nothing read ahead, or that process ended early
        if fresh is None:
            warn(f"no index.html: {self._unstarted}")
            return
        _, errors = fresh.communicate(final)  # written as its stderr is read: neither side blocks the other
        _warn(fresh.returncode, errors)
        if fresh.returncode == 0 and not os.path.exists(os.path.join(self.out, "index.html")):
            warn("no index.html: the index process wrote none")

    def abandon(self) -> None:
        """End the index process without a page (the batch raised before its end)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._end(proc)

    def _end(self, proc: subprocess.Popen) -> bytes:
        """Close its input (with no final list sent, it ends without a page), wait for it, and
        return what it wrote on stderr."""
        if self._feeding():
            os.close(self._feed)
        self._feed = -1
        return proc.communicate()[1]

    def _start(self, pipe: bool = True) -> subprocess.Popen | None:
        """An index process; with ``pipe``, fed by this object's own descriptor (``_feed``)."""
        read_end = -1
        try:
            if pipe:
                read_end, self._feed = os.pipe()
                facts = os.fstat(self._feed)
                self._feed_id = (facts.st_dev, facts.st_ino)
                os.set_blocking(self._feed, False)
            return subprocess.Popen(
                command(self.out),
                stdin=read_end if pipe else subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the terminal's Ctrl-C is the batch's to handle
            )
        except OSError as exc:
            self._unstarted = f"cannot start the index process: {exc.strerror}"
            if pipe and self._feed >= 0:
                os.close(self._feed)
                self._feed = -1
            return None
        finally:
            if read_end >= 0:
                os.close(read_end)

    def _feeding(self) -> bool:
        """Whether ``_feed`` is still the pipe it was made as (not closed, not another file)."""
        if self._feed < 0:
            return False
        try:
            facts = os.fstat(self._feed)
        except OSError:
            facts = None
        if facts is None or (facts.st_dev, facts.st_ino) != self._feed_id:
            self._feed = -1  # not ours any more: never written to, nor closed, from here
            return False
        return True

    def _send(self, data: bytes) -> bool:
        """The final list, whole; False when the process is gone or the pipe is not ours."""
        os.set_blocking(self._feed, True)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._feed, view) :]
        except OSError:
            return False
        return True


def _warn(code: int, errors: bytes) -> None:
    """What the index process said: the streams it left out of the page, and why it drew none
    when it exited ``code`` (not 0)."""
    lines = errors.decode(errors="replace").strip().splitlines()
    for line in lines:
        if line.startswith(LEFT_OUT):
            warn(f"index.html leaves out {line[len(LEFT_OUT) :]}")
    if code != 0:
        said = [line for line in lines if not line.startswith(LEFT_OUT)] or lines
        warn(f"no index.html: {said[-1] if said else f'the index process exited {code}'}")


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
    failure: Failure | None = None
    for path in final:
        is_live = os.path.realpath(path) in live
        known = read.get(path)
        if known is None or is_live or known[0] is None or known[0] != _identity(path):
            known = load(path, is_live)
        result = known[1]
        if isinstance(result, Failure):  # a job whose runner died before writing: the rest stand
            print(f"{LEFT_OUT}{result.message}", file=sys.stderr)
            failure = result
            continue
        result.anchor = f"run-{len(runs)}"
        runs.append(result)
    if not runs:
        return failure.code if failure is not None else 0
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


def command(out: str) -> list[str]:
    """The index process's command line: this very ``processkit`` (its directory first on the
    path), not whichever one the working directory holds, as ``python -m`` would take."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from processkit.batching.index import main; main()"
    return [sys.executable, "-c", code, root, out]


def main() -> None:
    sys.exit(serve(sys.argv[1], sys.stdin.buffer))
