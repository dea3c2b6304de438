"""The child's controlling terminal: its own pty's, the runner's, or none.

A child that was given no terminal to read (null stdin, a ``--stdin-file``, a batch's or a
bench's command) still shared the runner's controlling terminal, in a background process group.
If it opened ``/dev/tty`` to ask for something (ssh's passphrase, sudo's or git's password), its
read stopped it with SIGTTIN, for good: nobody ever brings that group to the foreground, and the
run hung, silent, with no deadline to end it. Such a child now leaves the terminal before its
exec, so ``/dev/tty`` fails with ENXIO at once, as under cron or CI, and the program says so.
"""

from __future__ import annotations

import os

from ..spec import StdinMode

# What the child's controlling terminal is (the native request's ``controlling_tty``).
TTY_OWN = 1  # its own pty (--pty): a new session, the pty its controlling terminal
TTY_KEPT = 0  # the runner's, which it may be lent (its stdin inherited: a terminal to read)
TTY_NONE = -1  # none: it was given no terminal to read, so /dev/tty fails (ENXIO) at once,
# where a background group that opened it and read (a password prompt) was stopped for good
# (SIGTTIN), and the run hung with it (docs/io-modes.md, Terminals)


def child_tty(
    terminal: int | None,
    stdin: StdinMode,
    inherit: tuple[int, int, int] | None,
    given: tuple[int | None, int | None, int | None] | None,
) -> int:
    """The child's ``TTY_*`` (``spawn.begin``'s arguments): its own pty's where it has one; else
    decided on its stdin alone: a terminal there is one it may be lent to read. Any other stream
    given (the API's ``stdout=`` a file) gives it nothing to read, and a child that kept the
    terminal for that reason and opened ``/dev/tty`` hung (SIGTTIN); none: the open fails at once."""
    if terminal is not None:
        return TTY_OWN
    if given is not None and given[0] is not None:  # the API's own stdin for the child
        return TTY_KEPT if os.isatty(given[0]) else TTY_NONE
    if stdin is StdinMode.INHERIT:  # the caller's copy of its stdin (the service's), or the runner's
        return TTY_KEPT if os.isatty(inherit[0] if inherit is not None else 0) else TTY_NONE
    return TTY_NONE


def drop_terminal() -> None:
    """TIOCNOTTY by a group leader that leads no session: it leaves the terminal, sending no
    SIGHUP, and stays in the runner's session (a process-group run's sweep knows it by that).
    Only the Popen spawn's child runs it (the native child has its own, csrc/spawn_child.c)."""
    import fcntl
    import termios

    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # no controlling terminal: nothing to leave
    try:
        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except OSError:
        pass
    os.close(fd)
