"""What a program that could not start is called, in one place for both spawns (native and Popen)
and every output that repeats it: the reference's words.

The reference writes ProcessKit's error text into ``spawn_failed.message`` (its
``launch_failure_event``: ``err.to_string()``) and frames that text on stderr (its
``map_launch_error``: ``could not start the program: {err}``). ProcessKit names the program
(argv[0], never an argument) whether or not ``--argv-raw`` was given: ``run_started.command``
is redacted, the failure's cause is not. A program it cannot locate is `` `P` not found `` (``on
PATH`` after a search of the PATH it was started with); one located but refused is ``could not
start `P`: <the OS's words> (os error N)``. A bad ``--cwd`` keeps this runner's own words
(docs/differences.md).
"""

from __future__ import annotations

import errno
import os

from .errors import Failure, Kind

FRAME = "could not start the program: "


class ProgramRefused(Failure):
    """A spawn failure that names the program: ``said`` is the stream's message, ``message``
    the stderr line's (``said`` framed)."""

    def __init__(self, said: str):
        super().__init__(Kind.SPAWN_ERROR, FRAME + said)
        self.said = said


def named(program: str) -> str:
    """The program as these words name it: between backticks, its bytes read as UTF-8 with
    U+FFFD for what is not (ProcessKit's ``String``)."""
    return "`" + os.fsencode(program).decode("utf-8", "replace") + "`"


def refused(program: str, reason: str, number: int, env, cwd: str | None) -> ProgramRefused:
    """The failure for ``program`` refused with ``reason`` (its errno ``number``; 0 when no OS
    call refused it). ENOENT for a program found nowhere is "not found"; for one that is there
    (a script whose interpreter is missing) it is the OS's refusal, as the reference tells them."""
    if number == errno.ENOENT and not _located(program, env, cwd):
        searched = "/" not in program and env.get("PATH") == os.environ.get("PATH")
        return ProgramRefused(f"{named(program)} not found{' on PATH' if searched else ''}")
    os_error = f" (os error {number})" if number else ""
    return ProgramRefused(f"could not start {named(program)}: {reason}{os_error}")


def cause(said: str) -> tuple[int, str] | None:
    """The errno and the OS's words for it that ``refused``'s words name (the API raises them
    as ``subprocess`` does); None for words of another kind."""
    if said.startswith("`") and (said.endswith("` not found") or said.endswith("` not found on PATH")):
        return errno.ENOENT, os.strerror(errno.ENOENT)
    head, cut, number = said.rpartition(" (os error ")
    if not cut or not number.endswith(")") or not number[:-1].isdigit():
        return None
    return int(number[:-1]), head.rpartition(": ")[2]


def _located(program: str, env, cwd: str | None) -> bool:
    """Whether the file the program names exists: by its path (from the child's cwd), or on the
    PATH of the child's environment (``os.defpath`` without one, as the spawn searches)."""
    if not program:
        return False
    if "/" in program:
        return os.path.lexists(os.path.join(cwd or "", program))
    return any(os.path.lexists(os.path.join(cwd or "", d or ".", program)) for d in os.get_exec_path(env))
