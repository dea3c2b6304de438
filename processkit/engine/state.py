"""What one run holds, by phase: ``RunState`` from setup on (the spec, its stream, what setup
made), ``Launched`` for what exists once its child is spawned. Launch returns the second; the race,
the teardown and the release are handed it, so no phase can ask for a child that is not there.

Callbacks on the loop (a stream's read, a signal, a control request, a timer) only *record* here
that an ending is ready; which one wins is decided after the loop's turn (``race``).
"""

from __future__ import annotations

import os

from ..containment.members import read_members  # (loaded with the containment's base either way)
from ..events.emitter import Emitter
from ..loop import Loop, Timer
from ..rundir import RunDir
from ..context import OWN_CONTEXT, RunContext
from ..spec import OverflowPolicy, RunSpec
from .endings import EndingKind

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations: the pty module is imported by --pty runs alone
    from typing import Callable

    from .. import containment
    from ..containment.members import Member
    from ..control.publication import Publication
    from . import capture
    from .child import Child
    from .echo import StallClock
    from .pty import Keyboard, PseudoTerminal
    from .reaper import Reaper
    from .stdin_feed import StdinFeed
    from .streams import OutputStream
    from .terminal import Foreground


CONTROL_ENDINGS = {"cancel": EndingKind.CONTROL_CANCEL, "kill": EndingKind.CONTROL_KILL}


class RunState:
    """One run from setup to release: its spec and stream, the loop and reaper it shares with
    the other runs of its process, the endings recorded so far, and what setup has made (each
    None, or empty, until its step)."""

    def __init__(
        self,
        spec: RunSpec,
        emitter: Emitter,
        runner_cwd: str,
        loop: Loop,
        reaper: Reaper,
        context: RunContext = OWN_CONTEXT,
        *,
        final_usage: bool = True,
        count_leaks: bool = False,
        said: set,
    ):
        self.spec = spec
        self.context = context  # what the carrier wired in beside the spec (``context.RunContext``)
        # where this run's capture files are (the carrier's place for a stand-in)
        self.capture_dir = None if spec.capture_dir is None else context.place(spec.capture_dir)
        # a ring's layout record (capture_layout), written where a reader finds it: in the directory
        # the spec names, never a carrier's own place (its caller gets the kept ranges with the reply)
        self.ring_record = (
            spec.capture_dir is not None and spec.capture_keep != "head" and self.capture_dir == spec.capture_dir
        )
        self.events = emitter
        self.runner_cwd = runner_cwd
        self.loop = loop
        self.reaper = reaper
        self.pump_backend = "python"
        self.spawn_backend = "python"
        self.unpolled_pipes = False  # its captured pipes waited for by the pump's thread (streams.py)
        self.pending: dict[EndingKind, str | None] = {}
        self.timers: dict[str, Timer] = {}
        self.last_output = 0.0
        self.root_pid: int | None = None  # what the control plane shows; set at spawn
        self.stop_signals = 0  # counted from the teardown's start (race: the exit window's) on: cuts the drain
        # Made by setup, in its order; released by ``release`` whatever the run reached.
        self.targets: dict[str, capture.CaptureTarget] = {}
        self.stdin_source: int | None = None
        self.cwd_fd: int | None = None  # the named working directory as judged (``launch._judge_cwd``)
        self.cwd_missing: OSError | None = None  # or why it is none: missing, or a file
        self.env: dict[str, str] = {}
        self.terminal: PseudoTerminal | None = None  # --pty: the child's terminal
        self.rundir: RunDir | None = None
        self.container: containment.Container | None = None
        self.publication: Publication | None = None
        self.continued_hook: Callable[[], None] | None = None  # launch's, after a stop (``continued``)
        self.final_usage = final_usage  # read the figures again once the tree is gone (``steps``)
        self.count_leaks = count_leaks  # count what the root left running (``steps``'s ``leaks``: batch's)
        # the warnings the host's runs said once (``Host.said``: a failed echo write's stream and
        # target among them), and what this run lost, each (said or not) for its carrier's reply
        self.said = said
        self.echo_lost: tuple[tuple[str, str, int], ...] = ()  # (why, stream, errno): ``teardown.echo_lost``
        self.members_unread: OSError | None = None  # the last member read's failure: its warnings' cause

    def continued(self) -> None:
        """The runner and the run's tree were stopped (Ctrl-Z) and are continued: the time
        stopped was no idleness of the child's, so the idle deadline counts from now (the
        overall one counts it, as documented), and the terminal is lent again (launch)."""
        self.last_output = self.loop.clock()
        if self.continued_hook is not None:
            self.continued_hook()

    def close_cwd(self) -> None:
        """``cwd_fd`` closed: once the child has its copy (the spawn), or at the release."""
        fd, self.cwd_fd = self.cwd_fd, None
        if fd is not None:
            os.close(fd)

    def cancel_timers(self) -> None:
        """The run's timers off (its deadlines, snapshots, late publication): it is ending."""
        for timer in self.timers.values():
            timer.cancel()

    def request_ending(self, kind: EndingKind, detail: str | None = None) -> None:
        """Record that an ending is ready; the loop's turn decides which one wins."""
        self.pending.setdefault(kind, detail)

    def stop_signal(self, source: str) -> None:
        """A stop signal (SIGINT, SIGTERM, SIGHUP) reached the runner's process."""
        self.stop_signals += 1
        self.request_ending(EndingKind.SIGNAL, source)

    @property
    def output_limit(self) -> int | None:
        """The bytes of one stream past which ``saw_output`` ends the run, None when it never does:
        a stream's native stay hands the loop back there (engine/streams.py)."""
        spec = self.spec
        return spec.capture_max_bytes if spec.capture_overflow is OverflowPolicy.CANCEL else None

    def saw_output(self, stream: OutputStream) -> None:
        self.last_output = self.loop.now
        spec = self.spec
        if spec.capture_overflow is OverflowPolicy.CANCEL and stream.pump.seen > spec.capture_max_bytes:
            self.request_ending(EndingKind.OVERFLOW, stream.name)

    # -- what the control plane may see and ask -------------------------------------------------
    def read_member_list(self) -> list[Member]:
        """The container's current members; raises OSError when they cannot be read."""
        if self.container is None:  # only asked once published, which is after the container is made
            raise OSError("the run has no container yet")
        try:
            return read_members(self.container.member_pids())
        except OSError as exc:  # kept for the teardown's warning (EMFILE: a batch short of descriptors)
            self.members_unread = exc
            raise

    def control_stop(self, verb: str) -> None:
        """A control-plane ``cancel`` or ``kill``; acknowledged by the caller before this."""
        self.request_ending(CONTROL_ENDINGS[verb])

    @property
    def kill_asked(self) -> bool:
        """A control-plane ``kill`` came, whatever ending won: it cuts a soft stop's grace short."""
        return EndingKind.CONTROL_KILL in self.pending


