"""The biased race of endings, with the timers that feed it (deadlines, idle checks, snapshots).

The race is biased, not first-come: callbacks only *record* that an ending is ready, and after
each turn of the loop the highest-priority recorded ending wins (docs/run.md §1.3). So a child that
exits in the same turn as its deadline is reported as its own exit, and a signal beats all.

A root's exit is the run's ending once its output pipes reach end of file (at once, most often:
the root's exit closes them), or EXIT_DRAIN_SECONDS after it where a descendant still holds one
(the carrier's own bound, ``RunContext.exit_drain_seconds``: a batch's jobs'): meanwhile the pipes are read (echo, capture, idle clock)
and the other endings race on. The echoes' stall clock starts at the exit too, so a reader that
takes nothing is given one bound after the exit in all, the wait here included (``teardown``); a
stop signal in that window ends the run and cuts the drain's echo short, as one after the teardown
began does. A root that exits once the ending is decided (in the teardown) opens no window.
"""

from __future__ import annotations

from time import perf_counter

from ..errors import os_error_words
from .endings import Ending, EndingKind
from .teardown import stall_clock
from .waits import wait_until
from .snapshot import emit_snapshot
from .state import Launched, RunState

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations
    from ..spec import RunSpec

PAID_BACK = 4  # an interval sample's cost is paid back this many times over before the next one
# How long a descendant that holds the run's stdout or stderr open past the root's exit is read
# before the root's exit ends the run (and the teardown kills it): the reference's, whose outcome
# is its ProcessKit ``wait()``, which waits for the output pumps' end of file under ProcessKit's
# pump-teardown bound ``PUMP_TEARDOWN`` (5 s in ProcessKit's source; docs/run.md §3).
EXIT_DRAIN_SECONDS = 5.0


def left_running(left: int | None, spec: RunSpec, options: tuple[str, str], unread: OSError | None = None) -> str:
    """The words for a child of ``spec``'s run that exited with ``left`` processes of its tree
    still running as the teardown began (``Outcome.left_behind``): the CLI's run warns them, the
    API's ``LeftRunning``. ``options``: the names of its pty's and its inherited stdio's (the
    CLI's ``--pty``, the API's ``pty=True``), under which no pipe is read: the child's exit ends
    such a run at once. ``left`` None: not counted, for ``unread`` (batch's ``leaked_unknown``),
    said to the API's caller, whom the teardown's own warning never reaches."""
    from ..text import plural

    if left is None:
        cause = "" if unread is None else f": {os_error_words(unread)}"
        return (
            "the run could not be checked for processes left running when the child exited "
            f"(its container's members could not be read{cause})"
        )

    unpiped = options[0] if spec.pty else options[1] if spec.inherit_stdio else None

    them, they = ("it", "it") if left == 1 else ("them", "they")
    ends = (
        f"a run ends when its child has exited and its output pipes are closed, or {EXIT_DRAIN_SECONDS:g}s after the exit"
        if unpiped is None
        else f"under {unpiped} a run ends when its child exits"
    )
    return (
        f"the child exited with {plural(left, 'process', 'processes')} of its tree still running when the "
        f"teardown began, which ends {them} at once ({ends}; what {they} would have written next is lost)"
    )


