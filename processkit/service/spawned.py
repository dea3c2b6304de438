"""A process the runner service starts by exec for one call that must own a process (a batch,
a benchmark), and what that process does first. Both sides of the start, in one place.

Facts that shape it:
- It is started by exec, as the service itself is: a fork of the service would carry its live
  runs, its reaper's table of roots, its C hash threads and objects whose finalisers close
  descriptors into the new process.
- Its request reaches it pickled in a memfd, written whole before the exec, so no pipe write
  holds up the service's loop. It talks to its caller over a connection of its own (passed
  through the service), and may be handed more of the caller's descriptors beside it.
- The caller's soft open-file limit comes back before it begins (the service raised its own),
  so the runs it starts get the caller's, as ``run``'s child does; so do the caller's other
  resource limits at the call (``rlimits``, sent with its environment), which this process
  gives every child it starts and never takes itself: a CPU or file-size cap meant for the jobs
  would end or cut the batch's own work (its records, its files), not theirs.
- Its parent-death signal (SIGTERM, a stop signal: its runs still release) is armed first
  thing, and its parent checked after, so a service that died before is not missed.
- It carries one caller's work and no other, so it takes that caller's place whole
  (``take_place``): its working directory, environment and umask (``api.caller_env.CallerEnv``),
  so its files and its runs' children are as under ``processkit-cli`` started by the caller then.
- It is its runs' parent: the signals a run may send "its parent" that would end it are dropped
  as the service drops them (``stray_signals.absorb``), SIGUSR1 too (the service's own
  parent-death signal, free here); the stop signals keep their handling (the batch engine's,
  the benchmark's).
"""

from __future__ import annotations

import os
import pickle
import socket
import sys

from .. import fdlimit, mountinfo, rlimits
from ..api import wire
from ..writeall import write_all
from . import stray_signals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..api.caller_env import CallerEnv
    from ..loop import Loop


def start(module: str, connection: int, request: object, fds: list[int] | tuple[int, ...] = ()) -> int:
    """Start ``processkit.service.<module>``'s ``main`` for ``request`` on ``connection``, with
    ``fds`` (the caller's, passed on) beside it; its pid. Raises OSError when it cannot be
    started (the caller is then told by ``refuse``)."""
    payload = os.memfd_create(f"processkit-{module}", os.MFD_CLOEXEC)
    try:
        write_all(payload, pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        os.lseek(payload, 0, os.SEEK_SET)  # read from its start
        argv = [
            sys.executable,
            "-c",
            f"from processkit.service.{module} import main; main()",
            str(os.getpid()),
            str(fdlimit.child_soft_limit() or 0),
            str(payload),
            str(connection),
            *map(str, fds),
        ]
        passed = (connection, payload, *fds)
        for fd in passed:
            os.set_inheritable(fd, True)
        try:  # with no signal blocked, whatever this service blocks (``stray_signals.FAULTS``)
            return os.posix_spawn(sys.executable, argv, os.environ, setsigmask=())
        finally:
            for fd in (connection, *fds):
                os.set_inheritable(fd, False)
    finally:
        os.close(payload)


def launch(module: str, request: object, fds: list[int]) -> tuple[int, int] | None:
    """The service's side: ``module``'s process started for a call (``start``), by exec as the
    service was (never a fork of the busy service: its runs, its table of roots, its
    finalisers), its connection ``fds[0]`` and the caller's descriptors after it; its pid and a
    pidfd of it. None when it was not started: no connection came, or it could not start (out of
    descriptors, say), which its caller is told on its connection (``refuse``) while the
    service and its runs go on. ``fds`` are closed here either way (the process has its copies).
    Each start counts as another's beside the service's runs (``escapees.begun``)."""
    from .escapees import begun

    try:
        if not fds:
            return None
        try:
            begun()  # a run live meanwhile cannot tell its orphans from this process's
            pid = start(module, fds[0], request, fds[1:])
            return pid, os.pidfd_open(pid)
        except OSError as exc:
            refuse(fds[0], f"the {module}'s", exc)
            return None
    finally:
        wire.close_all(fds)


def watched(module: str, request: object, fds: list[int], started: dict[int, int], loop: Loop) -> None:
    """The service's side: ``module``'s process started (``launch``; nothing when no ``fds``),
    in ``started`` (pid -> its pidfd) until its pidfd, watched on ``loop`` (the service's idle
    wait's view: a fault in its watch is the service's connection's, never a run's), says it
    ended; then collected."""
    launched = launch(module, request, fds)
    if launched is not None:
        pid, pidfd = launched
        started[pid] = pidfd
        loop.add_reader(pidfd, lambda: _collect(pid, started, loop))


def _collect(pid: int, started: dict[int, int], loop: Loop) -> None:
    """``watched``'s process ended: collected, unless the host's reaper did (a subreaper
    collects every exited child)."""
    pidfd = started.pop(pid)
    loop.remove_reader(pidfd)
    os.close(pidfd)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        return
    from ..containment.accounting import ChildrenUsage

    ChildrenUsage.reaped(None)  # its figures, its jobs' included, are no run's of this host


def refuse(connection: int, what: str, problem: OSError) -> None:
    """Tell the caller its process could not be started (one frame, best effort)."""
    message = f"cannot start {what} process: {problem.strerror or problem}"
    try:
        sock = socket.socket(fileno=os.dup(connection))
    except OSError:
        return
    try:
        sock.setblocking(True)
        wire.send(sock, ("failure", 0, "setup", message, 111))
    except OSError:
        pass
    finally:
        sock.close()


def begin() -> tuple[Any, int, list[int]] | None:
    """In the started process: its request, its connection and the descriptors passed beside
    it; None when the service that started it is already gone."""
    from ..containment import prctl

    parent, caller_soft, payload, connection, *fds = (int(arg) for arg in sys.argv[1:])
    prctl.set_parent_death_signal(15)  # SIGTERM: a stop signal, so its runs still release
    if os.getppid() != parent:
        return None
    if parent == 1:  # the service is its pid namespace's init: its caller is outside
        mountinfo.caller_is_outside()
    stray_signals.absorb(also=("SIGUSR1",))
    if caller_soft:  # the service raised its open-file limit: the caller's back, so this process
        import resource  # raises it again and gives its runs the caller's (``fdlimit``)

        resource.setrlimit(resource.RLIMIT_NOFILE, (caller_soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    rlimits.note_own()  # what its children inherit, the caller's soft open-file limit among it
    with os.fdopen(payload, "rb") as handle:
        request = pickle.load(handle)
    return request, connection, fds


def take_place(cwd: str, caller: CallerEnv) -> None:
    """This process takes its caller's place at the call: its working directory, environment
    and umask (``caller``, whole: checked so by ``inbound``), and its children the caller's
    resource limits that differ from this process's."""
    env, mask = caller.env, caller.umask
    assert env is not None and mask is not None, "a batch's and a benchmark's are checked whole"
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.umask(mask)
    rlimits.for_every_child(rlimits.differing(caller.limits))


def reply(sock: socket.socket, message: tuple) -> None:
    """The process's one frame to its caller, then its connection closed (a caller gone hears
    nothing)."""
    try:
        sock.setblocking(True)
        wire.send(sock, message)
    except OSError:
        pass  # the caller is gone
    sock.close()
