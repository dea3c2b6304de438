"""What a finished run gives back: ``subprocess.run``'s shape plus what only a contained run knows.

Everything here is plain data (strings, numbers, dicts and the typed events), so a RunResult
pickles and travels back from a worker of any executor.
"""

from __future__ import annotations

import dataclasses
import subprocess
from typing import TypeVar

from ..bounded import loads
from ..capture_layout import STREAMS
from ..containment.accounting import Usage
from ..events.cuts import capture_cuts
from ..events.kept import ranges
from ..callwarning import CallWarning
from ..text import died_with
from .diagnosed import said
from ..events.types import (
    ENDING_TYPES,
    EVENT_TYPES,
    CapturedStream,
    Event,
    OutputCaptured,
    OutputOverflow,
    ResourceSummary,
    RootExited,
    RunnerExit,
    RunStarted,
    from_json,
)


class CaptureInfo(CapturedStream):
    """One captured stream as the run's ``output_captured`` reports it (``events.types``'
    :class:`CapturedStream`: its file, every byte the child produced, what the file holds, and
    the SHA-256 of the file's content), with ``kept``: the stream's ``(start, end)`` byte ranges
    the file holds, in file order: with ``capture_keep="tail"`` or ``"head-tail"`` as the run
    recorded them beside the files (``capture-keep.json``), else the stream's first
    ``bytes_written`` bytes."""

    kept: tuple[tuple[int, int], ...] | None = None

    @classmethod
    def from_event(cls, captured: CapturedStream, run_id: str | None = None, kept: tuple | None = None) -> CaptureInfo:
        return cls(**captured._asdict(), kept=kept if kept is not None else ranges(captured, run_id))


@dataclasses.dataclass(frozen=True, repr=False)
class RunResult:
    """A finished run. ``returncode`` is as ``subprocess.run`` gives it when the child decided
    the end (``source == "child_exit"``): its exit status, or ``-N`` for a death by signal N;
    else a code of the reserved band 100-119. ``exit_code`` is what the CLI exits with for the
    same run (``128+N`` for a death by signal N)."""

    args: list[str] | None
    returncode: int
    run_id: str | None
    source: str | None
    child_code: int | None
    stdout_capture: CaptureInfo | None
    stderr_capture: CaptureInfo | None
    resources: ResourceSummary | None
    events: list[Event]
    jsonl: str | None
    runner_pid: int | None = None  # None for a run this process did not start
    diagnostics: str = ""  # the runner's own stderr lines, when it was not echoed
    # The child's output when asked for (stdout=PIPE, capture_output=True; str with text=True),
    # bounded by the capture cap: ``stdout_capture.truncated`` says when it was cut.
    stdout: bytes | str | None = None
    stderr: bytes | str | None = None
    usage: Usage | None = None  # every figure of the run's accounting (its extensions are also in resources.extra)
    exit_code: int | None = None  # the CLI's exit code for this run (None only for an attached run's unknown one)
    duration: float | None = None  # seconds from the child's start to its root's end, when the service timed it
    # For a run that did not end 0 after its child started, the clause its RunError (or
    # TimeoutExpired) ends with when nothing kept a stream of the child's output: which stream,
    # and the keywords that keep it. "" for every other run, and an attached one.
    output_discarded: str = ""

    def __repr__(self) -> str:
        """One line: the code and who decided it, how long, how much was captured."""
        parts = [f"run_id={self.run_id!r}", f"returncode={self.returncode}", f"source={self.source!r}"]
        if self.duration is not None:
            parts.append(f"duration={self.duration:.3f}s")
        for name, capture in (("stdout", self.stdout_capture), ("stderr", self.stderr_capture)):
            if capture is not None:
                parts.append(f"{name}={capture.bytes_written} bytes captured")
        return f"RunResult({', '.join(parts)})"

    @property
    def message(self) -> str | None:
        """The runner's one-line failure message, when it failed and its stderr was collected."""
        envelope = _envelope(self.diagnostics)
        return envelope.get("message") if envelope else None

    @property
    def oom_killed(self) -> bool | None:
        """Whether the kernel's OOM killer ended a process of the run's tree (with or without a
        cap); None where no counter here says (``usage.oom_kills`` is the count)."""
        if self.usage is None or self.usage.oom_kills is None:
            return None
        return self.usage.oom_kills > 0

    @property
    def ending(self) -> Event | None:
        """The event that ended the run (root_exited, timeout, cancelled, ...), if one did."""
        return next((event for event in self.events if isinstance(event, ENDING_TYPES)), None)

    @property
    def mechanism(self) -> str | None:
        started = next((event for event in self.events if isinstance(event, RunStarted)), None)
        return started.mechanism if started else None

    def check_returncode(self) -> None:
        if self.returncode != 0:
            raise RunError(self)


