"""After the ending is decided: stop the tree (softly first when the ending allows: the
decisions are ``tree_end``'s, which ``bench``'s direct sample takes too; the run's cleanup events
are said here), drain the output pipes, and release everything the run made.

Teardown waits (for the tree to empty, for the pipes to reach EOF) as a run's steps do: it
yields ``Wait`` values, so the host turns the loop for every run meanwhile.

Facts about draining: a pipe stays open while any process holds its write end, and a process
outside the container (an escapee) may hold it forever or keep writing; an echo consumer may
stop reading. So every wait here is bounded, and what overruns its bound loses only the live
echo, never the run.
"""

from __future__ import annotations

import os

from ..diagnostics import warn
from ..errors import os_error_words
from ..events.base import CleanupFinished, CleanupStarted
from ..writeall import doubt, given_up
from .echo import READER_GONE, StallClock, flush_backlogs
from .state import Launched, RunState
from .tree_end import end
from .waits import wait_until

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations
    from typing import Callable

    from ..containment.members import Member
    from ..loop import Loop
    from .echo import EchoSink
    from .streams import OutputStream

    # A live echo given up: (why, its stream's name, errno), and the key it is said once by (None: each time).
    Lost = tuple[tuple[str, str, int], tuple | None]

PUMP_DRAIN_SECONDS = 2.0  # after teardown: a pipe held open by an escapee must not hang the run
DRAIN_CEILING_SECONDS = 30.0  # ... nor an escapee that keeps writing to a slow but live consumer
# After the child is gone: when a file's consumer took nothing for this long (a clock for each
# file: two echoes into one stuck pipe stall once), its echoes lose the rest, the others go on. The
# reference's pump teardown waits 5 s (ProcessKit's PUMP_TEARDOWN); a CI log reader on a loaded
# machine pauses for seconds, and the output's end (the failure summary) is what it must not lose.
ECHO_STALL_SECONDS = 5.0


def teardown(run: RunState, launched: Launched, graceful: bool, tree: list[Member] | None):
    """End every member of the tree ``tree_end.read_tree`` found (``tree_end.end``: SIGTERM and
    the grace first when ``graceful``, then the kill), with the run's cleanup events (a run's
    steps: ``yield from``); returns the ``tree_end.TreeEnd``."""
    container, child = launched.container, launched.child
    if launched.pipes_until is None:  # a stop in the root's exit window counts (``race``)
        run.stop_signals = 0  # the ending is decided: a stop signal from here on only hurries the drain
    if tree is None:  # ``cleanup_started``'s 0 is then no count: said, as a snapshot's failed read is
        cause = _cause(run.members_unread)
        warn(
            f"could not count the container's members before its teardown: {cause}cleanup_started's members_before is no count"
        )
    if run.events.writing:  # a dropped event is not built (each of ``bench``'s runs)
        before = None if tree is None else sum(not member.zombie for member in tree)
        run.events.emit(CleanupStarted(members_before=before or 0, read_error=before is None))
    ended = yield from end(
        run.loop, run.reaper, container, child, run.read_member_list, tree, graceful, run.spec.grace_ms,
        lambda: run.kill_asked,
    )  # fmt: skip
    remaining, unread = ended.remaining, ended.unread
    escapees = run.context.escapees
    # Even for a tree gone already (a root that exited left its escapee to this process); not
    # while the root is uncollected: the look would take its status from it.
    if escapees is not None and container.mechanism == "cgroup_v2" and child.returncode is not None:
        try:
            remaining = sorted(set(remaining).union(escapees(container.holds)))
        except OSError as exc:  # its own cause: the kill's read may have gone well
            remaining, unread = [], exc
    if unread is not None:  # no clean teardown claimed: the remaining members were not counted
        warn(
            f"could not count the container's members after the kill: {_cause(unread)}the teardown is not confirmed clean"
        )
    if not run.events.writing:
        return ended
    shutdown = ended.shutdown
    run.events.emit(
        CleanupFinished(
            remaining=len(remaining),
            remaining_pids=remaining,
            soft_terminate=None
            if shutdown is None
            else ("signalled" if shutdown["soft_signal"] == "sent" else "failed"),
            shutdown=shutdown,
            read_error=unread is not None,
            kill_error=ended.kill_error,
        )
    )
    return ended


