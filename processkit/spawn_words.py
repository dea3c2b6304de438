"""What a program that could not start is called, in one place for both spawns (native and Popen)
and every output that repeats it: the reference's words.

The reference writes ProcessKit's error text into ``spawn_failed.message`` (its
``launch_failure_event``: ``err.to_string()``) and frames that text on stderr (its
``map_launch_error``: ``could not start the program: {err}``). ProcessKit names the program
(argv[0], never an argument) whether or not ``--argv-raw`` was given: ``run_started.command``
is redacted, the failure's cause is not. An ENOENT of a program given as a path is `` `P` not
found ``, whatever the file is; of a bare name, `` `P` not found on PATH `` unless the child's
PATH holds it as an executable file. Any other refusal is ``could not start `P`: <the OS's
words> (os error N)``. A bad ``--cwd`` keeps this runner's own words (docs/differences.md),
as do a string execve cannot be handed and a failed join to the container (``failure``).
"""

from __future__ import annotations

import errno
import os
import stat

from .errors import Failure, Kind
from .plain import Plain

FRAME = "could not start the program: "
# ``refused``'s ENOENT words after the program's name: given as a path, given as a bare name;
# and how such words end, ``named`` closing the name with a backtick (``cause``, a batch's ending).
NOT_FOUND, NOT_ON_PATH = " not found", " not found on PATH"
NOT_FOUND_ENDINGS = (f"`{NOT_FOUND}", f"`{NOT_ON_PATH}")
# Said on the line after, in human form only, when the program not found is a whole shell line
# given as one word (``run -- 'make test'``): batch's closing says its own form of it (batching.failures).
SHELL_LINE_HINT = (
    "hint: no shell splits the command: give its words apart (-- PROGRAM ARG...), or run one (-- sh -c 'LINE')"
)


class AttachError(Exception):
    """Joining the container failed inside the child (container_failed phase attach, 102)."""


class Asked(Plain):
    """What a spawn was asked for, as its failure names it: the argv (its program), the child's
    environment (whose PATH says whether a bare name is there), the ``--cwd`` and the
    container's mechanism."""

    __slots__ = ("argv", "env", "cwd", "mechanism")

    def __init__(self, argv, env, cwd: str | None, mechanism: str):
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.mechanism = mechanism


def failure(step: str, reason: str, number: int, asked: Asked) -> Exception:
    """What the spawn raises for ``step`` (``attach``, ``cwd`` or ``start``) refused with
    ``reason`` (its errno ``number``, 0 when no OS call refused it)."""
    if step == "attach":
        return AttachError(f"cannot join the child to the {asked.mechanism} container: {reason}")
    if step == "cwd":
        return Failure(Kind.SPAWN_ERROR, f"cannot use --cwd {asked.cwd or repr('')}: {reason}")
    return refused(asked.argv[0], reason, number, asked.env)


def unpassable(asked: Asked) -> str | None:
    """Why execve cannot be handed these strings: it takes NUL-terminated bytes, so a NUL
    would silently cut an argument (the native path) or fail deep in Popen. An empty program
    name is no file, execvp's ENOENT: a search of the PATH would try each directory itself
    (``/usr/bin/``) and report its EACCES, in both spawns."""
    argv, env, cwd = asked.argv, asked.env, asked.cwd
    if not argv[0]:
        return os.strerror(errno.ENOENT)
    if "\0" in "".join(argv):
        return "an argument holds a NUL byte"
    if cwd is not None and "\0" in cwd:
        return "the --cwd holds a NUL byte"
    if "\0" in "".join(env) or "\0" in "".join(env.values()):
        return "an environment entry holds a NUL byte"
    return None


def no_bytes(exc: UnicodeEncodeError, asked: Asked) -> str:
    """Which string of the spawn's held a lone surrogate (not an undecoded byte), which has no
    bytes to hand execve."""
    text = exc.object
    what = "an argument" if text in asked.argv else "the --cwd" if text == asked.cwd else "an environment entry"
    return f"{what} holds U+{ord(text[exc.start]):04X}, a lone surrogate, which has no bytes"


