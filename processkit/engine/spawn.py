"""Starting the root child: shell-free, byte-exact argv, joined to its container before exec.

Two paths with the same observable behaviour; ``PROCESSKIT_SPAWN`` picks one as
``PROCESSKIT_PUMP`` does for the pump. The native path (``pk_spawn`` in csrc/spawn.c) clones
the child straight into the run's cgroup v2 group and runs only C until execve: a process that
moves itself into a cgroup waits for an RCU grace period (about 10 ms), and a preexec_fn forces
a full fork that runs Python. The fallback is Popen with a preexec_fn, imported only when used.
Python code in a forked child is safe only in a process with one thread: a lock another thread
held at the fork (the allocator's) stays held in the child for ever. Popen's own keywords cannot
replace it (none joins a cgroup, arms the death signal, clears the signal mask or lowers the
open-file limit), so the runner keeps to one thread on that path: the native pump's hash thread,
its only other one, is not started then (``pump.hash_on_a_thread``).

Either way the child, in order: leads its own process group (with a terminal: its own
session, which makes it a group leader too); joins the groups its container names
(``Container.child_joins()``); gets SIGKILL when the runner dies; starts with an empty signal
mask and SIGPIPE/SIGXFSZ at their defaults; gets its stdio and no other fd (with a terminal:
the pty's slave on 0, 1 and 2, made its controlling terminal); gets the caller's soft
open-file limit back when the runner raised its own (processkit/fdlimit.py); changes to ``cwd``; and execs
the program found on the PATH of its own environment.
"""

from __future__ import annotations

import errno
import os

from .. import fdlimit, native
from ..containment import ChildJoins, Container, cgroupfs, prctl
from ..errors import Failure, Kind
from ..spec import StdinMode


# How long the native spawn waits for a child that has exec'd to exit before it returns (0: not
# at all). ``bench`` sets it for its own process (``benchmark/driver.py``): a command shorter
# than this runs with the CPU to itself, as a child of hyperfine's blocking ``wait4`` does,
# instead of beside the runner's work after the spawn. ``run`` and the API never wait.
LINGER_MS = [0]


class AttachError(Exception):
    """Joining the container failed inside the child (container_failed phase attach, 102)."""


class _Refused(Exception):
    """A step in the child failed: ``step`` is ``attach``, ``cwd`` or ``start``."""

    def __init__(self, step: str, reason: str):
        super().__init__(reason)
        self.step = step
        self.reason = reason


