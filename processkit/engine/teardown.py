"""After the ending is decided: stop the tree (softly first when the ending allows), drain the
output pipes, and release everything the run made.

Teardown waits (for the tree to empty, for the pipes to reach EOF) as a run's steps do: it
yields ``Wait`` values, so the carrier turns the loop for every run meanwhile.

Facts about draining: a pipe stays open while any process holds its write end, and a process
outside the container (an escapee) may hold it forever or keep writing; an echo consumer may
stop reading. So every wait here is bounded, and what overruns its bound loses only the live
echo, never the run.
"""

from __future__ import annotations

import os

from .. import signum
from ..diagnostics import warn
from ..events.types import CleanupFinished, CleanupStarted
from .echo import EchoSink
from .host import wait_until
from .members import live_members
from .state import Launched, RunState

MEMBER_POLL_SECONDS = 0.01
KILL_CONFIRM_SECONDS = 2.0
PUMP_DRAIN_SECONDS = 2.0  # after teardown: a pipe held open by an escapee must not hang the run
DRAIN_CEILING_SECONDS = 30.0  # ... nor an escapee that keeps writing to a slow but live consumer
ECHO_STALL_SECONDS = 1.0  # after the child is gone: a consumer this slow loses the live echo


def teardown(run: RunState, launched: Launched, graceful: bool):
    """End every member of the tree: SIGTERM and the grace first when ``graceful``, then the
    kill (a run's steps: ``yield from``)."""
    loop = run.loop
    container, child = launched.container, launched.child
    before = live_members(run)
    run.events.emit(CleanupStarted(members_before=len(before or ()), read_error=before is None))
    shutdown = (yield from _soft_stop(run, launched, len(before or ()))) if graceful else None
    kill_error = False
    try:
        container.kill_all()
    except OSError:
        kill_error = True
    confirm = KILL_CONFIRM_SECONDS
    yield from wait_until(lambda: live_members(run) == [], loop.clock() + confirm, MEMBER_POLL_SECONDS)
    yield from wait_until(lambda: child.returncode is not None, loop.clock() + confirm, MEMBER_POLL_SECONDS)
    run.reaper.reap()  # a killed member the runner adopted is dead, not remaining
    try:
        remaining = sorted(container.member_pids())
        read_error = False
    except OSError:
        remaining, read_error = [], True
    run.events.emit(
        CleanupFinished(
            remaining=len(remaining),
            remaining_pids=remaining,
            soft_terminate=None
            if shutdown is None
            else ("signalled" if shutdown["soft_signal"] == "sent" else "failed"),
            shutdown=shutdown,
            read_error=read_error,
            kill_error=kill_error,
        )
    )


def _soft_stop(run: RunState, launched: Launched, members_before: int):
    """SIGTERM to every member, then wait up to the grace for the tree to empty."""
    loop = run.loop
    container = launched.container
    started = loop.clock()
    try:
        container.signal_members(signum.SIGTERM)
        sent = True
    except OSError:
        sent = False
    grace = (run.spec.grace_ms or 0) / 1000
    drained = yield from wait_until(lambda: live_members(run) == [], started + grace, MEMBER_POLL_SECONDS)
    after = live_members(run)
    return {
        "soft_stop_scope": container.soft_stop_scope,
        "soft_signal": "sent" if sent else "failed",
        "members_before": members_before,
        "members_after": None if after is None else len(after),
        "drained_within_grace": drained,
        "escalated": not drained,
        "elapsed_ms": int((loop.clock() - started) * 1000),
    }


def drain_outputs(run: RunState, launched: Launched):
    """Read the pipes to EOF now that the tree is gone, then flush the echo backlog (a run's
    steps: ``yield from``).

    Bounded: a pipe held open by a process outside the container ends the drain once the
    runner has waited PUMP_DRAIN_SECONDS on the pipes, and an echo consumer that stops
    reading loses only the live echo. Time spent waiting for a slow but live consumer is not
    charged to the pipes (the bytes still in them would be lost), only to the overall
    DRAIN_CEILING_SECONDS.
    """
    loop = run.loop
    streams = launched.streams
    if launched.stdin_feed is not None:
        launched.stdin_feed.close()
    budget = PUMP_DRAIN_SECONDS
    ceiling = loop.clock() + DRAIN_CEILING_SECONDS
    while any(s.open for s in streams) and budget > 0 and loop.clock() < ceiling:
        for stream in streams:
            if stream.paused and stream.echo is not None and stream.echo.drain(ECHO_STALL_SECONDS):
                _abandon_echo(stream.name, stream.echo)
        started = loop.clock()
        yield from wait_until(lambda: not any(s.open and not s.paused for s in streams), started + budget, 0.05)
        budget -= loop.clock() - started
    for stream in streams:
        stream.close()
        if stream.echo is not None and stream.echo.drain(ECHO_STALL_SECONDS):
            _abandon_echo(stream.name, stream.echo)


def _abandon_echo(name: str, echo: EchoSink) -> None:
    warn(f"the consumer of the runner's {name} stopped reading; live echo abandoned")
    echo.abandon()


def release(run: RunState, launched: Launched | None) -> None:
    """Give back everything the run made, whatever step it reached: terminals, files, the
    publication, the container; the run directory goes last. The one place a run is released."""
    if launched is not None:
        if launched.keyboard is not None:
            launched.keyboard.restore()
        problem = launched.foreground.restore() if launched.foreground is not None else None
        if problem is not None:
            warn(f"could not give the terminal back to the runner's process group: {problem}")
        if launched.stdin_feed is not None:
            launched.stdin_feed.close()
        for stream in launched.streams:
            stream.close()
            if stream.echo is not None:
                stream.echo.close()
        run.reaper.forget(launched.child.pid)
    if run.terminal is not None:
        run.terminal.close()
    if run.stdin_source is not None:
        os.close(run.stdin_source)
    for target in run.targets.values():
        os.close(target.fd)
    if run.publication is not None:
        run.publication.close()
    if run.container is not None:
        run.container.release()
    if run.rundir is not None:
        run.rundir.close()  # last: it is the evidence for everything above
