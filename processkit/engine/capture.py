"""Bounded transcript capture: the two files, their all-or-nothing setup and the final report.

The per-stream counters and digest live in the pump that writes the file (native or Python);
this module owns the files themselves and the report's shape. Which part of a stream a file
keeps (``--capture-keep``: its head, its tail, or both ends) is a target's ``head``: the leading
bytes kept in order; the rest of the cap is a ring the pumps write in place and ``capture_keep.py``
puts in order at the end.
"""

from __future__ import annotations

import errno
import os
import stat

from ..capture_layout import FILE_NAMES, MARKS_NAME, NAME as LAYOUT_NAME, PENDING, RING_FROM, STORED, STREAMS
from ..capture_layout import WRITE_ERROR, Marks
from ..native import hold_stream
from ..plain import Plain
from ..safepath import create_file, open_directory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..registry.stream_guard import StreamKey


# ``open_targets``' refusal of a file another run captures into (its lock, as a run's stream's).
HELD = "a process holds a lock on it: another run capturing into it, or a program that locked it (one capture, one run)"


class CaptureTarget(Plain):
    __slots__ = ("path", "fd", "cap", "keep", "marks", "live_record")

    def __init__(self, path: str, fd: int, cap: int, keep: str = "head"):
        self.path = path
        self.fd = fd
        self.cap = cap
        self.keep = keep
        # A ring's counters in capture-keep.marks (capture_layout.Marks), kept by the pump as it
        # stores each chunk, and the live record they belong to (retired before the ring is put in order).
        self.marks: memoryview | None = None
        self.live_record: Marks | None = None

    @property
    def head(self) -> int:
        """The stream's leading bytes the file keeps in order; the other ``cap - head`` are its
        last bytes, kept in a ring (none with ``head``, all the cap with ``tail``)."""
        if self.keep == "head":
            return self.cap
        return 0 if self.keep == "tail" else self.cap // 2


class CaptureReport(Plain):
    """A stream's capture result; ``kept`` names the stream's byte ranges the file holds, in
    file order (``[(0, bytes_written)]`` unless a ring kept the stream's end)."""

    __slots__ = ("path", "bytes_seen", "bytes_written", "sha256", "write_error", "cap", "kept")

    def __init__(
        self,
        path: str,
        bytes_seen: int,
        bytes_written: int,
        sha256: str,
        write_error: bool,
        cap: int,
        kept: tuple[tuple[int, int], ...] | None = None,
    ):
        self.path = path
        self.bytes_seen = bytes_seen
        self.bytes_written = bytes_written
        self.sha256 = sha256
        self.write_error = write_error
        self.cap = cap
        self.kept = kept if kept is not None else (((0, bytes_written),) if bytes_written else ())

    @property
    def truncated(self) -> bool:
        return self.bytes_seen > self.cap

    def as_event(self) -> dict:
        return {
            "path": self.path,
            "bytes": self.bytes_seen,
            "bytes_seen": self.bytes_seen,
            "bytes_written": self.bytes_written,
            "sha256": self.sha256,
            "truncated": self.truncated,
            "write_error": self.write_error,
        }


RingState = tuple  # (target, seen, stored, ring_from, write_error): what finishing a ring needs

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def ring_report(target: CaptureTarget, seen: int, stored: int, ring_from: int, write_error: bool) -> CaptureReport:
    """The report of a ring capture once its pump is done (either pump: see capture_keep.py)."""
    from . import capture_keep

    if target.live_record is not None:  # the ring is about to be rewritten in place: its marks no longer hold
        target.live_record.retire()
    written, digest, write_error, kept = capture_keep.finish(
        target.fd, target.head, target.cap, stored, ring_from, write_error
    )
    return CaptureReport(target.path, seen, written, digest, write_error, target.cap, kept)


def finished_report(pump):
    """A pump's report once its stream ended (a run's steps: ``yield from``): a ring is put in
    order a bounded chunk per turn of the host's loop (``capture_keep.finishing``). Asked once."""
    ring = pump.ring_state()
    if ring is None:
        return pump.report()
    from . import capture_keep

    target, seen, stored, ring_from, write_error = ring
    if target.live_record is not None:  # the ring is about to be rewritten in place: its marks no longer hold
        target.live_record.retire()
    written, digest, write_error, kept = yield from capture_keep.finishing(
        target.fd, target.head, target.cap, stored, ring_from, write_error
    )
    return CaptureReport(target.path, seen, written, digest, write_error, target.cap, kept)


def unused_report(target: CaptureTarget) -> CaptureReport:
    """The report of a stream the child never had (``--pty`` merges stderr into the terminal):
    its file exists and is empty."""
    return CaptureReport(target.path, 0, 0, EMPTY_SHA256, False, target.cap)