class Child:
    """The started root child. The runner owns its fds: the runner's ends of the child's stdin,
    stdout and stderr pipes (None where not piped) and a pidfd (None where the kernel gave none)."""

    def __init__(self, pid: int, pipes: list[int | None], pidfd: int | None = None):
        self.pid = pid
        self.stdin, self.stdout, self.stderr = pipes
        self.pidfd = pidfd
        self.returncode: int | None = None
        self.max_rss_bytes: int | None = None  # the root's ru_maxrss as wait4 reports it, once reaped
        # The native spawn's child's first moment, plus the time it spent joining cgroups by write
        # (the containment's waits, not the command's): where bench's timed interval starts.
        # None from the Popen fallback.
        self.command_from_ns: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal) once reaped, else None."""
        if self.returncode is None:
            self._reaped(*os.wait4(self.pid, os.WNOHANG))
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._reaped(*os.wait4(self.pid, 0))
        assert self.returncode is not None, "wait4 without WNOHANG returns the child"
        return self.returncode

    def _reaped(self, pid: int, status: int, usage) -> None:
        """``wait4``'s answer: ``wait4`` rather than ``waitpid`` for its rusage, whose
        ``ru_maxrss`` (KiB) is the largest resident set of the root and of every descendant
        reaped below it (what ``/usr/bin/time`` and hyperfine report): ``bench``'s
        ``memory_usage_byte``."""
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)
            self.max_rss_bytes = usage.ru_maxrss * 1024


class _PopenChild(Child):
    """The fallback's child, reaped here (``wait4``, for its rusage) and its Popen told so, so
    that its finalizer does not reap it again."""

    def __init__(self, popen, pipes: list[int | None]):
        super().__init__(popen.pid, pipes)
        self._popen = popen

    def poll(self) -> int | None:
        if self._popen.returncode is None:
            super().poll()
            self._popen.returncode = self.returncode  # reaped here, for its rusage: Popen must not wait again
        return self.returncode

    def wait(self) -> int:
        if self._popen.returncode is None:
            super().wait()
            self._popen.returncode = self.returncode
        return self.returncode  # type: ignore[return-value]


def select_backend() -> str:
    """``native`` or ``python``; raises a setup Failure when native is demanded but absent. The
    native spawn is taken by default only where it is the shared-memory child (x86-64), the one
    measured and tested on every CI run; a build for another architecture has the copy-on-write
    child, whose clone3 no CI run there has tried, so it spawns through Popen unless
    ``PROCESSKIT_SPAWN=native`` asks for that child."""
    chosen = native.select_backend("PROCESSKIT_SPAWN", "spawn")
    if chosen == "native" and os.environ.get("PROCESSKIT_SPAWN") != "native":
        if not native.module().lib.pk_spawn_shared_memory():
            return "python"
    return chosen


def spawn(
    argv,
    *,
    env,
    cwd,
    container: Container,
    stdin: StdinMode,
    pipe_output: bool,
    backend: str,
    terminal: int | None = None,
    output_fd: int | None = None,
    inherit: tuple[int, int, int] | None = None,
    given: tuple[int | None, int | None, int | None] | None = None,
    merged: bool = False,
) -> Child:
    """Start the child; raises a spawn Failure (101) or AttachError (102).

    ``terminal`` is the slave of the child's pty (``--pty``): its stdio and controlling
    terminal, in place of ``stdin`` and ``pipe_output``. Like every child end, it is closed here.
    ``inherit``: what the child gets as the 0, 1 and 2 it is not given a pipe, a file or the
    terminal for (the caller's, ``spec.RunContext.stdio``); None: this process's own.
    """
    problem = _unpassable(argv, env, cwd)
    if problem is not None:
        raise _failure("start", problem, argv, cwd, container)
    child_ends = [-1, -1, -1]  # become the child's 0, 1, 2; -1 leaves it the runner's own
    runner_ends: list[int | None] = [None, None, None]
    try:
        if terminal is not None:
            child_ends = [terminal] * 3
        elif stdin is StdinMode.NULL:
            child_ends[0] = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        elif stdin is StdinMode.FILE:
            child_ends[0], runner_ends[0] = os.pipe()
        if pipe_output and terminal is None:
            for index in (1, 2):
                runner_ends[index], child_ends[index] = os.pipe()
        elif output_fd is not None and terminal is None:
            child_ends[1] = os.dup(output_fd)  # non-inheritable, as every child end here
            child_ends[2] = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        if inherit is not None or given is not None or merged:  # a caller's own descriptors (the API)
            from .child_ends import wire

            wire(child_ends, runner_ends, inherit, given, merged, terminal is not None)
        start = _start_native if backend == "native" else _start_popen
        return start(argv, env, cwd, container.child_joins(), child_ends, runner_ends, terminal is not None)
    except (OSError, _Refused, UnicodeEncodeError) as exc:
        for fd in runner_ends:
            if fd is not None:
                os.close(fd)
        if isinstance(exc, UnicodeEncodeError):  # a lone surrogate (not an undecoded byte) has no bytes
            raise _failure("start", _no_bytes(exc, argv, cwd), argv, cwd, container) from None
        if isinstance(exc, _Refused):
            if exc.reason in _EXHAUSTED:  # the native child's own pipe or clone: the runner's limit
                raise Failure(Kind.SETUP, fdlimit.exhausted(f"to start {argv[0]!r}")) from None
            raise _failure(exc.step, exc.reason, argv, cwd, container) from None
        if exc.errno in (errno.EMFILE, errno.ENFILE) and exc.filename is None:  # the runner's, not the program's
            raise Failure(Kind.SETUP, fdlimit.exhausted(f"to start {argv[0]!r}")) from None
        # No pipe or no process for the child, or Popen's report of a failed chdir or exec.
        step = "cwd" if cwd is not None and exc.filename == cwd else "start"
        raise _failure(step, exc.strerror or str(exc), argv, cwd, container) from None
    finally:
        for fd in set(child_ends):
            if fd >= 0:
                os.close(fd)


_EXHAUSTED = (os.strerror(errno.EMFILE), os.strerror(errno.ENFILE))


def _unpassable(argv, env, cwd) -> str | None:
    """Why execve cannot be handed these strings: it takes NUL-terminated bytes, so a NUL
    would silently cut an argument (the native path) or fail deep in Popen."""
    if "\0" in "".join(argv):
        return "an argument holds a NUL byte"
    if cwd is not None and "\0" in cwd:
        return "the --cwd holds a NUL byte"
    if "\0" in "".join(env) or "\0" in "".join(env.values()):
        return "an environment entry holds a NUL byte"
    return None


def _no_bytes(exc: UnicodeEncodeError, argv, cwd) -> str:
    text = exc.object
    what = "an argument" if text in argv else "the --cwd" if text == cwd else "an environment entry"
    return f"{what} holds U+{ord(text[exc.start]):04X}, a lone surrogate, which has no bytes"


def _failure(step: str, reason: str, argv, cwd, container: Container) -> Exception:
    if step == "attach":
        return AttachError(f"cannot join the child to the {container.mechanism} container: {reason}")
    if step == "cwd":
        return Failure(Kind.SPAWN_ERROR, f"cannot use --cwd {cwd}: {reason}")
    return Failure(Kind.SPAWN_ERROR, f"could not start the program {argv[0]!r}: {reason}")


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
    candidates = [os.path.join(os.fsencode(entry), program) for entry in search.split(os.pathsep)]
    return [*dict.fromkeys(candidates[:-1]), candidates[-1]]


def _start_native(argv, env, cwd, joins: ChildJoins, child_ends: list[int], runner_ends, own_terminal: bool) -> Child:
    lib = native.module().lib
    result = native_spawn(argv, env, cwd, joins, child_ends, own_terminal)
    if result.stage != lib.PK_SPAWN_OK:
        step = {lib.PK_SPAWN_PGID: "attach", lib.PK_SPAWN_JOIN: "attach", lib.PK_SPAWN_CHDIR: "cwd"}
        raise _Refused(step.get(result.stage, "start"), os.strerror(result.error))
    child = Child(result.pid, runner_ends, result.pidfd if result.pidfd >= 0 else None)
    if result.start_ns:
        child.command_from_ns = result.start_ns + result.join_ns
    return child


def native_spawn(argv, env, cwd, joins: ChildJoins, child_ends: list[int], own_terminal: bool):
    """``pk_spawn`` with this request; its ``pk_spawn_result`` (pid, pidfd, stage, errno), which
    the tests of the C child's steps read directly."""
    built = native.module()
    ffi, lib = built.ffi, built.lib
    keep = []  # cdata the request points into: alive until pk_spawn returns
    args, paths = _command(ffi, argv, env)
    request = ffi.new("pk_spawn_request *")
    request.paths = paths.array
    request.path_count = paths.count
    request.argv = args.array
    envp = _environment(ffi, env)  # held here too: another thread may replace the kept one
    request.envp = envp.array
    request.cwd = ffi.NULL
    if cwd is not None:
        keep.append(ffi.new("char[]", os.fsencode(cwd)))
        request.cwd = keep[-1]
    request.stdio = child_ends
    request.controlling_tty = int(own_terminal)
    request.nofile_soft = fdlimit.child_soft_limit() or 0
    request.linger_ms = LINGER_MS[0]
    request.cgroup_fd = joins.cgroup_dir_fd
    request.cgroup_procs_fd = joins.cgroup_procs_fd
    keep.append(ffi.new("int[]", joins.procs_fds))
    request.join_fds = keep[-1]
    request.join_count = len(joins.procs_fds)
    result = ffi.new("pk_spawn_result *")
    lib.pk_spawn(request, result)
    return result


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
# (env, its keys in order, envp, each item's encoding): a bench session's runs differ in one
# variable (its iteration), so only what changed is encoded again.
_ENVIRONMENT: list[tuple[dict, list, _Strings, dict] | None] = [None]


def _command(ffi, argv, env) -> tuple[_Strings, _Strings]:
    """The argv and the paths to exec (``_exec_paths``), which follow only the argv and PATH."""
    key = (tuple(argv), env.get("PATH"))
    kept = _COMMAND[0]
    if kept is None or kept[0] != key:
        args = [os.fsencode(arg) for arg in argv]
        kept = _COMMAND[0] = (key, _Strings(ffi, args), _Strings(ffi, _exec_paths(args[0], env)))
    return kept[1], kept[2]


def _environment(ffi, env) -> _Strings:
    """The envp: ``KEY=VALUE`` in the mapping's order (equal mappings may differ in order)."""
    kept = _ENVIRONMENT[0]
    if kept is not None and env == kept[0] and list(env) == kept[1]:
        return kept[2]
    known = kept[3] if kept is not None else {}
    encoded = {}
    for item in env.items():
        entry = known.get(item)
        encoded[item] = entry if entry is not None else os.fsencode(item[0]) + b"=" + os.fsencode(item[1])
    entries = _Strings(ffi, list(encoded.values()))
    _ENVIRONMENT[0] = (dict(env), list(env), entries, encoded)
    return entries


def _start_popen(argv, env, cwd, joins: ChildJoins, child_ends: list[int], runner_ends, own_terminal: bool) -> Child:
    import subprocess  # only here: the native path spares the runner its import

    stdio = [fd if fd >= 0 else None for fd in child_ends]
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            env=env,
            cwd=cwd,
            close_fds=True,
            preexec_fn=_child_setup(joins, os.getpid(), own_terminal),
        )
    except subprocess.SubprocessError as exc:  # the preexec_fn raised: a join failed
        raise _Refused("attach", str(exc)) from None
    return _PopenChild(popen, runner_ends)


def _child_setup(joins: ChildJoins, runner_pid: int, own_terminal: bool):
    """The preexec_fn: the native child's steps that Popen does not do itself. Popen has put
    the stdio in place before it runs, so fd 0 is already the terminal to take."""
    import fcntl
    import signal
    import termios

    procs_fds = [fd for fd in (joins.cgroup_procs_fd, *joins.procs_fds) if fd >= 0]
    nofile = None
    caller_soft = fdlimit.child_soft_limit()
    if caller_soft is not None:  # the runner raised its own open-file limit (fdlimit.py)
        import resource  # here, not in the forked child

        nofile = (caller_soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1])

    def setup() -> None:
        if own_terminal:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        else:
            os.setpgid(0, 0)
        for fd in procs_fds:
            cgroupfs.join(fd)
        prctl.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != runner_pid:  # the runner died before the death signal was armed
            os._exit(1)
        # A mask inherited from the runner's caller would block the graceful stop's SIGTERM.
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

    return setup
