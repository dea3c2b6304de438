"""``--pty``: the child's pseudo-terminal, its size, and the caller's keyboard relayed into it.

Facts about pseudo-terminals (Linux) that shape this module and its use in the runner:

- The runner holds the master; the child gets the slave as fds 0, 1 and 2. Once every fd of
  the slave is closed, a read of the master fails with ``EIO`` (not 0) after the output still
  buffered has been read: that is the end of output. The runner closes its own copy of the
  slave as soon as the child has started, or that end would never come.
- A read of the master returns at most about 4 KiB (the line discipline's buffer), however
  fast the child writes; waiting for the buffer to fill gains nothing.
- The slave's line discipline transforms on the way: ``ONLCR`` turns each ``\\n`` the child
  writes into ``\\r\\n``; ``ECHO`` copies the input written to the master back into the output;
  ``ICANON`` holds input until a line end, ``VEOF`` at the start of a line makes the child's
  read return 0 (after a partial line the first ``VEOF`` only hands that line over), and a
  canonical line longer than 4095 bytes loses its excess; ``ISIG`` turns ``VINTR`` (Ctrl-C)
  into SIGINT for the terminal's foreground process group. So relaying the caller's keys as
  raw bytes delivers Ctrl-C to the child exactly as a terminal does.
- A process gets a controlling terminal only as a session leader that has none: ``setsid``
  then ``ioctl(TIOCSCTTY)`` on the slave (spawn_popen.py and spawn_child.c do this in the child). A session leader
  also leads its process group (pgid = pid), which containment relies on. When it exits, the
  kernel sends SIGHUP to the terminal's foreground group; a process that ignores it keeps the
  slave open, and the runner's teardown ends it like any other member.
- ``TIOCSWINSZ`` sets the size; the kernel sends SIGWINCH to the terminal's foreground group
  when it changes. The caller's terminal does the same to the runner when the user resizes it.
- ``tcsetattr`` on a terminal from a background process group stops the caller with SIGTTOU,
  and a background read stops it with SIGTTIN: only a runner in the foreground of its
  terminal takes the keyboard. The caller's stdin description is shared with the caller's
  shell, so it is read through a private non-blocking description (``/proc/self/fd/0``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import termios
from typing import Callable

from ..loop import Loop

DEFAULT_SIZE = (80, 24)  # columns, rows
DEFAULT_TERM = "xterm-256color"
RELAY_CHUNK = 4096
_WINSIZE = "HHHH"  # struct winsize: rows, columns, then two unused pixel sizes


def with_default_term(env: dict[str, str]) -> dict[str, str]:
    """A child on a terminal needs ``TERM`` to know what it may emit; an existing one is kept."""
    return env if "TERM" in env else {**env, "TERM": DEFAULT_TERM}


def caller_size(fds: tuple[int, ...] = (0, 1, 2)) -> tuple[int, int] | None:
    """The size of the caller's terminal (on its stdin, stdout or stderr: ``fds``), if it has one."""
    for fd in fds:
        try:
            rows, columns, _, _ = struct.unpack(_WINSIZE, fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        except OSError:
            continue
        if rows and columns:
            return columns, rows
    return None


def _set_size(fd: int, size: tuple[int, int]) -> None:
    columns, rows = size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack(_WINSIZE, rows, columns, 0, 0))


class PseudoTerminal:
    """The child's terminal. ``take_slave()`` hands the slave to spawn, which closes it; the
    master stays here, non-blocking, and each user gets a dup of its own to close."""

    def __init__(self, size: tuple[int, int] | None, caller: tuple[int, ...] = (0, 1, 2)):
        self._caller = caller  # the caller's stdin, stdout and stderr (``RunContext``): its size
        self.master, self._slave = os.openpty()
        try:
            found = caller_size(self._caller) if size is None else None
            self.follows_caller = found is not None  # an explicit --pty-size is kept as given
            _set_size(self.master, size or found or DEFAULT_SIZE)
            os.set_blocking(self.master, False)
        except OSError:
            self.close()
            raise

    def take_slave(self) -> int:
        slave, self._slave = self._slave, -1
        return slave

    def endpoint(self) -> int:
        """A new fd on the master: the output stream's, the input feed's or the relay's."""
        return os.dup(self.master)

    def follow_caller(self) -> None:
        """On SIGWINCH: pass the caller's new size on (the kernel tells the child)."""
        size = caller_size(self._caller) if self.follows_caller else None
        if size is not None:
            try:
                _set_size(self.master, size)
            except OSError:
                pass  # the terminal is already gone

    def end_of_input(self, last_byte: bytes) -> bytes:
        """What ends the input after the bytes fed, ``last_byte`` being the last of them.

        The child's own settings decide: in canonical mode one ``VEOF`` at a line's start, two
        after a partial line (the first hands the line over); a raw child gets one, as a byte.
        """
        try:
            attributes = termios.tcgetattr(self.master)  # a master reports its slave's settings
        except termios.error:
            return b""
        lflag, chars = attributes[3], attributes[6]
        eof = chars[termios.VEOF]
        eof = eof if isinstance(eof, bytes) else bytes([eof])
        at_line_start = last_byte in (b"", b"\n", b"\r")
        return eof * 2 if lflag & termios.ICANON and not at_line_start else eof

    def close(self) -> None:
        for fd in (self.master, self._slave):
            if fd >= 0:
                os.close(fd)
        self.master = self._slave = -1