def race(run: RunState, launched: Launched):
    """Wait (a run's steps: ``yield from``) until an ending is recorded; the highest-priority
    one recorded wins."""
    spec, loop = run.spec, run.loop
    bound = run.context.exit_drain_seconds
    bound = EXIT_DRAIN_SECONDS if bound is None else bound
    drain_until = 0.0  # the root's exit's bound, on the loop's clock, once it exited

    def root_exited(ended_ns: int) -> None:
        nonlocal drain_until
        launched.ended_ns = ended_ns
        drain_until = loop.now + bound
        if spec.snapshot_interval_ms is not None and not run.pending:
            # The cadence's last sample, taken as the root is gone: exactly who outlived it (the
            # report marks those), where the previous sample also held members that ended first.
            emit_snapshot(run, "interval")
        for stream in launched.streams:  # the end of file the root's exit left, read now
            stream.hurry()
        if run.pending:  # the ending is decided (a teardown's SIGTERM let the root exit): no window,
            return  # and the echo's stall clock starts at the drain, after any grace
        launched.stall = stall_clock(launched, loop)  # one budget after the exit: the wait's and the drain's
        if held():  # a descendant holds a pipe: read on until its end of file, or the bound
            run.stop_signals = 0  # counted from the exit on: one in the window cuts the drain's echo
            exit_drained = lambda: run.request_ending(EndingKind.CHILD_EXIT)  # noqa: E731
            run.timers["exit_drain"] = loop.call_later(bound, exit_drained)
            launched.pipes_until = loop.clock() + bound  # the drain after the teardown waits no longer
        else:
            run.request_ending(EndingKind.CHILD_EXIT)

    # the child's pipes still open (a terminal's master is none: a --pty run ends at its exit)
    held = lambda: any(stream.open and not stream.pty for stream in launched.streams)  # noqa: E731
    drained = lambda: launched.ended_ns is not None and not held()  # noqa: E731
    # the end of file the exit left is on every pipe still open, only reads away: no writer holds
    # one, nor does a slow echo hold its reading up (``OutputStream.let_go``)
    left = lambda: all(s.let_go() and not s.paused for s in launched.streams if s.open and not s.pty)  # noqa: E731
    outranked = lambda: all(EndingKind.CHILD_EXIT.priority < kind.priority for kind in run.pending)  # noqa: E731
    # the exit has ended, outranks every ending recorded, and only reads stand between it and them
    tied = lambda: launched.ended_ns is not None and not drained() and outranked() and left()  # noqa: E731
    # routed from whichever step or callback collects the root: it wakes this run
    run.reaper.watch(
        launched.child,
        run.loop.waking(root_exited),
        # the native spawn waited for its exit (bench's runs): most often over by now. A stop
        # signal whose byte came during that wait is not read here: the exit found here wins,
        # and bench's driver takes the stop as this run's once it is carried (``driver``).
        look_first=run.context.linger_ms > 0 and run.spawn_backend == "native",
    )
    start = loop.clock()
    run.last_output = start
    if spec.timeout_ms is not None:
        overall = lambda: run.request_ending(EndingKind.OVERALL_TIMEOUT)  # noqa: E731
        run.timers["overall"] = loop.call_at(start + spec.timeout_ms / 1000, overall)
    if spec.idle_timeout_ms is not None:
        idle = spec.idle_timeout_ms / 1000
        run.timers["idle"] = loop.call_at(start + idle, lambda: _check_idle(run, idle))
    if spec.snapshot_interval_ms is not None:
        interval = spec.snapshot_interval_ms / 1000
        run.timers["snapshot"] = loop.call_at(start + interval, lambda: _interval_snapshot(run, interval))
    yield from wait_until(lambda: bool(run.pending) or drained())
    if tied():
        # an ending the exit outranks, recorded once the root is gone, where the exit left every
        # open pipe's end of file (a watched stream's thread hears of it on its next read and
        # wakes the loop; a long last drain reads it at the next readiness): the exit ranks first
        # in its turn (docs/run.md §1.3), so those reads are waited for, within the exit's bound;
        # a pipe a descendant holds, or a higher ending, ends the wait at once
        yield from wait_until(lambda: not tied(), drain_until)
        if tied():  # the bound passed, as the exit's timer says
            run.request_ending(EndingKind.CHILD_EXIT)
    if drained():  # the root's exit is decided once its pipes are done: it ranks as such
        run.request_ending(EndingKind.CHILD_EXIT)
    kind = min(run.pending, key=lambda kind: kind.priority)  # the first recorded among equals
    return Ending(kind, run.pending[kind])


def _check_idle(run: RunState, idle: float) -> None:
    due = run.last_output + idle
    if run.loop.now >= due:
        run.request_ending(EndingKind.IDLE_TIMEOUT)
    else:
        run.timers["idle"] = run.loop.call_at(due, lambda: _check_idle(run, idle))


def _interval_snapshot(run: RunState, interval: float) -> None:
    """One sample of the cadence, the next one due an ``interval`` after this turn began, and not
    before ``PAID_BACK`` times this one's cost has passed since it ended (on the loop's clock then,
    not this turn's ``now``, which may be older): a run's samples (a large tree at a short interval)
    take at most a fifth of the loop's time, never every turn of it, and every other run sharing the
    loop (the runner service's) goes on between two of them."""
    if run.pending:
        return  # the snapshot timer ranks last: an ending ready in this turn stops the cadence
    began = perf_counter()  # a duration only: the loop's own clock may be another (a test's)
    emit_snapshot(run, "interval")
    paid = run.loop.clock() + PAID_BACK * (perf_counter() - began)
    due = max(run.loop.now + interval, paid)
    run.timers["snapshot"] = run.loop.call_at(due, lambda: _interval_snapshot(run, interval))
