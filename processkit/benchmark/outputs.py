"""Where a command's runs write (``--output``), made once for the session rather than per run.

``pipe`` is hyperfine's: stdout through a pipe that is read and discarded, stderr on /dev/null
(hyperfine pipes stdout alone: "typically only stdout is performance-relevant"). The pipe is the
session's: its write end is handed to every run as the run's ``RunContext.output_fd`` (the
engine gives the child a copy as its stdout and /dev/null as its stderr), its read end is drained
on the host's loop while a run goes on, and emptied again after each run, so no run's output is
read during the next. A pipe of its own for each stream of each run cost the engine two pipes,
two pumps (their registration, their end-of-file reads and their removal) and their drain at
the run's end: about 60 us of CPU a run of ``true``, a twelfth of its cycle (bench/README.md).
The command sees what it saw before: its stdout is a pipe, read by ``bench`` while it runs.

``null`` is one descriptor of /dev/null for the session, a FILE is opened (and emptied) for
each run through the guard every file written goes through, as before. ``inherit`` (and
``--show-output``) keeps the engine's pipes and its echo. The untimed steps (setup, prepare,
conclude, cleanup) and the shell's calibration write as a ``pipe`` run does unless their output
is shown: discarded either way, and a ``--prepare`` before every run paid the same pipes.
"""

from __future__ import annotations

import os

from .. import safepath
from ..errors import Failure, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..grammar import Naming
    from ..loop import Loop

CHUNK = 1 << 16


class SessionOutputs:
    """The session's pipe and /dev/null, made at first use, on ``loop`` (the host's)."""

    def __init__(self, loop: Loop, named: Naming) -> None:
        self._loop = loop
        self._named = named
        self._pipe: tuple[int, int] | None = None  # (read end, write end)
        self._null: int | None = None

    def descriptor(self, where: str) -> tuple[int | None, bool]:
        """The descriptor a run's stdout is a copy of (None: the engine's own pipes or the
        caller's terminal), and whether it is this run's own (a FILE's), which the caller closes."""
        if where == "pipe":
            return self._pipe_end(), False
        if where == "null":
            if self._null is None:
                self._null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            return self._null, False
        if where == "inherit":
            return None, False
        return _file(where, self._named), True

    def _pipe_end(self) -> int:
        if self._pipe is None:
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(read_end, False)
            self._pipe = (read_end, write_end)
            self._loop.add_reader(read_end, self.drain)
        return self._pipe[1]

    def drain(self) -> None:
        """Whatever the pipe holds, read and dropped (on the loop, and after each run)."""
        if self._pipe is None:
            return
        try:
            while len(os.read(self._pipe[0], CHUNK)) == CHUNK:
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            self._loop.remove_reader(pipe[0])
            for fd in pipe:
                os.close(fd)
        null, self._null = self._null, None
        if null is not None:
            os.close(null)


def _file(output: str, named: Naming) -> int:
    """``--output FILE``: emptied for each run, as hyperfine does."""
    try:
        return safepath.open_for_writing(output)
    except OSError as exc:
        from .options import BY_DEST

        given = named.given(BY_DEST["output"], output)
        raise Failure(Kind.SETUP, f"cannot write {given}: {exc.strerror or exc}") from None