def open_targets(
    directory: str,
    cap: int,
    keep: str = "head",
    *,
    readable: bool = False,
    events_file: tuple[int, int] | None = None,
    locked: bool = True,
    key: StreamKey | None = None,
) -> dict[str, CaptureTarget]:
    """Open ``stdout.log`` and ``stderr.log`` under ``directory``, all or nothing; ``readable``:
    the files made here are opened to read too (``safepath.create_file``: a carrier reads them back).

    The directory and the files go through ``safepath``: missing directories are made and the
    files created relative to a checked directory handle, never through another user's link.
    Files are opened without truncation first; only when both opened are they emptied (regular
    files only: like ``O_TRUNC``, emptying means nothing for a device or FIFO, and ftruncate
    would fail there after the first file was already emptied). On failure, only what this
    attempt created (files and directories) is removed. A file that is the run's event stream
    (``events_file``, its ``(st_dev, st_ino)``: ``--jsonl DIR/stdout.log``, a link, a hard link)
    fails the setup before anything is emptied. Each regular file is locked as a run's stream
    is (``native.hold_stream``, without waiting, let go as the files close): a second
    run given the same ``--capture-dir`` while the first writes it is refused (EBUSY, ``HELD``)
    before anything is emptied, never overwriting the first's bytes under its digest. ``locked``
    False: the carrier guards the directory itself (a batch's job, ``RunContext.stream_guarded``).
    ``key``: the run's stream's ``StreamKey``, which a file a read lock left unlocked takes.
    """
    created_dirs: list[str] = []
    created_files: list[str] = []
    opened: dict[str, CaptureTarget] = {}
    emptied: list[int] = []  # the files found there, regular ones: emptied once both are open
    held: tuple[int, int] | None = None  # the regular file the first stream holds
    dir_fd = -1
    try:
        _taken(directory)
        dir_fd, here = open_directory(directory, created=created_dirs)
        for stream in STREAMS:
            name = FILE_NAMES[stream]
            # Non-blocking when it exists: a FIFO planted here must neither hang the open (no
            # reader: 111) nor the pump (a reader that stalls: the write fails, write_error is latched).
            fd, created = create_file(dir_fd, here, name, os.O_WRONLY, existing=os.O_NONBLOCK, readable=readable)
            if created:
                created_files.append(name)
            opened[stream] = CaptureTarget(os.path.join(directory, name), fd, cap, keep)
            found = os.fstat(fd)
            _not_the_stream(found, name, events_file)
            if stat.S_ISREG(found.st_mode):
                if held == (found.st_dev, found.st_ino):  # a hard link: one file, two streams
                    raise FileExistsError(errno.EEXIST, f"{name} there is {FILE_NAMES['stdout']}")
                if locked:
                    hold_stream(fd, found, f"{name} there: {HELD}", key)
                held = found.st_dev, found.st_ino
                if not created:  # a file just created is empty already
                    emptied.append(fd)
        # The ring's layout record and marks are renamed over their names (a hard link there to
        # the stream would keep it by its name: refused too, harmlessly).
        if keep != "head" and events_file is not None:
            for name in (LAYOUT_NAME, MARKS_NAME):
                try:
                    _not_the_stream(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), name, events_file)
                except FileNotFoundError:
                    pass
        for fd in emptied:
            os.ftruncate(fd, 0)
    except OSError:
        for target in opened.values():
            os.close(target.fd)
        for name in created_files:
            _quietly(lambda made: os.unlink(made, dir_fd=dir_fd), name)
        for path in reversed(created_dirs):
            _quietly(os.rmdir, path)
        raise
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)
    return opened


def _taken(directory: str) -> None:
    """EEXIST where the reference's ``create_dir_all`` says it: its last component there and no
    directory (``f`` and ``f/`` alike), or a link to nothing where it would make what is missing
    (its ``mkdir`` does not follow the link; ours would make the link's target). Read-only: a
    file on the way stays ENOTDIR, and whatever raced this is still ``safepath``'s to check."""
    path, last = directory, True
    while path.rstrip("/"):
        path = path.rstrip("/")
        if os.path.exists(path):
            if last and not os.path.isdir(path):
                break
            return
        if os.path.lexists(path):
            break
        path, last = os.path.dirname(path), False
    else:
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))


def _not_the_stream(found: os.stat_result, name: str, events_file: tuple[int, int] | None) -> None:
    """A capture's file that is the run's stream would be emptied, then written by both. Named as
    the reference names the stream, never by a flag, so the API's message is the same line."""
    if (found.st_dev, found.st_ino) == events_file:
        raise FileExistsError(errno.EEXIST, f"{name} there is the JSONL events file")


