"""The teardown's decisions about a run's tree, made once for every carrier: what is read before
the figures, what a graceful ending sends first, when the tree counts as gone already (nothing
to kill nor read again), the kill and its confirmations, and a root that outlived the kill of
its containment. The engine's teardown (``teardown.teardown``, which adds the run's events) and
``bench``'s direct sample (``benchmark/direct.py``, which turns the loop itself: ``waits.carried``)
both take them from here, as steps that yield ``Wait`` values.

Each piece is given what it reads (the loop, the host's reaper, the container, the root, a
reader of the members): no run's state is needed, so a carrier without one (the direct sample)
reaches the same decisions through the same code.
"""

from __future__ import annotations

import os

from .. import signum
from ..containment.members import exiting, read_member, usage_of
from ..diagnostics import warn
from .waits import wait_until

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations
    from typing import Callable

    from ..containment import Container
    from ..containment.accounting import Usage
    from ..containment.members import LiveUsage, Member
    from ..loop import Loop
    from .reaper import Reaper
    from .child import Child

    Members = Callable[[], list[Member]]

MEMBER_POLL_SECONDS = 0.01
KILL_CONFIRM_SECONDS = 2.0


def read_tree(reaper: Reaper, members: Members) -> list[Member] | None:
    """The container's members once what this process adopted is collected (zombies included),
    as the teardown starts from; None when they cannot be read."""
    reaper.reap()
    try:
        return members()
    except OSError:
        return None


def live_members(reaper: Reaper, members: Members) -> list[int] | None:
    """Members that have not exited yet (zombies awaiting a reaper do not count)."""
    tree = read_tree(reaper, members)
    return None if tree is None else [m.pid for m in tree if not m.zombie]


def figures(container: Container, tree: list[Member] | None) -> tuple[LiveUsage | None, Usage]:
    """The members' own figures (None where they could not be read) and the tree's usage at the
    ending, read before it is ended: a tree gone by then can add nothing to them."""
    live = usage_of([member.pid for member in tree], io=container.live_io) if tree is not None else None
    return live, container.usage(live)


class TreeEnd:
    """What ``end`` found and did: ``gone`` (the tree was gone at the first read: nothing ran
    from it on), the soft stop's record (``shutdown``, None without one), whether the kill or the
    last read failed (``unread``: its error, for the warning), and the pids left (``remaining``)."""

    __slots__ = ("gone", "shutdown", "kill_error", "unread", "remaining")

    def __init__(self, gone: bool, shutdown: dict | None) -> None:
        self.gone = gone
        self.shutdown = shutdown
        self.kill_error = False
        self.unread: OSError | None = None
        self.remaining: list[int] = []

    def final(self, container: Container, usage: Usage) -> Usage:
        """The tree's figures once it is gone (``figures``' ``usage`` read again), unless it was
        gone at the first read: nothing ran after it."""
        return usage if self.gone else container.final_usage(usage)


def end(
    loop: Loop,
    reaper: Reaper,
    container: Container,
    child: Child,
    members: Members,
    tree: list[Member] | None,
    graceful: bool,
    grace_ms: int | None,
    kill_asked: Callable[[], bool],
):
    """End every member of the tree ``read_tree`` found: SIGTERM and up to the spec's grace
    first when ``graceful`` (the ending's: ``ENDING_REPORTS``; a control ``kill`` during it,
    ``kill_asked``, ends it at once), then the kill (a run's steps: ``yield from``); returns the
    ``TreeEnd``."""
    before = None if tree is None else [member.pid for member in tree if not member.zombie]
    shutdown = None
    if graceful:
        grace = (grace_ms or 0) / 1000
        count = None if before is None else len(before)  # unread: no count (the shape allows null)
        shutdown = yield from _soft_stop(loop, reaper, container, members, grace, count, kill_asked)
    # No member at all (not even a zombie) and the root collected: the tree is gone, and nothing
    # is left that could fork into it, so there is nothing to kill and nothing to read again.
    ended = TreeEnd(tree == [] and shutdown is None and child.returncode is not None, shutdown)
    if ended.gone:
        return ended
    try:
        container.kill_all()
    except OSError:
        ended.kill_error = True
    until = loop.clock() + KILL_CONFIRM_SECONDS
    emptied = yield from wait_until(lambda: live_members(reaper, members) == [], until, MEMBER_POLL_SECONDS)
    if not (emptied and _left(container, child)):
        until = loop.clock() + KILL_CONFIRM_SECONDS
        yield from wait_until(lambda: child.returncode is not None, until, MEMBER_POLL_SECONDS)
    outlived = yield from _kill_root_outside(loop, child)
    reaper.reap()  # a killed member the runner adopted is dead, not remaining
    try:
        ended.remaining = sorted(set(container.member_pids()).union(outlived))
    except OSError as exc:
        ended.unread = exc
    return ended


