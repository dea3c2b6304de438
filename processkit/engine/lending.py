"""Lending the terminal to a run's child after its spawn, and taking the keyboard for a ``--pty``
run: when the runner becomes the foreground job (``fg``), again once continued after a stop,
and the job stop of a runner whose child the lent terminal stopped (engine/terminal.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .host import Host
    from .state import Launched, RunState


# How often a background runner looks whether it was brought to the foreground (``fg``).
LEND_POLL_SECONDS = 0.25


def lend_when_foreground(run: RunState, launched: Launched, first: bool = False) -> None:
    """A runner started as a background job does not lend its terminal (engine/terminal.py), and
    a child that reads it is stopped (SIGTTIN). ``fg`` then gives the runner's group the terminal
    without a signal (bash sends SIGCONT only to a stopped job), and the child stayed stopped
    for good: so the runner looks every ``LEND_POLL_SECONDS`` until it is the foreground job,
    then lends the terminal, which continues the child (``Foreground.lend``). A timer of the run's:
    its ending cancels it."""
    from .terminal import Foreground, HandoffError, in_background

    if first:
        if not in_background(run.context.fd(0)):
            return  # no controlling terminal another group holds: no foreground to wait for
    else:
        try:
            launched.foreground = Foreground.lend(launched.child.pid, run.context.fd(0), launched.lend_modes)
        except HandoffError:
            return  # the child stays a background job, as it was
    if launched.foreground is None and launched.child.returncode is None:
        run.timers["lend"] = run.loop.call_later(LEND_POLL_SECONDS, lambda: lend_when_foreground(run, launched))


def lend_again(run: RunState, launched: Launched) -> None:
    """The runner was stopped with its tree and is continued (``signals.suspend``). The shell
    took the terminal at the stop; at ``fg`` it gives it to the runner's group, not the child's,
    and the child, continued too, was stopped again by its next read (SIGTTIN), for good: the
    runner still counted the terminal as lent, so it never looked again. So the lend is
    forgotten (the terminal is the shell's or the runner's now, not the child's to take back)
    and made again: at once if the runner is the foreground job, when it becomes one (``fg``
    later, after ``bg``) otherwise."""
    if launched.foreground is None or launched.child.returncode is not None:
        return  # never lent (its poll goes on), or the child is gone
    if launched.foreground.held():
        return  # the child's group holds the terminal still (no shell took it): the lend stands
    launched.foreground.forget()
    launched.foreground = None
    lend_when_foreground(run, launched)


def stopped_in_front(host: Host, run: RunState, launched: Launched) -> None:
    """At a SIGCHLD: the child holding the lent terminal was stopped by it (Ctrl-Z, a read or
    write out of turn: engine/terminal.py), so the runner stops as a job with its tree, by the
    same signal sent to its whole process group (a wrapper in it, ``sh -c``, ``make``, is the
    shell's job: stopped alone, the runner left it waiting on it); once continued it lends the
    terminal again (``lend_again``, through ``signal_trees``). A ``kill -STOP`` from elsewhere
    (a supervisor, a throttler) is that process's to undo, a runner no shell can continue
    (``can_stop_as_job``) would undo it at once, and one that found the signal ignored at start
    (a wrapper's ``SIG_IGN``) keeps it so: the child is left alone then, as before."""
    from .signals import suspend
    from .terminal import JOB_STOPS, can_stop_as_job, stop_signal

    lent = launched.foreground
    if lent is None:
        return  # not lent (a background runner): a stop of the child is no job stop of its own
    signum = stop_signal(launched.child.pid)
    if signum in JOB_STOPS and not lent.ignores(signum) and can_stop_as_job():
        suspend(host.signal_trees, signum, group=True)


def take_keyboard(run: RunState, launched: Launched) -> None:
    """The caller's keys for a ``--pty`` child once the runner is its terminal's foreground job:
    at once, or, started in the background (``&``), when ``fg`` makes it one, looked at every
    ``LEND_POLL_SECONDS`` as a lend is (before, its keys never came, and a read waited for good).
    Its raw mode is taken back at each SIGCONT: ``Host.watch_continue`` (``runner``)."""
    from .pty import Keyboard
    from .terminal import in_background

    assert run.terminal is not None
    launched.keyboard = Keyboard.take(run.loop, run.terminal.endpoint, run.context.fd(0))
    if launched.keyboard is None and launched.child.returncode is None and in_background(run.context.fd(0)):
        run.timers["keys"] = run.loop.call_later(LEND_POLL_SECONDS, lambda: take_keyboard(run, launched))
