"""How a run can end, which ending wins a tie, and what each ending reports.

Each ending kind maps, through one table, to the event that announces it and the exit code (and
runner-own failure, when there is one) it ends the run with. The race only records kinds; this
module decides what they mean.
"""

from __future__ import annotations

from ..errors import Failure, Kind, internal_failure
from ..fdlimit import unexpected
from ..plain import Constant
from ..events.base import Event, RootExited
from ..spec import RunSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, ClassVar

    from ..containment.accounting import Usage


class EndingKind(Constant):
    """A way a run can end, with its priority: a lower one wins when several are ready in one
    turn, and between equals the one recorded first does (a control cancel and kill rank alike)."""

    __slots__ = ("priority",)
    SIGNAL: ClassVar[EndingKind]
    CHILD_EXIT: ClassVar[EndingKind]
    CONTROL_CANCEL: ClassVar[EndingKind]
    CONTROL_KILL: ClassVar[EndingKind]
    OVERALL_TIMEOUT: ClassVar[EndingKind]
    IDLE_TIMEOUT: ClassVar[EndingKind]
    OVERFLOW: ClassVar[EndingKind]
    FOREGROUND: ClassVar[EndingKind]  # never raced: the terminal hand-off failed before the race began
    INTERNAL: ClassVar[EndingKind]  # never raced: a runner bug broke the race; the tree is still torn down

    def __init__(self, name: str, priority: int):
        super().__init__(name, name.lower())
        self.priority = priority


EndingKind.SIGNAL = EndingKind("SIGNAL", 0)
EndingKind.CHILD_EXIT = EndingKind("CHILD_EXIT", 1)
EndingKind.CONTROL_CANCEL = EndingKind("CONTROL_CANCEL", 2)
EndingKind.CONTROL_KILL = EndingKind("CONTROL_KILL", 2)
EndingKind.OVERALL_TIMEOUT = EndingKind("OVERALL_TIMEOUT", 3)
EndingKind.IDLE_TIMEOUT = EndingKind("IDLE_TIMEOUT", 4)
EndingKind.OVERFLOW = EndingKind("OVERFLOW", 5)
EndingKind.FOREGROUND = EndingKind("FOREGROUND", 6)
EndingKind.INTERNAL = EndingKind("INTERNAL", 7)


class Ending:
    """The ending that won the race. (Plain classes in this module, not NamedTuples: each
    NamedTuple costs the run's start-up a fifth of a millisecond to build.)"""

    __slots__ = ("kind", "detail")

    def __init__(self, kind: EndingKind, detail: str | None = None):
        self.kind = kind
        self.detail = detail  # signal source, overflowing stream, or what went wrong