def _cause(unread: OSError | None) -> str:
    """A failed member read's error, for the warning that says the count failed (EMFILE: a batch
    short of descriptors); nothing when it is not known."""
    return "" if unread is None else f"{os_error_words(unread)}; "


def drain_outputs(run: RunState, launched: Launched):
    """Read the pipes to EOF now that the tree is gone, then flush the echo backlog (a run's
    steps: ``yield from``).

    Bounded: a pipe held open by a process outside the container ends the drain once the
    runner has waited PUMP_DRAIN_SECONDS on the pipes (or once they are empty, where the root's
    exit's bound on them is over: ``_read_on``), and an echo consumer that stops
    reading loses only the live echo into its file, one ECHO_STALL_SECONDS on, whatever another
    file's reader takes meanwhile (a stall clock for each file, ``echo.StallClock``: two echoes
    into one stuck pipe are given up together). Time spent waiting for a slow but live consumer
    is not charged to the pipes (the bytes still in them would be lost), only to the overall
    DRAIN_CEILING_SECONDS, which nothing extends: an escapee that keeps refilling the pipe for
    a reader that keeps taking a little ends there too. A stop signal caught since the teardown
    began (since the root's exit, where a descendant's pipe held the run after it: ``race``)
    gives up every echo backlog at once (the caller wants the runner gone; the ending is
    already decided): what is left is reading the pipes, within PUMP_DRAIN_SECONDS, so the
    capture still gets what the tree wrote. What was given up is said once the drain is over,
    never inside a live echo's bytes.
    """
    loop = run.loop
    streams = launched.streams
    if launched.stdin_feed is not None:
        launched.stdin_feed.close()
    stopped = lambda: run.stop_signals > 0  # noqa: E731 - counted since the teardown began
    for stream in streams:
        stream.hurry()
    budget = PUMP_DRAIN_SECONDS
    ceiling = loop.clock() + DRAIN_CEILING_SECONDS
    stall = launched.stall or stall_clock(launched, loop)
    lost: list[Lost] = []  # said once the drain is over
    read_on = _read_on(launched, loop)
    while any(s.open and read_on(s) for s in streams) and budget > 0 and loop.clock() < ceiling:
        paused = [s.echo for s in streams if s.paused and s.echo is not None]
        if paused:
            yield from _flush(streams, stall, paused, ceiling, stopped, lost)
        started = loop.clock()
        pipes_done = lambda: (  # noqa: E731 - or a paused echo to give up
            not any(s.open and not s.paused and read_on(s) for s in streams)
            or (stopped() and any(s.paused for s in streams))
        )
        yield from wait_until(pipes_done, min(started + budget, ceiling), 0.05)
        budget -= loop.clock() - started
    for stream in streams:
        stream.close()
    yield from _flush(streams, stall, stall.echoes, ceiling, stopped, lost)
    lost += [
        (("failed", s.name, s.echo.error), (s.name, s.echo.target))
        for s in streams
        if s.echo is not None and s.echo.error not in READER_GONE
    ]
    for words, target in lost:  # after every backlog: never inside the child's echoed stderr
        _said(run, words, target)


def _read_on(launched: Launched, loop: Loop) -> Callable[[OutputStream], bool]:
    """Whether the drain still waits on an open stream's pipe: until its end of file; where a
    descendant held the pipes past the root's exit, once the exit's bound on them is over
    (``Launched.pipes_until``), only until what the tree left in it is taken
    (``OutputStream.emptied``), as that bound was the wait for them, the reference's one
    ``PUMP_TEARDOWN``: an escapee that holds them, writing nothing, costs the run no more (but
    a captured pipe keeps its whole bound, in either pump: ``emptied``)."""
    until = launched.pipes_until
    if until is None:
        return lambda stream: True
    return lambda stream: loop.clock() < until or not stream.emptied()


