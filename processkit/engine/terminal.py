"""The terminal's foreground, lent to the child's process group for the run and taken back.

The child always leads its own process group (containment needs it), and a background group
that reads its terminal is stopped by SIGTTIN. So when the child inherits a terminal as its
stdin, the runner makes the child's group the terminal's foreground group, as a shell does for
a job: keys like Ctrl-C then reach the child, not the runner.

Only a runner that is itself the foreground job lends the terminal: a runner started in the
background leaves its child in the background too (until ``fg``: lending's
``lend_when_foreground``), and a terminal that is not the runner's controlling terminal has no
foreground to lend.

While the terminal is lent the runner is a background process, so SIGTTOU stays ignored until
it is taken back: ``tcsetpgrp`` from the background, and the runner's own writes to a ``TOSTOP``
terminal, would otherwise stop the runner. The child was spawned before, so it does not
inherit that disposition.

The terminal's modes are kept as they were before the spawn (``read_modes``: a child quick to set
raw mode did so before the lend) and put back, as a shell does for a job, when
the child did not end by its own exit: a full-screen child that put the terminal in raw mode (no
echo, no line editing) and was killed (by a signal, a timeout, a cancel) never undid it, and the
caller would be left typing blind. A child that exited by itself keeps what it set (``stty``'s
whole point).

A shell may take the terminal back while it is lent: after the runner is stopped (``kill -TSTP``,
``kill -STOP``), and kept when the job is continued with ``bg``. The terminal is then the
shell's, not the runner's to give back: a runner in the background that made its own (soon
dead) group the foreground again left the shell's next read failing (EIO), and an interactive
shell exits on that. So ``restore`` gives the terminal back, and its modes, only while the child's
group or the runner's holds it. After a stop the runner ``forget``s the lend and lends again
once it is the foreground job (lending's ``lend_again``).

Ctrl-Z while the terminal is lent stops the child's group, not the runner, which the shell
waits on: the terminal stayed with a stopped group, every key (Ctrl-C too) went to it and the
shell never came back. So a child the terminal stopped while it holds it stops the runner too,
as a job (``stop_signal``, lending's ``stopped_in_front``): its whole process group, the job the
shell waits on, which holds a wrapper the runner runs under (``sh -c '...; ...'``, ``make``,
``npm run``) as well; the shell takes the terminal and says the job stopped, ``fg`` continues
the group, and the runner lends the terminal again and continues the child. Not a ``kill
-STOP`` from elsewhere, nor where no shell can continue the runner (``can_stop_as_job``), nor in the API's
service, which carries other runs in its caller's group: the child stops alone there.
"""

from __future__ import annotations

import os
import termios

from .. import signum as signals
from ..writeall import private_writer


# The stops a terminal sends its foreground group (Ctrl-Z, a read or write out of turn).
JOB_STOPS = (signals.SIGTSTP, signals.SIGTTIN, signals.SIGTTOU)


def stop_signal(pid: int) -> int | None:
    """The signal that stopped the child ``pid`` since the last look (its report is taken), or
    None: running, gone, or not this process's child."""
    try:
        info = os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG)
    except ChildProcessError:
        return None
    if info is None or info.si_code != os.CLD_STOPPED:
        return None
    return info.si_status


def foreground_group(fd: int) -> int | None:
    """The foreground group of the terminal on ``fd`` where it is the runner's controlling
    terminal; None where ``fd`` is no terminal, or another session's."""
    try:
        return os.tcgetpgrp(fd) if os.isatty(fd) else None
    except OSError:
        return None


def in_background(fd: int) -> bool:
    """Whether the terminal on ``fd`` is the runner's controlling terminal with another group
    in its foreground: a runner started in the background, which ``fg`` may bring forward."""
    holder = foreground_group(fd)
    return holder is not None and holder != os.getpgrp()


def can_stop_as_job() -> bool:
    """Whether the runner's process group can stop as a job: it has a member whose parent is in
    the same session but outside it, the shell that continues it. That job is the group, not the
    runner: one started by a wrapper in its group (``sh -c '...; ...'``, ``make``, ``npm run``) is
    stopped and continued with the wrapper, the shell's own child. Looked for up the runner's
    ancestors while they are in its group, the first one outside it deciding. A group whose
    member leads the session (``tmux new-session``, ``ssh -t``, ``script -c``) is orphaned: the
    kernel discards its SIGTSTP, and ``signals.suspend`` would continue its tree at once."""
    from ..containment.members import read_member

    group, pid = os.getpgrp(), os.getppid()
    try:
        while pid > 0:
            if os.getpgid(pid) != group:
                return os.getsid(pid) == os.getsid(0)
            member = read_member(pid)  # a wrapper in the group: on to its parent
            pid = (member.ppid or 0) if member is not None else 0
    except OSError:
        pass  # gone (the runner is orphaned): no shell to count on
    return False


