"""The native spawn's request and its pending child (``pk_spawn_begin`` in csrc/spawn.c): the
strings execve is handed, made once and kept, and the spawn between its clone and the exec's
report.

Why a pending spawn: the shared-memory child uses the runner's memory and the runner does not
wait for its execve (csrc/spawn.c), so a host carrying several runs (the API's service, a batch)
goes on with the others while one child execs; the exec's outcome is read once its report is
readable (csrc/spawn_report.c: a pipe whose end of file is the exec, and a word the kernel
clears in the runner's memory as the child leaves it, or a copy-on-write child's PF_FORKNOEXEC
flag, which decides when a fork elsewhere in the process holds a copy of that end). Until then the child reads the request and every string it
points to, and writes the result: ``Pending`` holds all of them, and its pid is claimed from the
reaper's sweep of orphans (``claims``), which would otherwise collect a child that exits before
its run watches it.
"""

from __future__ import annotations

import os
import sys

from .. import fdlimit, native, rlimits, signum
from . import claims

ALL_ONES = (1 << 64) - 1  # an rlim_t's RLIM_INFINITY
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..containment import ChildJoins
    from .spawn_patched import Patched


class Pending:
    """``pk_spawn_begin``'s child until its exec is reported. ``result``: the ``pk_spawn_result``
    (the pid and pidfd from the clone on; the stage and errno once finished, ``stage``
    ``PK_SPAWN_CLONE`` at once when no child was made). ``begun``: whether a child was made.
    ``own_memory``: the copy-on-write child even where the shared-memory one is taken, for a
    child whose groups hold a memory limit: the kernel's OOM kill ends every process sharing its
    victim's memory, so a shared-memory child killed before its exec takes the runner with it
    (csrc/spawn.c). ``passed``: the caller's descriptors the child keeps (``RunContext.passed_fds``),
    given every time: a default of none would drop them unseen. ``cwd_fd``: ``spawn.begin``'s."""

    __slots__ = ("result", "begun", "_handle", "_held", "_pid")
    # PK_SPAWN_HELD_POLL_MS in seconds, read from the native module once, by the first spawn
    # (``watch`` answers every look of a host's loop at a pending spawn).
    _held_poll_seconds = 0.0

    def __init__(
        self,
        argv,
        env,
        cwd,
        joins: ChildJoins,
        child_ends: list[int],
        tty: int,
        linger_ms: int,
        own_memory: bool,
        passed: tuple[int, ...],
        cwd_fd: int | None = None,
    ):
        self._handle = None  # set before anything that can raise: __del__ reads it
        built = native.module()
        ffi, lib = built.ffi, built.lib
        if not Pending._held_poll_seconds:
            Pending._held_poll_seconds = lib.PK_SPAWN_HELD_POLL_MS / 1000
        held: list = []  # cdata the request points into, and the request: the child reads them until its exec
        args, paths = _command(ffi, argv, env)
        envp = _environment(ffi, env)  # held here: the next spawn may replace the kept one
        held += (args, paths, envp)
        request = ffi.new("pk_spawn_request *")
        held.append(request)
        request.paths = paths.array
        request.path_count = paths.count
        request.argv = args.array
        request.envp = envp.array
        request.cwd = ffi.NULL
        if cwd is not None:
            held.append(ffi.new("char[]", os.fsencode(cwd)))
            request.cwd = held[-1]
        request.cwd_fd = -1 if cwd_fd is None else cwd_fd  # the child's chdir, through the directory judged
        request.stdio = child_ends
        request.controlling_tty = int(tty)  # child_terminal.TTY_*
        request.nofile_soft = fdlimit.child_soft_limit() or 0
        limits = rlimits.for_child()
        if limits:  # the caller's (rlimits.py); -1, RLIM_INFINITY, as the kernel's all ones
            held.append(ffi.new("unsigned long long[]", [value & ALL_ONES for triple in limits for value in triple]))
            request.limits, request.limit_count = held[-1], len(limits)
        request.linger_ms = linger_ms
        request.own_memory = int(own_memory)
        request.cgroup_fd = joins.cgroup_dir_fd
        request.cgroup_procs_fd = joins.cgroup_procs_fd
        held.append(ffi.new("int[]", joins.procs_fds))
        request.join_fds = held[-1]
        request.join_count = len(joins.procs_fds)
        held.append(ffi.new("int[]", passed))
        request.pass_fds = held[-1]
        request.pass_count = len(passed)
        self.result = ffi.new("pk_spawn_result *")
        handle = lib.pk_spawn_begin(request, self.result)
        self._handle = handle if handle != ffi.NULL else None
        self._held = held if self._handle is not None else None
        self._pid = self.result.pid
        self.begun = self._handle is not None
        if self.begun:
            claims.claim(self._pid)

    def watch(self) -> tuple[int, float] | None:
        """What a loop waits on before the next ``ready`` look: the fd readable once the exec's
        outcome may be known (csrc/spawn_report.c), and how often to look anyway (a copy of the
        pipe's write end held elsewhere, a fork's during the clone, can hold that fd back). None
        once finished."""
        handle = self._handle
        if handle is None:
            return None
        return native.module().lib.pk_spawn_report_fd(handle), self._held_poll_seconds

    def ready(self) -> bool:
        """Whether the exec's outcome is in ``result`` (a look at the report, never a wait).
        The handle stays set until ``_finished`` frees it: ``pk_spawn_finish`` on a finished
        spawn returns 0 at once, so an exception landing between its return and that (a signal
        handler's) leaves the outcome to the next call, never lost nor finished twice."""
        return self._finish(0)

    def until_signal(self, signal_fd: int = -1) -> bool:
        """Wait for the exec's outcome, or until a signal interrupts the wait or ``signal_fd``
        (the host's signal wake-up pipe, which the caller reads before it waits again) is
        readable: whether the outcome is in ``result``. Finished as in ``ready``."""
        return self._finish(native.module().lib.PK_SPAWN_UNTIL_SIGNAL, signal_fd)

    def wait(self):
        """The ``pk_spawn_result`` once the exec's outcome is known (waited for here)."""
        self._finish(1)
        return self.result

    def _finish(self, wait: int, signal_fd: int = -1) -> bool:
        handle = self._handle
        if handle is None:
            return True
        if native.module().lib.pk_spawn_finish(handle, self.result, wait, signal_fd) != 0:
            return False
        self._finished()
        return True

    def kill(self) -> None:
        """SIGKILL to a child whose exec is not reported yet: its pid is claimed and unreaped, so
        still its own. Its exit ends the report (a child held in its execve by a lease or a hung
        mount is ended too), so a ``wait`` after it never waits long."""
        if self._handle is not None:
            os.kill(self._pid, signum.SIGKILL)

    def _finished(self) -> None:
        # Taken out before it is freed: an exception between the two leaks it, never frees it twice.
        handle, self._handle = self._handle, None
        native.module().lib.pk_spawn_free(handle)
        self._held = None
        claims.unclaim(self._pid)

    def __del__(self) -> None:
        # Dropped unfinished (a bug): the child may still read what is held, so wait for it.
        if self._handle is not None:
            self.wait()


