"""Starting the root child: shell-free, byte-exact argv, joined to its container before exec.

Two paths with the same observable behaviour; ``PROCESSKIT_SPAWN`` picks one as
``PROCESSKIT_PUMP`` does for the pump. The native path (``pk_spawn_begin`` in csrc/spawn.c) clones
the child straight into the run's cgroup v2 group and runs only C until execve: a process that
moves itself into a cgroup waits for an RCU grace period (about 10 ms), and a preexec_fn forces
a full fork that runs Python. The fallback is Popen with a preexec_fn (``engine/spawn_popen.py``),
loaded only when used.
Python code in a forked child is safe only in a process with one thread: a lock another thread
held at the fork (the allocator's) stays held in the child for ever. Popen's own keywords cannot
replace it (none joins a cgroup, arms the death signal, clears the signal mask or lowers the
open-file limit), so the runner keeps to one thread on that path: the native pump's hash thread,
its only other one, is not started then (``pump.hash_on_a_thread``).

``begin`` does not wait for the native child's exec (``Starting``): the child shares the
runner's memory without holding it (csrc/spawn.c; a child whose groups hold a memory limit has
memory of its own instead, ``_own_memory``), and a host that may carry other runs reads
the exec's outcome once its report is readable (``launch.start``), carrying the others
meanwhile. Popen's spawn waits for the exec itself, as it always has; a failure is the same
Failure either way, whenever it is known.

Either way the child, in order: leads its own process group (with a terminal: its own
session, which makes it a group leader too); joins the groups its container names
(``Container.child_joins()``); gets SIGKILL when the runner dies; starts with an empty signal
mask and SIGPIPE/SIGXFSZ at their defaults; gets its stdio (with a terminal: the pty's slave on
0, 1 and 2, made its controlling terminal) and no other fd but the caller's (``passed``, as the
reference); gets the caller's soft open-file limit back when the runner raised its own
(processkit/fdlimit.py); changes to ``cwd`` (through ``cwd_fd``, the directory as judged); and
execs the program found on its own PATH.
"""

from __future__ import annotations

import errno
import os

from .. import envvars, fdlimit, native, signum
from ..containment import Container
from ..errors import Failure, Kind
from ..spawn_words import NAMESPACE_ENDED, AttachError, Asked, failure, no_bytes, unpassable
from ..spec import StdinMode
from .child import Child, Refused
from .child_terminal import child_tty
from .spawn_native import Pending


def select_backend() -> str:
    """``native`` or ``python``; raises a setup Failure when native is demanded but absent. The
    native spawn is taken by default only where it is the shared-memory child (x86-64, Linux 5.16
    on), the one measured on every CI run; a build for another architecture or an older kernel
    (csrc/spawn.c says why) has only the copy-on-write child, which there spawns every run (the
    shared-memory build takes it for a capped run alone), so it spawns through Popen unless
    ``PROCESSKIT_SPAWN=native`` asks for that child."""
    chosen = native.select_backend("PROCESSKIT_SPAWN", "spawn")
    if chosen == "native" and os.environ.get("PROCESSKIT_SPAWN") != "native":
        if not native.module().lib.pk_spawn_shared_memory():
            return "python"
    return chosen


def begin(
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
    linger_ms: int = 0,
    passed: tuple[int, ...],
    cwd_fd: int | None = None,
) -> Starting:
    """Start the child, without waiting for its exec where the spawn is native (``Starting``);
    raises a spawn Failure (101) or AttachError (102) for what fails before that.

    ``terminal`` is the slave of the child's pty (``--pty``): its stdio and controlling
    terminal, in place of ``stdin`` and ``pipe_output``. Like every child end, it is closed here.
    ``inherit``: what the child gets as the 0, 1 and 2 it is not given a pipe, a file or the
    terminal for (the caller's, ``context.RunContext.stdio``); None: this process's own.
    ``linger_ms``, ``passed``: the run's ``RunContext.linger_ms`` (``bench``'s: its exec reported,
    the native spawn waits that long at most for the child's exit) and ``passed_fds``. ``cwd_fd``:
    the directory ``cwd`` names as ``launch`` judged it, which the child changes to, not the name.
    """
    asked = Asked(argv, env, cwd, container.mechanism)
    problem = unpassable(asked)
    if problem is not None:
        raise failure("start", problem, 0 if argv[0] else errno.ENOENT, asked)
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
        joins = container.child_joins()
        tty = child_tty(terminal, stdin, inherit, given)
        if backend == "native":
            pending = Pending(argv, env, cwd, joins, child_ends, tty, linger_ms, _own_memory(container), passed, cwd_fd)
            if not pending.begun:  # no child: its clone (or its report pipe) failed
                _native_child(pending.result, runner_ends)
            return Starting(runner_ends, asked, pending=pending)
        from .spawn_popen import start_popen  # only here: a run on the native spawn never loads it

        child = start_popen(argv, env, (cwd, cwd_fd), joins, child_ends, runner_ends, tty, passed)
        return Starting(runner_ends, asked, started=child)
    except (OSError, Refused, UnicodeEncodeError) as exc:
        raise _refusal(exc, runner_ends, asked) from None
    finally:
        for fd in set(child_ends):  # the child has its own copies from the clone on
            if fd >= 0:
                os.close(fd)