class Launched:
    """What launch made once the child is spawned: the phases after it are handed this."""

    __slots__ = (
        "container",
        "child",
        "streams",
        "stdin_feed",
        "keyboard",
        "foreground",
        "handoff",
        "lend_modes",
        "started_ns",
        "ended_ns",
        "stall",
        "pipes_until",
    )

    def __init__(self, container: containment.Container, child: Child, started_ns: int):
        self.container = container
        self.child = child
        self.started_ns = started_ns  # time.monotonic_ns() just before the spawn (the child's fork)
        self.ended_ns: int | None = None  # ... and once the root was reaped
        self.stall: StallClock | None = None  # the echoes' stall clock, from the root's exit (``race``)
        # where a descendant held the pipes past the root's exit: the loop's clock at which the
        # exit's bound on reading them ends (``race``), which the drain after the teardown keeps
        self.pipes_until: float | None = None
        self.streams: list[OutputStream] = []
        self.stdin_feed: StdinFeed | None = None
        self.keyboard: Keyboard | None = None  # --pty: the caller's terminal relayed into the child's
        self.foreground: Foreground | None = None
        self.lend_modes: list | None = None  # the terminal's modes before the spawn, put back after a kill
        self.handoff: str | None = None  # why the terminal could not be lent to the child, if it could not

    def keys_again(self) -> None:
        """At a SIGCONT: a ``--pty`` run's keyboard takes raw mode back, where it has one yet
        (one started in the background takes it when brought forward: lending's ``take_keyboard``)."""
        if self.keyboard is not None:
            self.keyboard.raw_again()