def run_targets(
    directory: str,
    cap: int,
    keep: str,
    *,
    captured: list[int] | None,
    events_file: tuple[int, int] | None,
    locked: bool,
    key: StreamKey | None = None,
) -> dict[str, CaptureTarget]:
    """A run's ``open_targets``, its files made readable where what they hold is read back: by a
    carrier (``captured``, ``RunContext.captured``: filled here with a descriptor to read each)
    or by the ring put in order in place (``capture_keep``)."""
    readable = captured is not None or keep != "head"
    targets = open_targets(directory, cap, keep, readable=readable, events_file=events_file, locked=locked, key=key)
    if captured is not None:
        from ..readback import reader  # a carrier's read-back only: a plain run loads none

        captured.extend(reader(targets[stream].fd) for stream in STREAMS)
    return targets


def record_rings(targets: dict[str, CaptureTarget], directory: str, run_id: str) -> Marks | None:
    """The live record of ring captures (capture_layout.start), its counters handed to each
    target's pump; without one (it could not be written) the pumps keep no marks."""
    from .. import capture_layout

    first = targets["stdout"]
    live = capture_layout.start(directory, run_id, first.keep, first.cap, first.head)
    if live is not None:
        for name, target in targets.items():
            target.marks, target.live_record = live.slots[name], live
    return live


def held_targets(spec, capture_dir: str | None, fds: tuple[int, int]) -> dict[str, CaptureTarget]:
    """A batch's memory-backed capture files (``RunContext.held_fds``), named by the paths under
    ``capture_dir`` (the run's) they are written to if the job fails."""
    assert capture_dir is not None and spec.capture_keep == "head", "the batch holds head captures only"
    return {
        stream: CaptureTarget(os.path.join(capture_dir, FILE_NAMES[stream]), fd, spec.capture_max_bytes)
        for stream, fd in zip(STREAMS, fds)
    }


def _quietly(action, path: str) -> None:
    try:
        action(path)
    except OSError:
        pass


class CaptureFile:
    """The pure-Python capped writer: counts every byte, writes the part its target keeps
    and hashes it as written (a ring is hashed once in order, by ``capture_keep.finish``).

    The first failed write latches ``write_error``; nothing more is written, counting goes on.
    """

    def __init__(self, target: CaptureTarget):
        self.target = target
        self.seen = 0
        self.stored = 0  # the stream's bytes [0, stored) went to the file (a ring keeps the last of them)
        self.ring_from = target.head  # a ring holds every byte from here on it has room for (stored skips)
        self._ring = target.cap - target.head
        self.write_error = False
        self._digest = None
        self._marks = target.marks if self._ring else None
        if self._ring:
            from . import capture_keep

            self.write_error = not capture_keep.ring_ready(target.fd)
            if self._marks is not None:
                self._marks[WRITE_ERROR] = int(self.write_error)
        else:
            import hashlib  # only the pure-Python pump hashes here; start-up skips the import

            self._digest = hashlib.sha256()

    def write(self, data: memoryview) -> None:
        start = self.seen
        self.seen += len(data)
        if self.write_error:
            return
        marks = self._marks
        if marks is None:
            self._store(data, start)
            return
        # As csrc/pump.c: the chunk's end is announced before any byte of it is stored, and the
        # counters published after (stored before the error: capture_layout.py).
        marks[PENDING] = self.seen
        self._store(data, start)
        marks[RING_FROM] = self.ring_from
        marks[STORED] = self.stored
        marks[WRITE_ERROR] = int(self.write_error)

    def _store(self, data: memoryview, start: int) -> None:
        head, ring = self.target.head, self._ring
        if start < head and not self._put(data[: head - start], start if ring else None):
            return
        if ring and self.seen > head:
            skip = max(head - start, 0)
            if len(data) - ring > skip:  # bytes the ring would overwrite within this very chunk
                skip = len(data) - ring
                self.ring_from = start + skip
            self.stored = start + skip
            offset = (self.stored - head) % ring
            part = data[skip:]
            if self._put(part[: ring - offset], head + offset):
                self._put(part[ring - offset :], head)

    def _put(self, data: memoryview, offset: int | None) -> bool:
        """Stores ``data`` at ``offset`` (None: at the file's own offset, as the head mode
        writes a FIFO or device too); False once a write failed."""
        while data:
            try:
                if offset is None:
                    count = os.write(self.target.fd, data)
                else:
                    count = os.pwrite(self.target.fd, data, offset)
                    offset += count
            except InterruptedError:
                continue
            except OSError:
                count = 0
            if count == 0:  # a write that takes nothing would never finish: an error, as in C
                self.write_error = True
                return False
            if self._digest is not None:
                self._digest.update(data[:count])
            self.stored += count
            data = data[count:]
        return True

    def ring_state(self) -> RingState | None:
        if self._digest is not None:
            return None
        return self.target, self.seen, self.stored, self.ring_from, self.write_error

    def report(self) -> CaptureReport:
        if self._digest is None:
            return ring_report(self.target, self.seen, self.stored, self.ring_from, self.write_error)
        return CaptureReport(
            self.target.path, self.seen, self.stored, self._digest.hexdigest(), self.write_error, self.target.cap
        )
