"""``batch --keep failed``: a job's stream and capture held in memory-backed files while it runs,
dropped when it exits 0 and written into ``--out`` only when it did not.

A farm running many passing jobs then makes no file-system inode per passing job (on ext4 the
inodes of ``--out`` were the largest per-job cost, bench/README.md). Facts about memfds that the
design leans on:
- ``memfd_create`` gives an anonymous regular file on the kernel's internal shmem mount: the
  stream's writer and both pumps treat it as the files they open (``write``, ``pwrite``,
  ``fstat`` as a regular file), and it vanishes with its last descriptor.
- ``sendfile`` reads from shmem, so a failed job's bytes go from the memfd to its files in
  the kernel, a chunk at a time, never through the batch's memory.
- Its pages are memory: a running job holds up to its capture cap per stream (8 MiB each by
  default) and its stream, which ``--keep failed`` accepts for the jobs in flight.
- ``ftruncate`` to 0 frees those pages and leaves an empty file, as a fresh one is, once its
  offset is back at 0 (the stream's writer and a head capture write at the file's offset): so an
  attempt that is over hands its three memfds to the next (``Spares``), sparing each passing
  job three ``memfd_create`` and three ``close``, as many as there are jobs in flight.
"""

from __future__ import annotations

import os

from .. import caller_fds
from ..capture_layout import FILE_NAMES, NAME as LAYOUT_NAME, STREAMS
from ..engine.capture import open_targets
from ..diagnostics import warn
from ..errors import Failure, Kind
from ..safepath import open_for_writing
from ..context import RunContext
from ..spec import LATE_PUBLICATION_MS
from .limits import LEAK_TIMEOUT_SECONDS
from .outdir import ensure_directory

NAMES = ("events.jsonl", *FILE_NAMES.values())
COPY_CHUNK = 1 << 24


class HeldFiles:
    """One attempt's three memfds (stream, stdout, stderr), kept by the batch (``on_host``) and
    lent to the engine as they are (``RunContext.held_lent``): it writes them and never closes
    them, so no copy is made and closed per job (``dup`` and ``close`` three times each)."""

    __slots__ = ("fds", "context")

    def __init__(self, cwd: str | None = None) -> None:
        fds: list[int] = []
        try:
            for name in NAMES:
                fds.append(os.memfd_create(name, os.MFD_CLOEXEC))
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            raise Failure(Kind.SETUP, f"cannot hold the job's files in memory (memfd): {exc.strerror}") from None
        self.fds = tuple(fds)
        # What the engine is given with them, made once for every attempt the set serves: the
        # memfds lent, the run published late (no client can read its stream), the batch's
        # working directory (``cwd``, read once by the batch), nextest's leak bound.
        self.context = RunContext(
            held_fds=self.fds,
            held_lent=True,
            publish_after_ms=LATE_PUBLICATION_MS,
            cwd=cwd,
            passed_fds=caller_fds.taken(),
            exit_drain_seconds=LEAK_TIMEOUT_SECONDS,
        )

    def write_into(self, stream_path: str, capture_dir: str) -> None:
        """The failed attempt's stream and capture, written where ``--keep all`` would have put
        them (the job's directory made as for any job, the files through ``safepath``)."""
        ensure_directory(os.path.dirname(stream_path), "the job directory")
        try:
            out = open_for_writing(stream_path)
            try:
                _copy(self.fds[0], out)
            finally:
                os.close(out)
            targets = open_targets(capture_dir, 0, locked=False)  # the batch holds its --out alone
            try:
                for stream, held in zip(STREAMS, self.fds[1:]):
                    _copy(held, targets[stream].fd)
            finally:
                for target in targets.values():
                    os.close(target.fd)
        except OSError as exc:
            raise Failure(
                Kind.SETUP, f"cannot write the failed job's files under {capture_dir}: {exc.strerror}"
            ) from None

    def empty(self) -> None:
        """Emptied and rewound for another attempt; raises OSError."""
        for fd in self.fds:
            if os.fstat(fd).st_size:
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)

    def close(self) -> None:
        fds, self.fds = self.fds, ()
        for fd in fds:
            os.close(fd)


class Spares:
    """The memfds of attempts that are over, emptied and kept for the next ones (at most one
    set per job in flight); closed with the batch."""

    __slots__ = ("_free", "_cwd")

    def __init__(self, cwd: str | None = None) -> None:
        self._free: list[HeldFiles] = []
        self._cwd = cwd  # the batch's working directory, for each set's context

    def take(self) -> HeldFiles:
        """A set kept from an attempt that is over, else a new one; raises Failure."""
        return self._free.pop() if self._free else HeldFiles(self._cwd)

    def give(self, held: HeldFiles) -> None:
        """An attempt is over with ``held`` (its files written out or dropped): kept emptied,
        or closed when it cannot be emptied."""
        try:
            held.empty()
        except OSError:
            held.close()
            return
        self._free.append(held)

    def close(self) -> None:
        while self._free:
            self._free.pop().close()


def settle(held: HeldFiles, failed: bool, stream_path: str, capture_dir: str, earlier_files: bool) -> bool:
    """After the attempt: its files written into ``--out`` when it ``failed`` (the memfds stay
    the caller's); whether the files now exist (a write that fails is a warning: the summary line
    still records the job). ``earlier_files``: ``--out`` was not empty when the batch began, so
    a passing job's files from an earlier batch may be there (none otherwise: nothing looked for)."""
    try:
        if failed:
            held.write_into(stream_path, capture_dir)
            return True
        if earlier_files:
            _drop_earlier(stream_path, capture_dir)
    except Failure as failure:
        warn(failure.message)
    return False


def _drop_earlier(stream_path: str, capture_dir: str) -> None:
    """A passing job's directory left by an earlier batch into the same ``--out`` (a failure
    ``--resume`` runs again) would outlast the line that says it passed: its stream and capture
    go, as ``--keep all`` would have overwritten them. One failed ``unlink`` where the job has
    no directory."""
    try:
        os.unlink(stream_path)
    except OSError:
        return
    for name in (*FILE_NAMES.values(), LAYOUT_NAME):
        try:
            os.unlink(os.path.join(capture_dir, name))
        except OSError:
            pass
    for directory in (capture_dir, os.path.dirname(stream_path)):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty: what else is there is not this attempt's


def _copy(source: int, target: int) -> None:
    size = os.fstat(source).st_size
    offset = 0
    while offset < size:
        sent = os.sendfile(target, source, offset, min(COPY_CHUNK, size - offset))
        if sent == 0:
            raise OSError(0, "the copy took nothing")
        offset += sent