def _flush(
    streams: list[OutputStream],
    stall: StallClock,
    echoes: list[EchoSink],
    ceiling: float,
    stopped: Callable[[], bool],
    lost: list[Lost],
):
    """``echoes``' backlogs written while their readers take them (``echo.flush_backlogs``; a run's
    steps: ``yield from``), each file whose reader stalls given up on its own (``_abandon``), the
    rest at the ceiling or a stop signal; what was given up added to ``lost``."""
    while (yield from flush_backlogs(stall, echoes, ceiling, stopped)):
        if stopped() or stall.clock() >= ceiling:
            _abandon(streams, stall.pending(), "stopped" if stopped() else "behind", lost)
            return
        _abandon(streams, stall.stalled(), "stalled", lost)


def stall_clock(launched: Launched, loop: Loop) -> StallClock:
    """The run's echoes' one stall clock, started now: at the root's exit (``race``), where a
    reader that takes nothing is given ECHO_STALL_SECONDS in all, the wait for a descendant's
    pipes included (the reference's one ``PUMP_TEARDOWN`` for its pumps and its echo), else at
    the drain (an ending before the exit)."""
    stall = StallClock([s.echo for s in launched.streams if s.echo is not None], ECHO_STALL_SECONDS, loop.clock)
    stall.limits()  # each file's clock started at its first look
    return stall


def echo_lost(why: str, name: str, error: int = 0, whose: str = "the runner's") -> str:
    """The words for a live echo given up (a ``RunState.echo_lost`` item), its stream named as
    ``whose`` (the API's caller hears of its own stdout, not of the service's)."""
    stream = f"{whose} {name}"
    if why == "failed":
        said = f"a write to {stream} failed ({os.strerror(error)})"
    elif why == "stopped":
        said = f"a stop signal cut the echo of {stream} short"
    elif why == "behind":
        said = f"the consumer of {stream} was still behind after {DRAIN_CEILING_SECONDS:g}s of draining"
    else:
        said = f"the consumer of {stream} stopped reading"
    return f"{said}; live echo abandoned"


def _said(run: RunState, lost: tuple[str, str, int], target: tuple | None = None) -> None:
    """Kept with the run, for a carrier whose warnings have no reader (the service: each run's
    reply says its own, whatever another run said), and warned; a failed write (``target``: its
    stream's name and the file it went to) only once for each among the host's runs: every run of
    a ``bench`` echoes into the one stdout, and one line says it."""
    run.echo_lost += (lost,)
    if target is not None:
        if target in run.said:
            return
        run.said.add(target)
    warn(echo_lost(*lost))


def _abandon(streams: list[OutputStream], echoes: list[EchoSink], why: str, lost: list[Lost]) -> None:
    """Give up ``echoes`` (each still holding a backlog) for ``why``, each added to ``lost``. A
    file whose reader stalled is marked first (``writeall.given_up``): the warning that says so,
    and every later line of the runner's own there, gets one write that does not wait (a pipe's:
    a terminal's waits as a blocking write, for its user's ^Q), and a
    later run's echo there (``bench``'s next) no stall; it is said once among the host's runs
    (again once its reader read again and stalled again). A file whose echo a stop signal or
    the ceiling cut is doubted (``writeall.doubt``): the runner's own lines there wait at most
    one bound for its reader, which a stalled one then costs once in all."""
    for stream in streams:
        echo = stream.echo
        if echo is not None and echo in echoes:
            said_once = None
            if why == "stalled" and echo.target is not None:
                said_once = (why, stream.name, echo.target, given_up(echo.target))
            elif echo.target is not None:
                doubt(echo.target)
            lost.append(((why, stream.name, 0), said_once))
            echo.abandon()