def _left(container: Container, child: Child) -> bool:
    """Whether the root, once its emptied boundary's kill is confirmed, is alive outside it and
    not on its way out: one that left it, which no wait for its exit would see end, so it is
    killed by its pid at once (a ``--timeout 1s`` run whose root left ended 2 s late). One on its
    way out (``members.exiting``: from the start of its exit) is waited for as before, whatever
    its group or process group shows meanwhile, and so is one whose group cannot be read."""
    if child.returncode is not None or exiting(child.pid):
        return False
    try:
        return not container.holds(child.pid)
    except OSError:
        return False


def _kill_root_outside(loop: Loop, child: Child):
    """The root still alive after the kill of its boundary: it left the boundary (wrote itself
    into another cgroup's ``cgroup.procs``, or joined another process group) or cannot die yet.
    Either way it was left after the hard kill (returned, for ``remaining_pids``); it is this
    process's child, never collected, so its pid is still its own: killed by it, and waited for
    as the members were (a run's steps: ``yield from``). A root dead but uncollected (a zombie:
    a fault before its exit was watched) is not (one whose main thread alone ended runs on in its
    other threads: no zombie, ``read_member``). A root on its way out is not taken for one
    that left: the kernel takes it out of its cgroup only just before it is a zombie, with no
    sleep between but a pid namespace's init's wait for its namespace, and a run's root is never
    one (its spawn ends it before its exec when its parent is not the runner), while this look comes only
    once the group is empty and either KILL_CONFIRM_SECONDS have passed without the root's exit
    or the root, not exiting, is outside it (``_left``)."""
    if child.returncode is not None:
        return ()
    root = read_member(child.pid)
    if root is None or root.zombie:
        return ()
    try:
        os.kill(child.pid, signum.SIGKILL)
    except OSError:
        pass  # gone meanwhile: collected below
    until = loop.clock() + KILL_CONFIRM_SECONDS
    yield from wait_until(lambda: child.returncode is not None, until, MEMBER_POLL_SECONDS)
    warn(
        f"the run's root process (pid {child.pid}) outlived the kill of its containment (it had left it, "
        "or could not die): killed by its pid; cleanup_finished lists it as remaining"
    )
    return (child.pid,)


def _soft_stop(
    loop: Loop, reaper: Reaper, container: Container, members: Members, grace: float, before: int | None, kill_asked
):
    """SIGTERM to every member, then wait up to ``grace`` for the tree to empty, or a ``kill``
    asked (a caller escalating from ``cancel``)."""
    started = loop.clock()
    try:
        container.signal_members(signum.SIGTERM)
        sent = True
    except OSError:
        sent = False
    ended = lambda: kill_asked() or live_members(reaper, members) == []  # noqa: E731 - asked at each look
    yield from wait_until(ended, started + grace, MEMBER_POLL_SECONDS)
    after = live_members(reaper, members)
    drained = after == []
    return {
        "soft_stop_scope": container.soft_stop_scope,
        "soft_signal": "sent" if sent else "failed",
        "members_before": before,
        "members_after": None if after is None else len(after),
        "drained_within_grace": drained,
        "escalated": not drained,
        "elapsed_ms": int((loop.clock() - started) * 1000),
    }
