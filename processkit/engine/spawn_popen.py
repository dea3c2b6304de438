"""The fallback spawn: the root child started by Popen with a preexec_fn (``engine/spawn.py``
says when, and what its child does before its exec). Apart from the native spawn's path, which
a plain run takes, so that such a run's start-up does not load or run this code."""

from __future__ import annotations

import os

from .. import fdlimit, rlimits
from ..containment import ChildJoins, cgroupfs, prctl
from .child import Child, Refused
from .child_terminal import TTY_NONE, TTY_OWN, drop_terminal


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


def start_popen(argv, env, cwd, joins: ChildJoins, child_ends: list[int], runner_ends, tty: int, passed) -> Child:
    """``cwd``: its name and the descriptor ``launch`` judged (or None). The child changes to
    the judged one (``fchdir`` in the preexec_fn, as the native child does), never to the name
    again, whether or not /proc is mounted; a name left unjudged (None) is Popen's own chdir. A
    step of the preexec_fn refused is said with its errno (``_StepReport``)."""
    import subprocess  # only here: the native path spares the runner its import

    named, judged = cwd
    stdio = [fd if fd >= 0 else None for fd in child_ends]
    runner = _own_pidfd()
    report = _StepReport()
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            env=env,
            cwd=named if judged is None else None,
            close_fds=True,
            pass_fds=passed,
            preexec_fn=_child_setup(joins, (os.getpid(), runner), tty, report, judged),
        )
    except subprocess.SubprocessError as exc:  # the preexec_fn raised: a join or the fchdir failed
        raise report.refusal(str(exc)) from None
    finally:
        report.close()
        if runner is not None:
            os.close(runner)
    return _PopenChild(popen, runner_ends)


class _StepReport:
    """Which step of the preexec_fn failed, and its errno: Popen says only "Exception occurred
    in preexec_fn", so the child writes ``step errno`` to a pipe of its own first (as the
    native child's report pipe, csrc/spawn_child.c)."""

    __slots__ = ("read_end", "write_end")

    def __init__(self):
        self.read_end, self.write_end = os.pipe()

    def failed(self, step: str, exc: OSError) -> None:
        """In the child: the step and its errno written, before the preexec_fn raises."""
        os.write(self.write_end, f"{step} {exc.errno or 0}".encode())

    def refusal(self, said: str) -> Refused:
        """The child's step refused (``attach`` or ``cwd``), from what it wrote."""
        os.close(self.write_end)
        self.write_end = -1
        step, _, number = os.read(self.read_end, 64).decode().partition(" ")
        if not number:  # no OS call refused: another exception in the preexec_fn
            return Refused("attach", said)
        return Refused(step, os.strerror(int(number)), int(number))

    def close(self) -> None:
        for fd in (self.read_end, self.write_end):
            if fd >= 0:
                os.close(fd)


def _own_pidfd() -> int | None:
    """A pidfd of the runner for its child to poll, or None where the kernel has none (5.3 on)."""
    try:
        return os.pidfd_open(os.getpid())
    except OSError:
        return None


def _child_setup(joins: ChildJoins, runner: tuple[int, int | None], tty: int, report: _StepReport, judged: int | None):
    """The preexec_fn: the native child's steps that Popen does not do itself. Popen has put
    the stdio in place before it runs, so fd 0 is already the terminal to take. ``runner`` is
    the runner's pid and a pidfd of it: a parent outside the child's pid namespace (``unshare
    --pid`` without ``--fork``) reads as 0 from ``getppid()``, alive or dead, so there the
    pidfd says whether it is gone (readable once it has ended), as the native child's report
    pipe does (csrc/spawn_child.c). ``judged``: the directory judged, above 2 (the CLI's runner
    keeps 0, 1 and 2 open, ``cli.main.ensure_standard_fds``; the API's service is started with
    them), so Popen's stdio, put in place before the preexec_fn, never takes its number."""
    import fcntl
    import select  # noqa: F401  (prctl.parent_gone's, imported here: none after the fork)
    import signal
    import termios

    runner_pid, runner_pidfd = runner

    procs_fds = [fd for fd in (joins.cgroup_procs_fd, *joins.procs_fds) if fd >= 0]
    limits = rlimits.for_child()  # the caller's, set after the open-file limit given back (rlimits.py)
    caller_soft = fdlimit.child_soft_limit()
    if caller_soft is not None:  # the runner raised its own open-file limit (fdlimit.py)
        import resource  # here, not in the forked child

        limits = ((resource.RLIMIT_NOFILE, caller_soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]), *limits)

    def setup() -> None:
        try:  # its own group or session, then its cgroups: the native spawn's attach step
            if tty == TTY_OWN:
                os.setsid()
            else:
                os.setpgid(0, 0)
            if tty == TTY_NONE:
                drop_terminal()
            for fd in procs_fds:
                cgroupfs.join(fd)
        except OSError as exc:
            report.failed("attach", exc)
            raise
        if tty == TTY_OWN:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        prctl.set_parent_death_signal(signal.SIGKILL)
        if prctl.parent_gone(runner_pid, runner_pidfd):  # the runner died before the death signal was armed
            os._exit(1)
        # A mask inherited from the runner's caller would block the graceful stop's SIGTERM.
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        if judged is not None:
            try:
                os.fchdir(judged)  # the directory judged, whatever its name holds now
            except OSError as exc:
                report.failed("cwd", exc)
                raise
        rlimits.set_own(limits)

    return setup