class Outcome:
    """The runner's exit code, and the runner-own failure to report when there is one. For a
    run whose child spawned: ``usage`` (``containment.Usage``), the tree's figures, set by the
    runner; ``time.monotonic_ns()`` just before the spawn (the child's fork) and once the
    root was reaped (None when it never was), and the root's ``max_rss_bytes`` and
    ``root_cpu_ns`` then; ``remembered``: the last event of each type ``steps`` was asked to
    keep, as the object written, by event type; ``records``: a held stream's events as
    gathered, in order, while none was written (``events.emitter.Emitter.gathered``);
    ``stream_bytes``: the bytes its stream's file holds of this run's (``Emitter.sent``), what a
    carrier reads back at most (through ``RunContext.streamed``: the child may have put a file
    of any size, or a link, at the path), and ``stream_file``, the file's ``(st_dev, st_ino)``
    (``Emitter.identity``), which ``--usage-file`` never replaces; ``signal``: the signal the
    root died of when its death ended the run, what a batch's line says without reading
    ``root_exited`` back; ``left_behind``:
    how many of the tree's processes were still running when the root exited on its own and
    ended the run (a daemon it started: the teardown then killed them), a batch's leak, counted
    only for a carrier that asks (``runner.steps``'s ``leaks``: 0 for ``bench``, the API);
    ``kept``: a ring capture's stream ranges each file holds, by stream name (None for a head
    capture), what the service sends with its reply (its scratch's layout record is gone when the
    caller reads); ``cpu_wait_ns``: the time its tree waited for a CPU, where ``bench``'s sample
    asked its container (``Container.waited_ns``); ``exit_timed``: ``ended_ns`` is the root's exit
    by the kernel's clock (``bench``'s ``exit_clock``), not when the loop reaped it."""

    __slots__ = (
        "code",
        "failure",
        "usage",
        "started_ns",
        "ended_ns",
        "remembered",
        "max_rss_bytes",
        "root_cpu_ns",
        "command_from_ns",
        "records",
        "stream_bytes",
        "stream_file",
        "signal",
        "left_behind",
        "members_unread",
        "kept",
        "stream_failure",
        "echo_lost",
        "cpu_wait_ns",
        "exit_timed",
    )

    def __init__(self, code: int, failure: Failure | None = None):
        self.code = code
        self.failure = failure
        self.usage: Usage | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.remembered: dict[str, dict] = {}
        self.max_rss_bytes: int | None = None  # the root's ru_maxrss from wait4 (``child.Child``), once reaped
        self.root_cpu_ns: tuple[int, int] | None = None  # the root's (user, system) from wait4, likewise
        self.command_from_ns: int | None = None  # the child's start less its cgroup joins (``child.Child``)
        self.records: list | None = None  # records and (event, stamp) pairs
        self.stream_bytes: int | None = None  # None: the run never got that far
        self.stream_file: tuple[int, int] | None = None  # None: no regular file opened by its path
        self.signal: int | None = None  # the signal the root died of, when its own death ended the run
        # members alive when the root's own exit ended the run (killed at teardown); None: unread
        self.left_behind: int | None = 0
        self.members_unread: OSError | None = None  # why left_behind is None, when known (``RunState``'s)
        self.kept: dict | None = None
        self.stream_failure: str | None = None  # why the stream's writes stopped (``Emitter.failure``)
        self.echo_lost: tuple = ()  # the live echo given up, as the run said it (``RunState.echo_lost``)
        self.cpu_wait_ns: int | None = None  # the tree's wait for a CPU (``Container.waited_ns``): bench's samples
        self.exit_timed = False  # ended_ns is the kernel's exit time (``bench``'s exit clock)

    def exit_fields(self) -> tuple[int, str, int | None]:
        """What ``runner_exit`` says of it (code, source, child_code); a tombstone keeps the same."""
        own = self.failure
        return (self.code, own.kind.label, None) if own else (self.code, "child_exit", self.code)


def internal(detail: str) -> Outcome:
    """The runner's own failure: a bug, or a resource it could not get back (``internal``, 104)."""
    return Outcome(Kind.INTERNAL.code, internal_failure(detail))


def fault_words(exc: BaseException) -> str:
    """The words for what raised in a run once its steps began (a phase, a callback of its own,
    its release), or in a batch's attempt around them: ``fdlimit.unexpected``'s, the CLI's and
    the runner service's mapping (out of descriptors: the limit named; anything else
    ``internal error: <type>: <text>``), in one line (a text's own line breaks as spaces)."""
    return " ".join(unexpected(exc, "for the run").message.split())


def faulted(exc: BaseException) -> Outcome:
    """The run's end for what raised in it once its steps began: the runner's own failure
    (``internal``, 104) whatever raised, an ``EMFILE`` too, in ``fault_words``."""
    return Outcome(Kind.INTERNAL.code, Failure(Kind.INTERNAL, fault_words(exc)))


def child_exit_code(returncode: int) -> int:
    """The child's status as a shell would show it: 128+N for a death by signal N."""
    return returncode if returncode >= 0 else 128 + ((-returncode) & 0x7F)


def format_duration(ms: int) -> str:
    """The reference's compact form: whole seconds as "5s", anything else (zero too) as "ms"."""
    return f"{ms // 1000}s" if ms and ms % 1000 == 0 else f"{ms}ms"


