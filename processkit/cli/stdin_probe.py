"""The stdin first-byte probe (ADR 0203, docs/adr-0203-stdin-probe.md): a missing required
value may arrive on stdin.

An agent may launch the CLI with an inherited pipe that nobody ever writes or closes, so the
probe waits only ``FIRST_BYTE_WINDOW`` for the first non-empty chunk. A terminal, an empty EOF
or a silent pipe leave the value unset (the command's own validation then reports it). Once a
first chunk has arrived only EOF completes the input, so pauses never truncate a payload. The
bytes are decoded as UTF-8 after collection (characters split across chunks survive), a byte
order mark first skipped, and trimmed. It reads with ``os.read`` on the descriptor, so nothing past what it consumed is
buffered away from the caller.

What it holds is bounded (``PROBE_BYTES``; more is a usage error): the values it reads (an argv,
a run id) are small, and ``yes |`` or ``< /dev/zero`` never end, so reading them to EOF grew
without bound (a gigabyte in seconds) and never finished. A device or a regular file is waited
on with the window where it can be polled (``/dev/kmsg`` blocks with no end of file, tracefs's
``trace_pipe`` reads as a regular file and waits for data) and read at once where it cannot
(``/dev/zero``, ``/dev/null``, a disk's file: ``epoll`` refuses them, and their reads never wait).
"""

from __future__ import annotations

import os
import stat

from ..envvars import whole_number
from ..errors import usage
from ..loop import Loop

# ``PROCESSKIT_STDIN_WINDOW_MS`` (whole milliseconds) moves it: a test that the probe does not
# wait sets it far beyond a loaded machine's start-up, so a wait would show whatever the load.
FIRST_BYTE_WINDOW = whole_number("PROCESSKIT_STDIN_WINDOW_MS", 250) / 1000
CHUNK_SIZE = 64 * 1024
# Past any argv execve takes on a default stack (2 MiB for argv and environment together).
PROBE_BYTES = 4 << 20


def probe_stdin(field: str, fd: int = 0, window: float = FIRST_BYTE_WINDOW) -> str | None:
    """The trimmed text piped in for ``field``, or None when nothing arrives in time."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None  # no stdin at all
    if os.isatty(fd):
        return None
    # A file or device that ``epoll`` refuses never waits for long, and is read at once; one it
    # takes is waited on with the window, as a pipe is (a kernel file that reads as a regular one
    # but waits for data: ``inspect < trace_pipe`` waited for its first byte until a signal).
    waitless = stat.S_ISREG(mode) or stat.S_ISBLK(mode) or stat.S_ISCHR(mode)
    raw = _read_with_window(fd, field, window, polled_only=not waitless)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise usage(f"the {field} read from standard input is not valid UTF-8") from None
    # a byte order mark first (Notepad's UTF-8; RFC 8259 §8.1 lets a JSON parser ignore it) is
    # skipped: the argv was "no JSON array", the run id unknown
    return text.removeprefix("\ufeff").strip() or None


class _Held:
    """The chunks read so far, refused past ``PROBE_BYTES``."""

    def __init__(self, field: str):
        self.field = field
        self.chunks: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > PROBE_BYTES:
            raise usage(f"the {self.field} read from standard input is over {PROBE_BYTES >> 20} MiB")
        self.chunks.append(data)

    def joined(self) -> bytes | None:
        return b"".join(self.chunks) or None


def _read_to_eof(fd: int, field: str) -> bytes | None:
    held = _Held(field)
    while True:
        try:
            data = os.read(fd, CHUNK_SIZE)
        except OSError as exc:
            raise usage(f"cannot read the {field} from standard input: {exc.strerror}") from None
        if not data:
            return held.joined()
        held.add(data)


def _read_with_window(fd: int, field: str, window: float, polled_only: bool = True) -> bytes | None:
    """``polled_only`` False: a descriptor ``epoll`` refuses (a device without poll: /dev/zero)
    is read at once instead."""
    loop = Loop()
    held = _Held(field)
    done = False
    error: OSError | None = None

    def finish(failure: OSError | None = None) -> None:
        nonlocal done, error
        done = True
        error = failure

    def on_readable() -> None:
        try:
            data = os.read(fd, CHUNK_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            finish(exc)
            return
        if not data:
            finish()
            return
        held.add(data)
        deadline.cancel()  # after the first chunk only EOF completes the input

    deadline = loop.call_later(window, finish)
    try:
        try:
            loop.add_reader(fd, on_readable)
        except PermissionError:
            if polled_only:
                raise
            return _read_to_eof(fd, field)
        loop.run_until(lambda: done)
    finally:
        deadline.cancel()
        loop.close()
    if error is not None:
        raise usage(f"cannot read the {field} from standard input: {error.strerror}")
    return held.joined()