class CaptureTruncated(CallWarning):
    """The output a caller asked for (``capture_output``, ``PIPE``) was cut short by the cap it set
    (``capture_max_bytes``), or by a failed write (``CaptureWriteFailed``): names the bytes lost."""


class CaptureWriteFailed(CaptureTruncated):
    """Cut short by a failed write to its capture file (a full disk), or its file changed before it
    was read, not the caller's cap: a filter on ``CaptureTruncated`` takes both, this one alone the
    failure the caller did not choose."""


class EventsLost(CallWarning):
    """The run's ``jsonl=`` stream stopped taking events (a full disk, a reader gone): the run went
    on, and the result's events are only those the stream holds, as the CLI's run warns."""


class EchoLost(CallWarning):
    """The run's live echo (``echo=True``) was given up: a write to this process's stdout or
    stderr failed (a full disk), or its reader stopped taking it, as the CLI's run warns."""


class LeftRunning(CallWarning):
    """The child exited with processes of its tree still running, which the teardown ended at
    once (what they would have written next is lost), as the CLI's run warns and batch's LEAK says;
    or that they could not be counted (batch's ``leaked_unknown``)."""


def _captures(result: RunResult) -> tuple[tuple[str, CaptureInfo | None], ...]:
    return (("stdout", result.stdout_capture), ("stderr", result.stderr_capture))


def truncated(result: RunResult, piped: dict[str, bool]) -> tuple[list[str], bool]:
    """What a cap, or a write that failed (a full disk), cut of the streams asked for: one
    phrase per stream, naming the bytes lost; and whether a failed write is among them (the
    warning is then ``CaptureWriteFailed``), as ``files_cut`` says its own."""
    cut, failed = [], False
    for name, capture in _captures(result):
        if piped.get(name) and capture is not None and (capture.truncated or capture.write_error):
            seen, kept = capture.bytes_seen or 0, capture.bytes_written or 0
            how = "a failed write to its capture file" if capture.write_error else "capture_max_bytes"
            cut.append(f"{name} cut by {how}: {seen - kept} of {seen} bytes lost")
            failed = failed or bool(capture.write_error)
    return cut, failed


def cut_words(result: RunResult) -> list[str]:
    """What a cut lost of each stream captured, for an error's text (``truncated``'s phrases)."""
    return truncated(result, {"stdout": True, "stderr": True})[0]


def files_cut(result: RunResult, piped: dict[str, bool]) -> tuple[list[str], bool]:
    """What a cap, or a failed write, cut of the capture files the caller's ``capture_dir`` keeps
    for the streams not asked back (those ``truncated`` says), in the CLI ``run``'s words
    (``events.cuts``); and whether a failed write is among them."""
    ended = next((event.stream for event in result.events if isinstance(event, OutputOverflow)), None)
    kept = [(name, capture._asdict()) for name, capture in _captures(result) if capture and not piped.get(name)]
    return capture_cuts(kept, ended, "capture_max_bytes")


