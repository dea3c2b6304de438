"""Bounded transcript capture: the two files, their all-or-nothing setup and the final report.

The per-stream counters and digest live in the pump that writes the file (native or Python);
this module owns the files themselves and the report's shape.
"""

from __future__ import annotations

import os
import stat

from ..plain import Plain
from ..safepath import create_file, open_directory

STREAMS = ("stdout", "stderr")


class CaptureTarget(Plain):
    __slots__ = ("path", "fd", "cap")

    def __init__(self, path: str, fd: int, cap: int):
        self.path = path
        self.fd = fd
        self.cap = cap


class CaptureReport(Plain):
    __slots__ = ("path", "bytes_seen", "bytes_written", "sha256", "write_error", "cap")

    def __init__(self, path: str, bytes_seen: int, bytes_written: int, sha256: str, write_error: bool, cap: int):
        self.path = path
        self.bytes_seen = bytes_seen
        self.bytes_written = bytes_written
        self.sha256 = sha256
        self.write_error = write_error
        self.cap = cap

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


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def unused_report(target: CaptureTarget) -> CaptureReport:
    """The report of a stream the child never had (``--pty`` merges stderr into the terminal):
    its file exists and is empty."""
    return CaptureReport(target.path, 0, 0, EMPTY_SHA256, False, target.cap)


def open_targets(directory: str, cap: int) -> dict[str, CaptureTarget]:
    """Open ``stdout.log`` and ``stderr.log`` under ``directory``, all or nothing.

    The directory and the files go through ``safepath``: missing directories are made and the
    files created relative to a checked directory handle, never through another user's link.
    Files are opened without truncation first; only when both opened are they emptied (regular
    files only: like ``O_TRUNC``, emptying means nothing for a device or FIFO, and ftruncate
    would fail there after the first file was already emptied). On failure, only what this
    attempt created (files and directories) is removed.
    """
    created_dirs: list[str] = []
    created_files: list[str] = []
    opened: dict[str, CaptureTarget] = {}
    dir_fd = -1
    try:
        dir_fd, here = open_directory(directory, created=created_dirs)
        for stream in STREAMS:
            name = f"{stream}.log"
            # Non-blocking when it exists: a FIFO planted here must neither hang the open (no
            # reader: 111) nor the pump (a reader that stalls: the write fails, write_error is latched).
            fd, created = create_file(dir_fd, here, name, os.O_WRONLY, existing=os.O_NONBLOCK)
            if created:
                created_files.append(name)
            opened[stream] = CaptureTarget(os.path.join(directory, name), fd, cap)
        for target in opened.values():
            if stat.S_ISREG(os.fstat(target.fd).st_mode):
                os.ftruncate(target.fd, 0)
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


def _quietly(action, path: str) -> None:
    try:
        action(path)
    except OSError:
        pass


class CaptureFile:
    """The pure-Python capped writer: counts every byte, writes and hashes the capped prefix.

    The first failed write latches ``write_error``; nothing more is written, counting goes on.
    """

    def __init__(self, target: CaptureTarget):
        self.target = target
        self.seen = 0
        self.written = 0
        self.write_error = False
        import hashlib  # only the pure-Python pump hashes here; start-up skips the import

        self._digest = hashlib.sha256()

    def write(self, data: memoryview) -> None:
        self.seen += len(data)
        room = self.target.cap - self.written
        if self.write_error or room <= 0:
            return
        pending = data[:room]
        while pending:
            try:
                count = os.write(self.target.fd, pending)
            except InterruptedError:
                continue
            except OSError:
                count = 0
            if count == 0:  # a write that takes nothing would never finish: an error, as in C
                self.write_error = True
                return
            self._digest.update(pending[:count])
            self.written += count
            pending = pending[count:]

    def report(self) -> CaptureReport:
        return CaptureReport(
            self.target.path, self.seen, self.written, self._digest.hexdigest(), self.write_error, self.target.cap
        )
