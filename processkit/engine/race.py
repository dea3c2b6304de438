"""The biased race of endings, and reaping the children that exit during it.

The race is biased, not first-come: callbacks only *record* that an ending is ready, and after
each turn of the loop the highest-priority recorded ending wins (docs/run.md §1.3). So a child that
exits in the same turn as its deadline is reported as its own exit, and a signal beats all.

Facts about reaping: the runner is a subreaper, so orphans of the tree are re-parented to it
and must be collected too. ``waitid(WNOWAIT)`` peeks at any exited child without collecting it,
so the root's status is left for its ``Child`` to read; every other pid is collected at once.
"""

from __future__ import annotations

import os
import time

from ..diagnostics import warn
from ..events.types import MembersSnapshot
from .endings import Ending, EndingKind
from .state import RunState


def race(run: RunState) -> Ending:
    """Turn the loop until an ending is recorded; the highest-priority one recorded wins."""
    spec, loop = run.spec, run.loop
    _watch_root(run)
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
    while not run.pending:
        loop.run_once()
    kind = min(run.pending, key=lambda kind: kind.priority)  # the first recorded among equals
    return Ending(kind, run.pending[kind])


def _watch_root(run: RunState) -> None:
    child = run.launched().child
    run.pidfd = child.pidfd  # from the clone itself on the native path
    if run.pidfd is None:
        try:
            run.pidfd = os.pidfd_open(child.pid)
        except (AttributeError, OSError):
            pass  # SIGCHLD alone announces the exit
    if run.pidfd is not None:
        run.loop.add_reader(run.pidfd, lambda: reap_children(run))
    reap_children(run)


def reap_children(run: RunState) -> None:
    """Collect every exited child: the root (through its Child, keeping its status) and any
    orphan adopted as subreaper. Peeking with WNOWAIT avoids stealing the root's status.
    Before spawn there is no root yet: a child the runner inherited waits for the race."""
    child = run.child
    if child is None:
        return
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None
        if info is None:
            break
        if info.si_pid == child.pid:
            run.returncode = child.wait()
            _forget_root(run)
        else:
            try:
                os.waitpid(info.si_pid, 0)
            except ChildProcessError:
                pass
    if run.returncode is None and child.poll() is not None:
        run.returncode = child.returncode
        _forget_root(run)


def _forget_root(run: RunState) -> None:
    run.ended_ns = time.monotonic_ns()
    if run.pidfd is not None:
        run.loop.remove_reader(run.pidfd)
        os.close(run.pidfd)
        run.pidfd = None
    if run.spec.snapshot_interval_ms is not None and not run.pending:
        # The cadence's last sample, taken as the root is gone: exactly who outlived it (the
        # report marks those), where the previous sample also held members that ended first.
        emit_snapshot(run, "interval")
    run.request_ending(EndingKind.CHILD_EXIT)


def _check_idle(run: RunState, idle: float) -> None:
    due = run.last_output + idle
    if run.loop.now >= due:
        run.request_ending(EndingKind.IDLE_TIMEOUT)
    else:
        run.timers["idle"] = run.loop.call_at(due, lambda: _check_idle(run, idle))


def _interval_snapshot(run: RunState, interval: float) -> None:
    if run.pending:
        return  # the snapshot timer ranks last: an ending ready in this turn stops the cadence
    emit_snapshot(run, "interval")
    run.timers["snapshot"] = run.loop.call_later(interval, lambda: _interval_snapshot(run, interval))


def emit_snapshot(run: RunState, reason: str) -> None:
    try:
        found, read_error = run.read_member_list(), False
    except OSError:
        found, read_error = [], True
    if read_error:
        warn("could not read the container's members")
    run.events.emit(MembersSnapshot(reason=reason, read_error=read_error, members=[m.as_event() for m in found]))


def live_members(run: RunState) -> list[int] | None:
    """Members that have not exited yet (zombies awaiting a reaper do not count)."""
    reap_children(run)
    try:
        return [m.pid for m in run.read_member_list() if not m.zombie]
    except OSError:
        return None