def _exec_paths(program: bytes, env) -> list[bytes]:
    """Where to look for the program, as Popen does: a name with a slash as it is, else in each
    directory of the child's PATH (``os.defpath`` without one). What ``os.get_exec_path`` does
    for a str environment, without the ``warnings`` import it makes on every call.

    A directory the PATH names again is tried once (PATHs often repeat entries): its first try
    did not exec, and a second fails the same way. The last candidate stays last even when it
    repeats one, since its error is the one reported when every candidate is missing."""
    if os.path.dirname(program):
        return [program]
    search = env.get("PATH")
    if search is None:
        search = os.defpath
    entries = search.split(os.pathsep)
    encoded = _encoded(entries, lambda: [os.fsencode(entry) for entry in entries])
    # os.path.join's of each directory and a name without a slash, without a call each
    candidates = [entry + program if not entry or entry.endswith(b"/") else entry + b"/" + program for entry in encoded]
    return [*dict.fromkeys(candidates[:-1]), candidates[-1]]


def _encoded(texts: list[str], one_by_one) -> list[bytes]:
    """Each of ``texts`` (none holds a NUL: ``spawn_words.unpassable``) as ``os.fsencode`` gives
    it, encoded in one call and split, not a call each. Where one has no bytes, ``one_by_one()``
    encodes them as before, whose error names the string that has none (``spawn_words.no_bytes``);
    so it does where the split does not give one part a text (a NUL ``unpassable`` missed)."""
    if not texts:  # "".split gives one empty string: an empty envp is no string at all
        return []
    try:
        encoded = "\0".join(texts).encode(_FS_ENCODING, _FS_ERRORS).split(b"\0")
    except UnicodeEncodeError:
        return one_by_one()
    return encoded if len(encoded) == len(texts) else one_by_one()


