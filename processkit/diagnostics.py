"""The runner's own lines on stderr and stdout: printing them can never fail a run.

A caller that closed or broke the stream loses the text, never the exit code. A line waits for
its reader as a blocking write would (a terminal paused by ^S, a reader slow to start), until the
runner knows that reader stalled (a terminal's: but for the lines the reference writes too, the
error line and bench's printout, ``shared``, which wait for ^Q): the live echo into the same file
was given up after
``ECHO_STALL_SECONDS`` without a byte taken, or a bounded write of its own there was (a batch's
lines after a stop). From then on a line gets one write that does not
wait (``writeall.write_own``): a run whose stderr is a pipe nobody reads, filled by the child's
echo, so still ends with the run's exit code, its tail one bound later. A reader given up once
and read again since, or one whose echo a stop signal cut, gets writes that wait one bound at
most. Under
``--error-format json`` stderr belongs to the one-line error envelope: warnings and notes are
not written there at all (docs/differences.md), so a machine reader never meets prose.

A line of ours starts a line of its own: where the live echo of a child's output into the same
file as our stderr left an unterminated last line (``processkit/engine/echo.py`` says so through
``echoed``), a newline goes first, so the envelope is never glued onto the child's last bytes.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_routed: Callable[[str], None] | None = None
_mid_line = False  # the echo's last byte into our stderr's file was not a newline


def echoed(last_byte: int) -> None:
    """The live echo just wrote ``last_byte`` last into the file our stderr writes to."""
    global _mid_line
    _mid_line = last_byte != 10


def route(to: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """While set, what is said on ``sys.stderr`` goes to ``to`` instead (None: straight again):
    a batch's loop turns (``cli/batch_output.py``), and a warning written straight to stderr
    would wait in the write for a stalled reader, holding the loop, and come out ahead of the
    job lines queued before it. Returns the route it replaced, for a caller to put back."""
    global _routed
    before, _routed = _routed, to
    return before


def say(stream, text: str, shared: bool = False) -> bool:
    """Write ``text`` as the module's docstring says; a failed write, or what a stalled reader does
    not take at once, is dropped; whether it all went (or was routed); ``shared``: a line the
    reference writes too (``writeall.write_own``). On stderr, a newline first where the echo left a line open
    (``echoed``, told by ``engine/echo.py`` and ``engine/pump.py``'s native drains). Every line of
    the runner's own on its stdout and stderr goes through here (tests/test_own_writes.py)."""
    global _mid_line
    if stream is sys.stderr:
        if _mid_line:
            _mid_line = False
            text = "\n" + text
        if _routed is not None:
            _routed(text)
            return True
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation: a stream with no descriptor
        fd = -1
    try:
        if fd < 0:
            stream.write(text)
            stream.flush()
            return True
        from .writeall import write_own

        stream.flush()  # nothing of ours waits in it: every line comes here
        data = text.encode(stream.encoding or "utf-8", stream.errors or "strict")
        return write_own(fd, data, shared) == len(data)
    except OSError:
        return False


_envelope_only = False


def envelope_only() -> None:
    """``--error-format json``: from now on, nothing but the failure envelope goes to stderr."""
    global _envelope_only
    _envelope_only = True


def enveloped() -> bool:
    """Whether stderr holds the failure envelope alone (``envelope_only``): what writes to it
    beside ours (Dask's log, ``batching/dask_client.py``) is kept off it too."""
    return _envelope_only


def note(line: str, beside_envelope: bool = False) -> bool:
    """One line of ours on stderr that is not the failure (a note, a warning, a notice); whether
    it was written whole (not under ``--error-format json``, nor to a stderr given up).
    ``beside_envelope``: written under ``--error-format json`` too, as the reference writes every
    warning (docs/differences.md, its row on warnings): a loss that leaves no other word (``engine/runner.py``'s run without
    its stream), said at its setup, so an envelope still comes after it, the last line."""
    return (beside_envelope or not _envelope_only) and say(sys.stderr, line + "\n")


def warn(message: str, beside_envelope: bool = False) -> bool:
    return note(shown(f"warning: {message}"), beside_envelope)


_fault_dropped = False  # ``fault_dropped`` said its line


def fault_dropped(exc: Exception) -> None:
    """A fault of a run's callback that came once the run was ending as the runner's own failure
    already (``RunLoop.waking``: only its first is thrown into the run): said in one warning, the
    process's first, never one a fault (a callback that keeps raising would say it every turn)."""
    global _fault_dropped
    if not _fault_dropped:
        _fault_dropped = True
        warn(f"a later fault of a run ending already was not reported: {type(exc).__name__}: {exc}")


def warn_once(said: set[tuple] | None, message: str, beside_envelope: bool = False) -> None:
    """``warn``, unless ``said`` (a host's, ``Host.said``; None: none kept) holds it already: a
    run's stream or registry that fails fails alike for every run of the host (a full disk under
    ``bench --jsonl-dir``: two lines a run), and one line says it."""
    if said is not None:
        if ("warning", message) in said:
            return
        said.add(("warning", message))
    warn(message, beside_envelope)


def shown(message: str) -> str:
    """The program's line for ``message``, its terminal controls made visible. ``text`` is imported
    here, not by the caller: a run that says nothing loads none, and a run that fails to start
    (its line said by ``cli``) counts it as its work's, kept out of the plain runs' bundle."""
    from .text import escape_unsafe

    return f"processkit-cli: {escape_unsafe(message)}"