class RunError(subprocess.CalledProcessError):
    """A run that did not exit 0 (raised by ``check=True`` or ``check_returncode()``), or whose
    output asked for was cut short, by the caller's cap or a failed write to its capture file
    (``check=True``; ``returncode`` may then be 0)."""

    def __init__(self, result: RunResult):
        # args is None only for an attached run whose stream names no command; cmd keeps it as given.
        # As subprocess's: the child's output when it was captured, else None (never the runner's lines:
        # they are ``result.diagnostics``, its failure in the text, not the child's bytes).
        super().__init__(result.returncode, result.args, output=result.stdout, stderr=result.stderr)  # type: ignore[arg-type]
        self.result = result

    def __reduce__(self):
        return (type(self), (self.result,))

    def __str__(self) -> str:
        code = self.returncode
        ended = died_with(-code) if code < 0 else f"ended with code {code}"  # subprocess's words for a signal
        text = f"run {self.result.run_id} of {self.cmd!r} {ended} (source: {self.result.source})"
        # What a cut lost, whatever the code: the warning that said it may be filtered or shown once.
        message = "; ".join(filter(None, (self.result.message, *cut_words(self.result))))
        text = f"{text}: {message}" if message else text
        oom = self.result.usage.oom_kills if self.result.usage is not None else None
        if oom:  # a -9 alone does not say why: the CLI's run warns it, the error says it
            from ..summary_line import oom_words

            text = f"{text}; {oom_words(oom, 'its')}"
        return with_discarded(text, self.result)


def with_discarded(text: str, result: RunResult) -> str:
    """An error's text, with what it says of output nothing kept: it is nowhere else to be read."""
    return f"{text}; {result.output_discarded}" if result.output_discarded else text


def build(
    args,
    returncode: int,
    run_id: str | None,
    events: list[Event],
    *,
    jsonl: str | None,
    diagnostics: str,
    runner_pid: int | None = None,
    stdout: bytes | str | None = None,
    stderr: bytes | str | None = None,
    usage: Usage | None = None,
    duration: float | None = None,
    found: dict[str, CaptureInfo | None] | None = None,
    last: dict[type, Event] | None = None,
    output_discarded: str = "",
) -> RunResult:
    """The result of a run from its exit status and its event stream; ``usage``, read from the
    runner's ``--usage-file``, gives ``resources`` the whole tree's figures and its extended
    ones in ``resources.extra``. ``found`` and
    ``last``: the captures and the stream's last event of each type, when the caller read them
    already (``captures``, ``latest``)."""
    if last is None:
        last = latest(events)
    runner_exit = _of(last, RunnerExit)
    source = runner_exit.source if runner_exit else None
    if source is None and returncode >= 0:
        source = (_envelope(diagnostics) or {}).get("kind")
    started = _of(last, RunStarted)
    if run_id is None and started is not None:
        run_id = started.run_id
    if found is None:
        found = captures(events, run_id, last)
    exited = _of(last, RootExited)
    signalled = source == "child_exit" and exited is not None and exited.signal
    return RunResult(
        args=args,
        returncode=-exited.signal if signalled else returncode,  # type: ignore[union-attr, operator]
        exit_code=returncode,
        duration=duration,
        run_id=run_id,
        source=source,
        child_code=runner_exit.child_code if runner_exit else None,
        stdout_capture=found["stdout"],
        stderr_capture=found["stderr"],
        resources=_extended(_of(last, ResourceSummary), usage),
        events=events,
        jsonl=jsonl,
        runner_pid=runner_pid,
        diagnostics=diagnostics,
        stdout=stdout,
        stderr=stderr,
        usage=usage,
        output_discarded=output_discarded,
    )


def captures(
    events: list[Event], run_id: str | None = None, last: dict | None = None, kept: dict | None = None
) -> dict[str, CaptureInfo | None]:
    """Each stream's capture as the stream's last ``output_captured`` reports it (with the
    ranges its file kept: ``kept``'s, the runner service's word for a ring capture, else from
    the layout record of the run ``run_id``). ``last``: the events' ``latest``, when the caller
    has it."""
    event = _of(latest(events) if last is None else last, OutputCaptured)
    kept = kept or {}
    return {
        name: CaptureInfo.from_event(captured, run_id, kept.get(name))
        if event is not None and (captured := event.captured(name)) is not None
        else None
        for name in STREAMS
    }