_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class _Strings:
    """A NULL-ended ``char *[]`` (``array``) pointing into one NUL-separated copy of ``items``
    (one allocation for the environment's few dozen strings, not one each). Nothing writes to
    either once made, so spawns in several threads may pass the same one."""

    __slots__ = ("array", "count", "_blob")

    def __init__(self, ffi, items: list[bytes]):
        self._blob = ffi.from_buffer(b"\0".join(items) + b"\0")
        pointers, offset = [], 0
        for item in items:
            pointers.append(self._blob + offset)
            offset += len(item) + 1
        self.array = ffi.new("char *[]", pointers + [ffi.NULL])
        self.count = len(items)


# The last spawn's strings, kept for the next, which on a lodged host (a batch, a bench session)
# most often passes the same ones: each is encoded again only when what it is made from
# differs. One store each, so a thread sees the old entry or the new, never half of one.
_COMMAND: list[tuple[tuple, _Strings, _Strings] | None] = [None]  # ((argv, PATH), argv, paths)
# (env, its keys in order, its envp, the envp made whole that it was made from)
_ENVIRONMENT: list[tuple[dict, list, _Strings | Patched, _Whole] | None] = [None]


class _Whole:
    """An envp made whole (``strings``), its mapping's keys and values in order, and each
    ``KEY=VALUE``'s pointer into its blob. A bench session's runs differ from the first in one
    variable (its iteration): each one's envp is these pointers with that entry's own string put
    in (``engine/spawn_patched.py``), not every string joined and pointed at again (~20 us a
    spawn). The pointers are read out on the first patch: a one-spawn run never patches."""

    __slots__ = ("keys", "values", "strings", "pointers")

    def __init__(self, ffi, env) -> None:
        self.keys, self.values = list(env), list(env.values())
        pairs = env.items()
        each = lambda: [os.fsencode(key) + b"=" + os.fsencode(value) for key, value in pairs]  # noqa: E731
        # ``+``, not a format: a ``str`` subclass (an enum's member) is its string, not its name
        self.strings = _Strings(ffi, _encoded([key + "=" + value for key, value in pairs], each))
        self.pointers: list | None = None  # read out by the first ``patched``


def _command(ffi, argv, env) -> tuple[_Strings, _Strings]:
    """The argv and the paths to exec (``_exec_paths``), which follow only the argv and PATH."""
    key = (tuple(argv), env.get("PATH"))
    kept = _COMMAND[0]
    if kept is None or kept[0] != key:
        args = [os.fsencode(arg) for arg in argv]
        kept = _COMMAND[0] = (key, _Strings(ffi, args), _Strings(ffi, _exec_paths(args[0], env)))
    return kept[1], kept[2]


def _environment(ffi, env) -> _Strings | Patched:
    """The envp: ``KEY=VALUE`` in the mapping's order (equal mappings may differ in order)."""
    kept = _ENVIRONMENT[0]
    keys = list(env)
    if kept is not None and env == kept[0] and keys == kept[1]:
        return kept[2]
    whole = kept[3] if kept is not None and keys == kept[3].keys else None
    patched = None
    if whole is not None:  # a second spawn: a run spawns once, a session many times
        from .spawn_patched import patched as patch

        patched = patch(whole, ffi, env)
    envp: _Strings | Patched
    if whole is None or patched is None:
        whole = _Whole(ffi, env)
        envp = whole.strings
    else:
        envp = patched
    _ENVIRONMENT[0] = (dict(env), keys, envp, whole)
    return envp