class EndingFacts:
    """What an ending's report may read: the run's spec, the root's status and the container's
    soft-stop scope, and where its event goes."""

    __slots__ = ("spec", "returncode", "soft_stop_scope", "emit", "writing")

    def __init__(
        self,
        spec: RunSpec,
        returncode: int | None,
        soft_stop_scope: str,
        emit: Callable[[Event], None],
        writing: bool,
    ):
        self.spec = spec
        self.returncode = returncode  # the root's, set when the child exited
        self.soft_stop_scope = soft_stop_scope
        self.emit = emit
        self.writing = writing  # whether an event emitted is written (``Emitter.writing``): else not built

    def stopped(self, failure: Failure, shutdown: dict | None) -> Failure:
        """A graceful ending's failure once its teardown is done: its headline, then how the tree
        was stopped. ``shutdown``: the soft stop's record when a control ``kill`` was asked during
        it (``kill:ends-grace``), else None (the grace is said as the spec's)."""
        grace = self.spec.grace_ms
        waited = "" if grace is None else _waited(grace, shutdown)
        stop = (
            f"sent SIGTERM to the process tree (capability scope: {self.soft_stop_scope}), "
            f"{waited}then hard-killed any survivors via the container"
        )
        return Failure(failure.kind, f"{failure.message}: {stop}")


def _waited(grace_ms: int, shutdown: dict | None) -> str:
    """The reference's words for the grace: waited out, or, once a control ``kill`` ended it
    early, how long the tree had, not the whole grace the runner never waited."""
    if shutdown is None or not shutdown["escalated"] or shutdown["elapsed_ms"] >= grace_ms:
        return f"waited {format_duration(grace_ms)} grace, "
    waited = format_duration(shutdown["elapsed_ms"])
    return f"waited {waited} of its {format_duration(grace_ms)} grace until a control kill cut it short, "


def _foreground(facts: EndingFacts, detail: str | None) -> Outcome:
    from ..events.types import ContainerFailed  # the endings but a child's exit: their types load when written

    facts.emit(ContainerFailed(phase="foreground", code=Kind.CONTAINER_ERROR.code, message=detail))
    message = f"could not give the terminal to the child's process group: {detail}"
    return Outcome(Kind.CONTAINER_ERROR.code, Failure(Kind.CONTAINER_ERROR, message))


def _internal(facts: EndingFacts, detail: str | None) -> Outcome:
    # Like a failed wait: no ending event (docs/events.md §4). ``detail``: the fault's words (``fault_words``).
    return Outcome(Kind.INTERNAL.code, Failure(Kind.INTERNAL, f"{detail}"))


def _child_exit(facts: EndingFacts, detail: str | None) -> Outcome:
    rc = facts.returncode
    assert rc is not None, "a child-exit ending is recorded only once the root's status is known"
    outcome = Outcome(child_exit_code(rc))
    signalled = rc < 0
    if signalled:
        outcome.signal = -rc  # what a batch's line says, without reading ``root_exited`` back
    if facts.writing:  # not for a dropped stream (each of ``bench``'s runs): the event is built only here
        facts.emit(
            RootExited(
                outcome="signalled" if signalled else "exited",
                code=None if signalled else rc,
                signal=-rc if signalled else None,
            )
        )
    return outcome


def _timeout(facts: EndingFacts, window: int, reason: str, what: str, why: str = "") -> Outcome:
    from ..events.types import Timeout

    facts.emit(Timeout(timeout_ms=window, grace_ms=facts.spec.grace_ms, reason=reason))
    headline = f"{what} {format_duration(window)}{why}"
    return Outcome(Kind.TIMEOUT.code, Failure(Kind.TIMEOUT, headline))


def _overall_timeout(facts: EndingFacts, detail: str | None) -> Outcome:
    window = facts.spec.timeout_ms
    assert window is not None, "raced only with --timeout"
    return _timeout(facts, window, "overall", "run timed out after")