def _extended(summary: ResourceSummary | None, usage: Usage | None) -> ResourceSummary | None:
    """The run's figures: the whole tree's, the usage's, in place of the stream's (which are the
    reference's, at its read point), with its extensions (CPU split, OOM kills, precise CPU,
    sources) among the ``extra`` fields, where the event keeps what the v1 schema does not
    name; the stream's own where no usage came."""
    if summary is None or usage is None:
        return summary
    extended = object.__new__(ResourceSummary)  # the same fields, as ``_built`` sets a whole set
    extended.__dict__.update(
        summary.__dict__, **usage.resource_summary(), extra={**(summary.extra or {}), **usage.extensions()}
    )
    return extended


def outcome(args, spec, report: dict, streams, *, jsonl: str | None) -> RunResult:
    """The result of a run from the runner service's reply (``processkit.service.serve``): its code, its failure
    (as the CLI's JSON envelope, in ``diagnostics``: ``diagnosed.said``), its usage and its stream's lines."""
    records = report.get("records")
    events = from_records(records) if records is not None else parse_lines(report.get("jsonl") or b"")
    started, ended = report.get("started_ns"), report.get("ended_ns")
    last = latest(events)
    found = captures(events, spec.run_id, last, report.get("kept"))
    outputs = streams.collect(report, found, started is not None)  # the reply's word: a stream can lose RunStarted
    if streams.scratch and streams.unread:  # its scratch capture's event: 0 bytes of a stream never read
        events = [event for event in events if not isinstance(event, OutputCaptured)]
    return build(
        args,
        report["code"],
        spec.run_id,
        events,
        jsonl=jsonl,
        diagnostics=said(report, spec.run_id),
        runner_pid=report.get("pid"),
        usage=_usage(report.get("usage")),
        stdout=outputs["stdout"],
        stderr=outputs["stderr"],
        duration=(ended - started) / 1e9 if started is not None and ended is not None else None,
        found=found,
        last=last,
        # Looked at only for a run whose child started and failed: the call costs nothing more.
        output_discarded=streams.dropped(spec) if report["code"] and RunStarted in last else "",
    )


def _usage(sent) -> Usage | None:
    """The reply's usage: ``Usage``'s values in its order (``service.request.Request.report``)."""
    return Usage(*sent) if type(sent) is tuple else sent


def parse_lines(data: bytes) -> list[Event]:
    """The typed events of a whole stream's bytes (a line that is no JSON object is skipped)."""
    from ..events.reader import LineSplitter

    splitter = LineSplitter()
    lines = splitter.feed(data) + splitter.end()
    return [from_json(record) for line in lines if (record := line.event) is not None]


def from_records(records: bytes) -> list[Event]:
    """The typed events of a stream the runner service held in memory and sent as the engine
    made them (pickled: no JSON encoded there, none parsed here), the same events its lines
    would give (the service sends a stream whose text JSON would change as its lines). Each is
    a record, or (``service.held_events.travelling``) a tuple of its type's name and its fields'
    values in the type's order, built as they are, with no record taken apart."""
    import pickle

    return [_built(item) if type(item) is tuple else from_json(item) for item in pickle.loads(records)]


def _built(item: tuple) -> Event:
    """The event a travelling tuple holds (``from_records``): its fields set as the constructor's
    own fast way sets a whole set of them, in one update of the new event's ``__dict__`` (the
    constructor's two Python calls were most of a result's cost); the values, fresh from the
    pickle, are this event's alone."""
    cls = EVENT_TYPES[item[0]]
    event = object.__new__(cls)
    event.__dict__.update(zip(cls._fields, item[1:], strict=True))
    return event


_EventT = TypeVar("_EventT", bound=Event)


def latest(events: list[Event]) -> dict[type, Event]:
    """Each type's last event in the stream, by type: one pass, where each type looked for
    (five or six a result) would walk the stream from its end again."""
    return {type(event): event for event in events}


def _of(last: dict[type, Event], kind: type[_EventT]) -> _EventT | None:
    """The stream's last event of type ``kind``, from its ``latest``."""
    return last.get(kind)  # type: ignore[return-value]


def _envelope(diagnostics: str) -> dict | None:
    """The runner's JSON error envelope (``--error-format json``) in its stderr, if any."""
    for line in reversed(diagnostics.splitlines()):
        if line.startswith("{"):
            try:
                value = loads(line)  # the line may be a child's, nested 100k deep
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("error_version") == 1:
                return value
    return None
