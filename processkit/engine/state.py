"""Everything one run holds, shared by its phases: launch fills it, the race reads and records
into it, teardown empties it.

Callbacks on the loop (a stream's read, a signal, a control request, a timer) only *record* here
that an ending is ready; which one wins is decided after the loop's turn (``race``).
"""

from __future__ import annotations

from ..events.emitter import Emitter
from ..loop import Loop, Timer
from ..rundir import RunDir
from ..spec import OverflowPolicy, RunSpec
from .endings import EndingKind

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations: the pty module is imported by --pty runs alone
    from .. import containment
    from ..containment.members import Member
    from ..control.publication import Publication
    from . import capture, spawn
    from .pty import Keyboard, PseudoTerminal
    from .signals import SignalWatch
    from .stdin_feed import StdinFeed
    from .streams import OutputStream
    from .terminal import Foreground


class Launched:
    """What exists once the child is spawned, for the phases that run after launch."""

    __slots__ = ("container", "child", "signals")

    def __init__(self, container: containment.Container, child: spawn.Child, signals: SignalWatch):
        self.container = container
        self.child = child
        self.signals = signals


CONTROL_ENDINGS = {"cancel": EndingKind.CONTROL_CANCEL, "kill": EndingKind.CONTROL_KILL}


class RunState:
    def __init__(self, spec: RunSpec, emitter: Emitter, runner_cwd: str):
        self.spec = spec
        self.events = emitter
        self.runner_cwd = runner_cwd
        self.loop = Loop()
        self.pump_backend = "python"
        self.spawn_backend = "python"
        self.rundir: RunDir | None = None
        self.container: containment.Container | None = None
        self.child: spawn.Child | None = None
        self.streams: list[OutputStream] = []
        self.targets: dict[str, capture.CaptureTarget] = {}
        self.stdin_source: int | None = None
        self.stdin_feed: StdinFeed | None = None
        self.foreground: Foreground | None = None
        self.terminal: PseudoTerminal | None = None  # --pty: the child's terminal
        self.keyboard: Keyboard | None = None  # --pty: the caller's terminal relayed into it
        self.env: dict[str, str] | None = None
        self.pending: dict[EndingKind, str | None] = {}
        self.timers: dict[str, Timer] = {}
        self.last_output = 0.0
        self.pidfd: int | None = None
        self.signals: SignalWatch | None = None
        self.stop_signals = 0  # counted from the teardown's start on: one of those cuts the drain short
        self.returncode: int | None = None
        self.publication: Publication | None = None
        self.started_at = ""
        self.started_ns: int | None = None  # monotonic: the child exec'd, and its root was reaped
        self.ended_ns: int | None = None

    def launched(self) -> Launched:
        """The container, child and signal watch launch made; only the phases after it ask."""
        if self.container is None or self.child is None or self.signals is None:
            raise RuntimeError("the run's phases ran out of order: asked for its child before launch")
        return Launched(self.container, self.child, self.signals)

    def request_ending(self, kind: EndingKind, detail: str | None = None) -> None:
        """Record that an ending is ready; the loop's turn decides which one wins."""
        self.pending.setdefault(kind, detail)

    def stop_signal(self, source: str) -> None:
        """A stop signal (SIGINT, SIGTERM, SIGHUP) reached the runner."""
        self.stop_signals += 1
        self.request_ending(EndingKind.SIGNAL, source)

    def saw_output(self, stream: OutputStream) -> None:
        self.last_output = self.loop.now
        spec = self.spec
        if spec.capture_overflow is OverflowPolicy.CANCEL and stream.pump.seen > spec.capture_max_bytes:
            self.request_ending(EndingKind.OVERFLOW, stream.name)

    # -- what the control plane may see and ask -------------------------------------------------
    def read_member_list(self) -> list[Member]:
        """The container's current members; raises OSError when they cannot be read."""
        from ..containment.members import read_members

        if self.container is None:  # only asked once published, which is after the container is made
            raise OSError("the run has no container yet")
        return read_members(self.container.member_pids())

    def control_stop(self, verb: str) -> None:
        """A control-plane ``cancel`` or ``kill``; acknowledged by the caller before this."""
        self.request_ending(CONTROL_ENDINGS[verb])