def release(run: RunState, launched: Launched | None, ended: tuple[int, str, int | None]) -> Exception | None:
    """Give back everything the run made, whatever step it reached: terminals, files, the
    publication, the container; the run directory goes last. The one place a run is released.

    Every step stands alone and may be repeated (each resource has an idempotent ``close`` or
    ``release``, or is forgotten as it is closed): a step that fails is warned about (the first)
    and the rest still run; that failure is returned. ``ended`` is the ``runner_exit`` to come
    (code, source, child_code), which the registration keeps as the run's tombstone.
    """
    run.cancel_timers()  # a phase that raised left them: none may fire into what goes now (the publication)
    # Each step a call and its arguments, taken only for what the run holds (a lambda each,
    # and a list per holder, were a batch job's dozen small allocations and calls for nothing).
    steps: list[tuple[Callable[..., object], tuple]] = []
    add = steps.append
    if launched is not None:
        if launched.keyboard is not None:
            add((launched.keyboard.restore, ()))
        add((_give_back_terminal, (launched, ended[1])))
        if launched.stdin_feed is not None:
            add((launched.stdin_feed.close, ()))
        for stream in launched.streams:
            add((stream.close, ()))
            if stream.echo is not None:
                add((stream.echo.close, ()))
        if launched.foreground is not None or (run.spec.pty and any(one.echo is not None for one in launched.streams)):
            add((_reset_screen, (launched, ended[1], run)))  # after the echo's last byte
        add((run.reaper.forget, (launched.child.pid,)))
    if run.terminal is not None:
        add((run.terminal.close, ()))
    add((_close_stdin_source, (run,)))
    add((run.close_cwd, ()))
    add((close_targets, (run,)))
    if run.publication is not None:
        add((_close_publication, (run, ended)))
    if run.container is not None:
        add((run.container.release, ()))
    if run.rundir is not None:
        add((run.rundir.close, ()))  # last: it is the evidence for everything above
    return given_back(steps)


def given_back(steps: list[tuple[Callable[..., object], tuple]]) -> Exception | None:
    """Each step of a release called on its own, in order (``release``'s, and ``bench``'s direct
    sample's: its publication, container and slot): one that fails keeps none of the rest from
    running; the first failure is warned of once and returned."""
    failed: Exception | None = None
    for call, args in steps:
        try:
            call(*args)
        except Exception as exc:  # noqa: BLE001 - one step's failure must not keep the rest
            if failed is None:
                failed = exc
    if failed is not None:
        warn(f"the run's release was incomplete: {type(failed).__name__}: {failed}")
    return failed


def _killed(launched: Launched, source: str) -> bool:
    """Whether the child did not end by its own exit: its terminal's modes, and its screen's,
    are then put back for it (docs/io-modes.md, Terminals)."""
    returncode = launched.child.returncode
    return source != "child_exit" or returncode is None or returncode < 0


def _give_back_terminal(launched: Launched, source: str) -> None:
    if launched.foreground is None:
        return
    problem = launched.foreground.restore(modes=_killed(launched, source))
    if problem is not None:
        warn(problem)


def _reset_screen(launched: Launched, source: str, run: RunState) -> None:
    if _killed(launched, source):  # the caller's TERM (the API's service started with another's)
        from .terminal import reset_screen

        env = run.context.env if run.context.env is not None else os.environ
        reset_screen(run.context.fd(1), env.get("TERM"))


def _close_stdin_source(run: RunState) -> None:
    source, run.stdin_source = run.stdin_source, None
    if source is not None:
        os.close(source)


def _close_publication(run: RunState, ended: tuple[int, str, int | None]) -> None:
    """Closed once, forgotten as it is closed: the publication's answers lead back to the run
    (its stop, its member list), a cycle that would leave each published run's objects to the
    cyclic garbage collector instead of freeing them at its end."""
    publication, run.publication = run.publication, None
    if publication is not None:
        publication.close(ended)


def close_targets(run: RunState) -> None:
    """Close the capture files once: forgotten as they are closed (a carrier's lent memfds,
    ``RunContext.held_lent``, only forgotten: they stay the carrier's)."""
    targets, run.targets = run.targets, {}
    lent = run.context.held_fds if run.context.held_lent else None
    for target in targets.values():
        if lent is None or target.fd not in lent:
            os.close(target.fd)