def shell_line_hint(program: str, said: str, hint: str = SHELL_LINE_HINT) -> str | None:
    """``hint`` (run's ways out, or the relaying command's own: bench's ``benchmark.words``) for a failure whose
    words (``said``, ending as ``refused``'s not-found words end) another command relays after
    its own (``bench --command``, ``run --detach``'s launcher), where ``refused``'s own hint does
    not reach: a whole shell line given as one word."""
    return hint if said.endswith(NOT_FOUND_ENDINGS) and shell_line(program) else None


class ProgramRefused(Failure):
    """A spawn failure that names the program: ``said`` is the stream's message, ``message``
    the stderr line's (``said`` framed)."""

    def __init__(self, said: str, hint: str | None = None):
        super().__init__(Kind.SPAWN_ERROR, FRAME + said, hint=hint)
        self.said = said


def named(program: str) -> str:
    """The program as these words name it: between backticks, its bytes read as UTF-8 with
    U+FFFD for what is not (ProcessKit's ``String``). A lone surrogate that is no undecoded byte
    has no bytes: it reads as ``?`` rather than raise in a spawn's error path."""
    try:
        raw = os.fsencode(program)
    except UnicodeEncodeError:
        raw = program.encode("utf-8", "replace")
    return "`" + raw.decode("utf-8", "replace") + "`"


def refused(program: str, reason: str, number: int, env) -> ProgramRefused:
    """The failure for ``program`` refused with ``reason`` (its errno ``number``; 0 when no OS
    call refused it). ENOENT is "not found", as ProcessKit tells it: for a program given as a
    path, whatever the path is (a dangling link, a script whose interpreter is missing, an ELF
    whose loader is); for a bare name, when no directory of the child's PATH holds it as an
    executable file (one there is refused: its missing interpreter)."""
    hint = SHELL_LINE_HINT if shell_line(program) else None
    if number == errno.ENOENT and not _bare(program):
        return ProgramRefused(named(program) + NOT_FOUND, hint)
    if number == errno.ENOENT and not _on_path(program, env.get("PATH")):
        return ProgramRefused(named(program) + NOT_ON_PATH, hint)
    os_error = f" (os error {number})" if number else ""
    return ProgramRefused(f"could not start {named(program)}: {reason}{os_error}")


# An ENOMEM from the clone where the pid namespace the runner's children are born into has lost
# its init (``containment.pidns``): said in its place, the errno kept.
NAMESPACE_ENDED = "the pid namespace new processes are born into has no init any more, its first process having ended"


def cause(said: str) -> tuple[int, str] | None:
    """The errno and the OS's words for it that ``refused``'s words name (the API raises them
    as ``subprocess`` does); None for words of another kind."""
    if said.startswith("`") and said.endswith(NOT_FOUND_ENDINGS):
        return errno.ENOENT, os.strerror(errno.ENOENT)
    head, cut, number = said.rpartition(" (os error ")
    if not cut or not number.endswith(")") or not number[:-1].isdigit():
        return None
    return int(number[:-1]), head.rpartition(": ")[2]


def shell_line(program: str) -> bool:
    """Whether a program not found reads as a whole shell line given as one word (``'make test'``,
    ``'pytest tests/unit'``): more than one word, the first no path. Run's hint and batch's
    closing (``batching.failures``) both ask this."""
    words = program.split()
    return len(words) > 1 and "/" not in words[0]


def _bare(program: str) -> bool:
    """Whether the program is a bare name, looked up on the PATH (ProcessKit's ``is_bare_name``:
    one plain path component; ``""``, ``.`` and ``..`` are paths)."""
    return "/" not in program and program not in ("", ".", "..")


def _on_path(program: str, path: str | None) -> bool:
    """Whether a directory of ``path`` (the child's PATH) holds ``program`` as a regular file
    with an execute bit, its links followed (ProcessKit's ``probe_dir``). No PATH, or an empty
    one, holds nothing, as in ProcessKit's ``find_in_path_in`` (though the spawn then searches
    ``os.defpath``: the reference names such a program not found too); a relative entry is
    looked in from the runner's directory, as there."""
    for directory in path.split(os.pathsep) if path else ():
        try:
            mode = os.stat(os.path.join(directory, program)).st_mode
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(mode) and mode & 0o111:
            return True
    return False