def _own_memory(container: Container) -> bool:
    """Whether the native child must be the copy-on-write one, whose OOM kill ends it alone: a
    memory limit on a group that holds it and not the runner (``spawn_memory`` says why)."""
    controllers = container.controllers
    if controllers is not None and "memory" in controllers.capped:
        return True  # the run's own cap
    if controllers is not None and controllers.backend == "cgroup_v1" and envvars.get("PROCESSKIT_CGROUP_V1_ROOT"):
        return True  # v1 groups placed apart from the runner, under limits not looked into
    if container.mechanism != "cgroup_v2" or not envvars.get("PROCESSKIT_CGROUP_PARENT"):
        return False  # made in the runner's own group: every limit above it holds the runner too
    from .spawn_memory import limited_apart

    return limited_apart(container.path)  # type: ignore[attr-defined]


def _refusal(exc: Exception, runner_ends, asked: Asked) -> Exception:
    """The Failure (or AttachError) for what refused the spawn; the runner's ends closed."""
    for fd in runner_ends:
        if fd is not None:
            os.close(fd)
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate (not an undecoded byte) has no bytes
        return failure("start", no_bytes(exc, asked), 0, asked)
    if isinstance(exc, Refused):
        if exc.reason in _EXHAUSTED:  # the report pipe, its move above 2, or the clone: the runner's limit
            return Failure(Kind.SETUP, fdlimit.exhausted(f"to start {asked.argv[0]!r}"))
        return _failure(exc.step, exc.reason, exc.number, asked)
    assert isinstance(exc, OSError), "begin catches these three"
    if exc.errno in (errno.EMFILE, errno.ENFILE) and exc.filename is None:  # the runner's, not the program's
        return Failure(Kind.SETUP, fdlimit.exhausted(f"to start {asked.argv[0]!r}"))
    # No pipe or no process for the child, or Popen's report of a failed chdir or exec.
    step = "cwd" if asked.cwd is not None and exc.filename == asked.cwd else "start"
    return _failure(step, exc.strerror or str(exc), exc.errno or 0, asked)


def _failure(step: str, reason: str, number: int, asked: Asked) -> Exception:
    """``failure``, an ENOMEM named for what it is where the children's pid namespace has lost its init."""
    from ..containment import pidns  # only here: a failure path, not every run's import

    if number == errno.ENOMEM and pidns.children_namespace_ended():
        reason = NAMESPACE_ENDED
    return failure(step, reason, number, asked)


class Starting:
    """A child begun (``begin``): ``ready()`` once its exec's outcome is known (at once for
    Popen's child, whose spawn waits for it), then ``child()``: the started Child, or the
    spawn's failure raised. While a native one is not ready, its ``watch()`` says what to wait on
    before the next look, and a host's loop carries its other runs meanwhile. ``abandon()`` ends one whose child
    will never be asked for (its run closed from outside)."""

    __slots__ = ("_pending", "_started", "_runner_ends", "_asked")

    def __init__(self, runner_ends, asked: Asked, pending: Pending | None = None, started: Child | None = None):
        self._pending = pending
        self._started = started
        self._runner_ends = runner_ends
        self._asked = asked  # what a failure names

    @property
    def pid(self) -> int:
        """The child's pid, from its clone on."""
        if self._pending is not None:
            return self._pending.result.pid
        assert self._started is not None, "begin made a child or raised"
        return self._started.pid

    def watch(self) -> tuple[int, float] | None:
        """What a loop waits on before the next ``ready`` (``Pending.watch``): None once ready."""
        return self._pending.watch() if self._pending is not None else None

    def ready(self) -> bool:
        return self._pending is None or self._pending.ready()

    def until_signal(self, signal_fd: int) -> bool:
        """``ready``, waited for until the outcome or a signal (``Pending.until_signal``)."""
        return self._pending is None or self._pending.until_signal(signal_fd)

    def child(self) -> Child:
        pending = self._pending
        if pending is not None:
            self._pending = None
            try:
                self._started = _native_child(pending.wait(), self._runner_ends)
            except Refused as exc:
                raise _refusal(exc, self._runner_ends, self._asked) from None
        assert self._started is not None, "begin made a child or raised"
        return self._started

    def abandon(self) -> None:
        """The child killed and collected, the runner's ends closed, whatever its exec did: killed
        first (a child held in its execve would hold the host until its exec ended otherwise),
        then its process group too, which it made before its exec (the program may have forked
        before its run was told it started; no group is adopted yet)."""
        if self._pending is not None:
            self._pending.kill()
        try:
            child = self.child()
        except (Failure, AttachError):
            return  # it never ran: collected, its ends closed
        try:
            os.killpg(child.pid, signum.SIGKILL)  # unreaped: a group of this id is the child's own
        except OSError:
            pass  # killed before it made its group
        os.kill(child.pid, signum.SIGKILL)  # not yet collected: the pid is still its own
        child.wait()
        for fd in (child.stdin, child.stdout, child.stderr, child.pidfd):
            if fd is not None:
                os.close(fd)


_EXHAUSTED = (os.strerror(errno.EMFILE), os.strerror(errno.ENFILE))


def _native_child(result, runner_ends) -> Child:
    """The Child a finished ``pk_spawn_result`` reports, or its step's refusal raised."""
    lib = native.module().lib
    if result.stage != lib.PK_SPAWN_OK:
        step = {lib.PK_SPAWN_PGID: "attach", lib.PK_SPAWN_JOIN: "attach", lib.PK_SPAWN_CHDIR: "cwd"}
        raise Refused(step.get(result.stage, "start"), os.strerror(result.error), result.error)
    child = Child(result.pid, runner_ends, result.pidfd if result.pidfd >= 0 else None)
    if result.start_ns:
        child.command_from_ns = result.start_ns + result.join_ns
    return child