def _idle_timeout(facts: EndingFacts, detail: str | None) -> Outcome:
    window = facts.spec.idle_timeout_ms
    assert window is not None, "raced only with --idle-timeout"
    return _timeout(facts, window, "idle", "run idle-timed out after", " with no output")


def _signal(facts: EndingFacts, detail: str | None) -> Outcome:
    from ..events.types import Cancelled

    facts.emit(Cancelled(source=detail, grace_ms=facts.spec.grace_ms))
    return Outcome(Kind.CANCELLED.code, Failure(Kind.CANCELLED, cancelled_headline(detail)))


# The runner's headlines (these and the reports below) are the reference's words: a script or an
# agent greps for them.
_SIGNAL_NAMES = {"ctrl_c": "Ctrl-C", "sigterm": "SIGTERM", "sighup": "SIGHUP"}


def stop_named(source: str | None) -> str | None:
    """A stop's source (``STOP_SIGNALS``' word, ``ctrl_c``) as the program's lines name it to a
    human, ``Ctrl-C``, ``SIGTERM``, ``SIGHUP``; another source (``caller_gone``) as it is."""
    return _SIGNAL_NAMES.get(source or "", source)


def cancelled_headline(source: str | None) -> str:
    """The reference's headline for a stop signal, "run cancelled (SIGTERM)", whether the child
    started or not: scripts match on the signal's name in it."""
    return f"run cancelled ({stop_named(source)})"


def not_started(source: str | None) -> str:
    """The message of a run a stop signal ended before its child was started: the CLI's runner's
    and the API service's alike."""
    return f"{cancelled_headline(source)}: the child was not started"


def _overflow(facts: EndingFacts, detail: str | None) -> Outcome:
    from ..events.types import OutputOverflow

    max_bytes = facts.spec.capture_max_bytes
    facts.emit(OutputOverflow(stream=detail, max_bytes=max_bytes, grace_ms=facts.spec.grace_ms))
    message = f"run output exceeded the {max_bytes}-byte capture ceiling on {detail}"
    return Outcome(Kind.OUTPUT_OVERFLOW.code, Failure(Kind.OUTPUT_OVERFLOW, message))


def _control_cancel(facts: EndingFacts, detail: str | None) -> Outcome:
    from ..events.types import Cancelled

    facts.emit(Cancelled(source="control_cancel", grace_ms=facts.spec.grace_ms))
    message = "run cancelled by a control-plane command"
    return Outcome(Kind.CONTROL_CANCEL.code, Failure(Kind.CONTROL_CANCEL, message))


def _control_kill(facts: EndingFacts, detail: str | None) -> Outcome:
    from ..events.types import Killed

    facts.emit(Killed(source="control_kill"))
    message = (
        "run killed by a control-plane command: hard-killed the whole process tree immediately "
        "via the container's kill-on-drop (no soft stop, no grace)"
    )
    return Outcome(Kind.CONTROL_KILL.code, Failure(Kind.CONTROL_KILL, message))


class EndingReport:
    """What one kind of ending does: whether the tree gets a soft stop (SIGTERM and the grace)
    before the kill, and how it is reported (its event, and the outcome it returns)."""

    __slots__ = ("graceful", "report")

    def __init__(self, graceful: bool, report: Callable[[EndingFacts, str | None], Outcome]):
        self.graceful = graceful
        self.report = report


ENDING_REPORTS: dict[EndingKind, EndingReport] = {
    EndingKind.SIGNAL: EndingReport(True, _signal),
    EndingKind.CHILD_EXIT: EndingReport(False, _child_exit),
    EndingKind.CONTROL_CANCEL: EndingReport(True, _control_cancel),
    EndingKind.CONTROL_KILL: EndingReport(False, _control_kill),
    EndingKind.OVERALL_TIMEOUT: EndingReport(True, _overall_timeout),
    EndingKind.IDLE_TIMEOUT: EndingReport(True, _idle_timeout),
    EndingKind.OVERFLOW: EndingReport(True, _overflow),
    EndingKind.FOREGROUND: EndingReport(False, _foreground),
    EndingKind.INTERNAL: EndingReport(False, _internal),
}