# The screen modes a full-screen program sets and undoes as it exits, undone for it when it was
# killed first (with no ``--grace`` the hard kill follows SIGTERM at once): the cursor shown,
# normal cursor keys and keypad, no mouse reports (every click typed escapes into the shell),
# no bracketed paste, no focus reports, no UTF-8 mouse encoding. Each undo does nothing where
# its mode is off, so all are written whatever the program set; the alternate screen is left as
# it is (leaving one never entered moves the cursor on xterm, and the runner does not parse the
# child's output to know).
SCREEN_RESET = (
    b"\x1b[?25h\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?1004l\x1b[?1005l"
)


def reset_screen(fd: int, term: str | None) -> None:
    """``SCREEN_RESET`` to the terminal on ``fd`` where the runner is its foreground job, through
    a private non-blocking description: a stalled terminal (Ctrl-S) never holds the runner. Not
    to a terminal that says it has no such modes (``term``, the caller's ``TERM``, unset or
    ``dumb``): it would print them."""
    if term is None or term == "dumb":
        return
    try:
        if os.tcgetpgrp(fd) != os.getpgrp():
            return  # no terminal, not the runner's, or the shell's again (``bg``)
        writer = private_writer(fd)
    except OSError:
        return
    try:
        os.write(writer, SCREEN_RESET)
    except OSError:
        pass  # a stalled or gone terminal: nothing more to do for it
    finally:
        os.close(writer)


class HandoffError(Exception):
    """The terminal could not be given to the child's group (container_failed phase foreground)."""


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; the runner just may not signal it
    return True


def read_modes(fd: int) -> list | None:
    """The terminal's modes on ``fd`` (None where it has none), read before the spawn."""
    try:
        return termios.tcgetattr(fd)
    except termios.error:
        return None


class Foreground:
    def __init__(self, fd: int, original: int, pgid: int, modes: list | None):
        self._fd = fd
        self._original = original
        self._pgid = pgid  # the group it is lent to
        self._modes = modes
        self._sigttou = signals.signal(signals.SIGTTOU, signals.SIG_IGN)
        self._lent = True

    @classmethod
    def lend(cls, pgid: int, fd: int = 0, modes: list | None = None) -> Foreground | None:
        """Make ``pgid`` the foreground group of the terminal on ``fd``; ``modes`` are the ones
        to put back (``read_modes`` before the spawn), read now where none were.

        Returns None when there is nothing to lend; raises HandoffError when the hand-off
        fails while the child's group still exists (a child already gone keeps its result).
        """
        original = foreground_group(fd)
        if original is None or original != os.getpgrp():
            return None  # no terminal, not the runner's controlling terminal, or a background job
        lent = cls(fd, original, pgid, modes if modes is not None else read_modes(fd))
        try:
            os.tcsetpgrp(fd, pgid)
            # Before the hand-off the child was a background job: a read of the terminal in
            # that window stopped it with SIGTTIN. Resume it now that the terminal is its own.
            os.killpg(pgid, signals.SIGCONT)
        except OSError as exc:
            lent.restore()
            if not _group_exists(pgid):
                return None
            raise HandoffError(exc.strerror or str(exc)) from None
        return lent

    def restore(self, modes: bool = False) -> str | None:
        """Give the terminal back to the runner's group, and with ``modes`` its modes as they
        were before the spawn, unless the shell took it meanwhile; returns what failed, if
        something did."""
        if not self._lent:
            return None
        problem = None
        try:
            holder = os.tcgetpgrp(self._fd)
        except OSError:
            holder = self._pgid
        if holder not in (self._pgid, self._original):
            self.forget()  # the shell took it back (the runner was stopped, then continued by bg)
            return None
        try:
            os.tcsetpgrp(self._fd, self._original)
        except OSError as exc:
            problem = "could not give the terminal back to the runner's process group: " + (exc.strerror or str(exc))
        if problem is None and modes and self._modes is not None:
            try:  # TCSANOW: never waits on a stalled terminal
                termios.tcsetattr(self._fd, termios.TCSANOW, self._modes)
            except (OSError, termios.error) as exc:  # termios.error: (errno, text)
                problem = "could not put the terminal's modes back: " + (getattr(exc, "strerror", None) or exc.args[-1])
        self.forget()
        return problem

    def held(self) -> bool:
        """Whether the child's group holds the terminal still: a runner continued by no shell
        (``kill -CONT``) finds it so, and the lend goes on (lending's ``lend_again``)."""
        try:
            return os.tcgetpgrp(self._fd) == self._pgid
        except OSError:
            return False

    def ignores(self, signum: int) -> bool:
        """Whether the runner ignores the stop ``signum`` outside the lend: it found it ignored at
        start (a wrapper's ``SIG_IGN``, which it leaves as it is), SIGTTOU as it was before the
        lend, which ignores it for its own ``tcsetpgrp``."""
        found = self._sigttou if signum == signals.SIGTTOU else signals.getsignal(signum)
        return found == signals.SIG_IGN

    def forget(self) -> None:
        """Leave the terminal with whoever holds it now, and end the lend (SIGTTOU as it was)."""
        self._lent = False
        signals.signal(signals.SIGTTOU, self._sigttou if self._sigttou is not None else signals.SIG_DFL)