class Keyboard:
    """The caller's terminal as the child's keyboard: raw mode, every byte relayed to the pty.

    ``restore()`` puts the caller's mode back and is safe to call more than once; the runner
    calls it on every way out (its finally included).
    """

    def __init__(self, loop: Loop, saved: list, reader: int, target: int, stdin: int = 0):
        self._loop = loop
        self._stdin = stdin
        self._saved: list | None = saved
        self._reader = reader
        self._target = target
        self._pending = b""
        loop.add_reader(reader, self._on_key)

    @classmethod
    def take(cls, loop: Loop, target: Callable[[], int], stdin: int = 0) -> Keyboard | None:
        """Raw mode on the caller's stdin terminal (``stdin``) when the runner is its foreground
        job; None when there is no such terminal. ``target`` makes the fd the keys are written to."""
        from .terminal import foreground_group

        if foreground_group(stdin) != os.getpgrp():
            return None
        try:
            saved = termios.tcgetattr(stdin)
            reader = os.open(f"/proc/self/fd/{stdin}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        except (OSError, termios.error):
            return None
        import tty

        try:
            tty.setraw(stdin, termios.TCSANOW)  # keys typed ahead are kept and relayed
        except termios.error:
            os.close(reader)
            return None
        return cls(loop, saved, reader, target(), stdin)

    def raw_again(self) -> None:
        """Raw mode again once the runner, stopped with its tree, is continued as the foreground
        job: the shell put its own modes back at the stop (bash does), and ``fg`` gives no
        job its modes back, so the caller's keys were read a line at a time, echoed by the
        caller's terminal, and Ctrl-C cancelled the run instead of reaching the child. A runner
        continued in the background (``bg``) leaves the shell's terminal alone; the ``fg`` that
        follows continues a runner already running, and its SIGCONT calls this again
        (``Host.watch_continue``)."""
        try:
            if self._saved is None or os.tcgetpgrp(self._stdin) != os.getpgrp():
                return
            import tty

            tty.setraw(self._stdin, termios.TCSANOW)
        except (OSError, termios.error):
            pass  # the terminal is gone, or no longer the runner's: nothing to take

    def _on_key(self) -> None:
        try:
            keys = os.read(self._reader, RELAY_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            keys = b""
        if not keys:  # the caller's terminal hung up
            self._stop()
            return
        self._pending = keys
        self._loop.remove_reader(self._reader)
        self._loop.add_writer(self._target, self._on_room)

    def _on_room(self) -> None:
        """Write what was read before reading more: a child that stops reading holds the keys
        back in the caller's terminal, not in the runner's memory."""
        try:
            written = os.write(self._target, self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the child's terminal hung up: nobody is listening any more
            self._stop()
            return
        self._pending = self._pending[written:]
        if not self._pending:
            self._loop.remove_writer(self._target)
            self._loop.add_reader(self._reader, self._on_key)

    def _stop(self) -> None:
        self._loop.remove_reader(self._reader)
        self._loop.remove_writer(self._target)

    def restore(self) -> None:
        """Give the caller its terminal mode back; from the background too (SIGTTOU ignored)."""
        if self._saved is None:
            return
        self._stop()
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            termios.tcsetattr(self._stdin, termios.TCSANOW, self._saved)  # never waits on a stalled terminal
        except termios.error:
            pass  # the terminal is gone: nothing left to restore
        finally:
            signal.signal(signal.SIGTTOU, previous if previous is not None else signal.SIG_DFL)
        self._saved = None
        for fd in (self._reader, self._target):
            os.close(fd)
