"""``events``: read a run's JSONL back, rendered for people, passed through byte for byte
(``--json``) or checked against the shipped event schema (``--validate``); ``--follow`` keeps
reading until the run's end (docs/events.md).

``--validate`` decides its exit code by the lines alone, as the reference does: 0 when every
line conforms, 114 when any does not. What only the whole stream can get wrong (no single
``runner_exit``, ``run_started`` not first, two endings) is reported as a note on stderr;
``--strict-stream`` (an extension) makes those findings count too.

Read-only like ``list``: the registry is opened read-only, only to find the stream
(``--run-id``) and, when following, to ask whether anything can still be writing it. No runner
is ever contacted. The stream is untrusted input (see ``events.reader``).
"""

from __future__ import annotations

import os
import stat
import time

from ..bounded import InputError
from ..diagnostics import note
from ..errors import Failure, Kind, setup_failure, usage
from ..events.follow import READ_CHUNK, Follower, open_stream
from ..events.reader import Line
from ..events.validate import validate_event
from ..loop import Loop
from ..pathtrust import ForeignStream
from ..registry import scan
from ..registry.lock import Health
from ..registry.lookup import a_batch
from ..registry.records import no_stream_of_its_own
from ..text import plural, sanitize
from ..grammar import values
from . import output, targets
from .parsing import Once, OnceFlag, OncePath, Parser

FOLLOW_POLL_SECONDS = 0.25
SETTLE_SECONDS = 0.5  # a runner unregisters just before its last line: give that line time
FIFO_WRITER_SECONDS = 5.0  # how long a FIFO waits for its first writer (a run's client connects as long)
REPORT_LIMIT = 1000  # a violation's text is capped like any other terminal output


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli events",
        usage="processkit-cli events (--run-id <ID> | --file <PATH>) [--json | --validate [--strict-stream]] [--follow]",
        description="Read a run's JSONL lifecycle events back.",
    )
    parser.add_argument("--run-id", action=Once, metavar="ID", help="the stream its registry record names")
    parser.add_argument("--file", action=OncePath, metavar="PATH", help="a stream by path (also a pipe, /dev/stdin)")
    parser.add_argument("--json", action=OnceFlag, help="the lines exactly as written")
    parser.add_argument(
        "--validate", action=OnceFlag, help="check every line against the event schema; 114 if any does not conform"
    )
    parser.add_argument(
        "--strict-stream",
        action=OnceFlag,
        help="with --validate: the whole stream's findings (one runner_exit, last; run_started first; "
        "at most one ending) also make it 114 (an extension)",
    )
    parser.add_argument("--follow", action=OnceFlag, help="keep reading until runner_exit or the run is gone")
    return parser


PARSERS = {"events": build_parser}  # command -> its parser (probe reads its flags from it)


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    if args.json and args.validate:
        raise usage("the argument '--json' cannot be used with '--validate'")
    if args.strict_stream and not args.validate:
        raise usage("the argument '--strict-stream' requires '--validate'")
    if args.run_id is not None and args.file is not None:
        raise usage("the argument '--run-id <ID>' cannot be used with '--file <PATH>'")
    if args.file is not None:
        target = Target(args.file, None)
    else:
        if args.run_id is None:
            args.run_id = targets.missing_required("--run-id <ID>|--file <PATH>")
        invocation.run_id = values.parse_run_id(args.run_id)
        target = Target.by_run_id(invocation.run_id)
    consumer = (
        Validation(strict_stream=args.strict_stream) if args.validate else PassThrough() if args.json else Rendering()
    )
    Reading(target, consumer, follow=args.follow).run()
    consumer.finish()
    return 0


# -- which stream, and whether anything can still be writing it ---------------------------------
class Target:
    def __init__(self, path: str, run_id: str | None):
        self.path = path
        self.run_id = run_id

    @classmethod
    def by_run_id(cls, run_id: str) -> Target:
        """The one stream the records named ``run_id`` publish, whatever their health: a run
        that ended but was not reaped still leads to its complete stream."""
        view = scan.read(Kind.REGISTRY_SETUP)  # a live batch's own record too: said as a batch
        matches = [entry for entry in (*view.entries, *view.batches) if entry.record.run_id == run_id]
        cannot = f"cannot read events for run `{run_id}`"
        if not matches:
            raise Failure(
                Kind.NOT_FOUND,
                f"{cannot}: no registry record names it — a run that exits cleanly deletes its own record, so read "
                "its stream directly with `--file <events.jsonl>`",
            )
        locators = sorted({entry.record.jsonl for entry in matches if entry.record.jsonl is not None})
        if not locators:
            why = (
                a_batch(run_id)
                if any(entry.record.batch_records is not None for entry in matches)
                else "the run was started without `--jsonl`, so it has no lifecycle stream to read"
            )
            raise Failure(Kind.NOT_FOUND, f"{cannot}: its registry record publishes no JSONL stream — {why}")
        if len(locators) > 1:
            raise Failure(
                Kind.AMBIGUOUS_RUN_ID,
                f"{cannot}: ambiguous run id — {len(matches)} registered records name {len(locators)} different "
                "event streams; read the one you mean directly with `--file <events.jsonl>`",
            )
        if all(entry.record.jsonl_held for entry in matches if entry.record.jsonl is not None):
            # another run's file: never that run's events shown as this id's own
            raise Failure(Kind.NOT_FOUND, f"{cannot}: {no_stream_of_its_own(locators[0])}")
        return cls(locators[0], run_id)

    def still_written(self) -> bool:
        """Whether a record that is not confirmed stale still names this run or this stream."""
        wanted = os.path.realpath(self.path)
        for entry in scan.read(Kind.REGISTRY_SETUP).entries:
            record = entry.record
            if self.run_id is not None:
                ours = record.run_id == self.run_id
            else:
                ours = record.stream is not None and os.path.realpath(record.stream) == wanted
            if ours and entry.health() is not Health.STALE:
                return True
        return False

    def gone_note(self, replaced: bool) -> str:
        # The reference's wording ("without a terminal `runner_exit` event", the run id in
        # backticks): scripts and its tests match on it.
        if replaced:  # an extension (docs/differences.md), in the reference's frame
            return (
                "the stream ends without a terminal `runner_exit` event: the file was emptied under the reader "
                "(a new run writes its own stream there), so the run followed writes nothing more to it"
            )
        subject = (
            f"run `{self.run_id}` is no longer live"
            if self.run_id
            else "no live registry record still publishes this stream"
        )
        return (
            f"the stream ends without a terminal `runner_exit` event: {subject}, so nothing more is coming — "
            "a runner killed abruptly never gets to write its terminal event"
        )


# -- reading: every read hands complete lines to the consumer ------------------------------------
class Reading:
    """Drives one read of the stream on the loop, through the one follower (``events.follow``,
    which says when the stream is over).

    A regular file is read to its current end (a part at a time, ``follow.DRAIN_BYTES``), and
    under --follow again every FOLLOW_POLL_SECONDS. A pipe, FIFO or socket (/dev/stdin) is read
    as it becomes readable, with no deadline, until EOF: a stream says itself when it is over.
    A FIFO no writer opened says nothing (no poll wakes for it, so it waited for ever): every
    FOLLOW_POLL_SECONDS it is read once (``_look_for_writer``), and one that has had no writer
    for FIFO_WRITER_SECONDS (under --follow: and no live run names it) is an unreadable stream
    (111), never an empty one (``--validate`` would pass it). A runner refuses a FIFO no one
    reads, so a reader comes first and waits for the run to start: seconds on a loaded host.
    A device (``/dev/zero``, a terminal) is refused (``bounded``), ``/dev/null`` excepted.
    """

    def __init__(self, target: Target, consumer, *, follow: bool):
        self._target = target
        self._consumer = consumer
        try:
            fd = open_stream(target.path, target.run_id)  # ``--file`` reads what it names, whoever's
        except ForeignStream as exc:
            raise self._refused(exc) from None
        except OSError as exc:
            raise self._unreadable("open", exc) from None
        except InputError as exc:
            raise Failure(Kind.SETUP, str(exc)) from None
        self._fd = fd
        self._follow = follow
        self._writerless_since = time.monotonic()  # a FIFO's: since when no read found a writer
        writer_gone = (lambda: not target.still_written()) if follow else None
        self._follower = Follower(target.path, writer_gone, settle=SETTLE_SECONDS, fd=fd, run_id=target.run_id)

    def _refused(self, exc: OSError) -> Failure:
        """A stream read by run id that is not the run's to show (another user's, another run's):
        one wording wherever it is found, the stream named once, in the refusal's own words."""
        return setup_failure(f"cannot read events for run `{self._target.run_id}`", exc)

    def _unreadable(self, action: str, exc: OSError) -> Failure:
        return setup_failure(f"could not {action} the events stream `{self._target.path}`", exc)

    def run(self) -> None:
        loop = Loop()
        try:
            if not self._is_stream(loop):
                self._poll(loop)
            loop.run_until(lambda: self._follower.done)
        except ForeignStream as exc:  # a pipe's refused as its lines come (a file's: ``_poll``)
            raise self._refused(exc) from None
        finally:
            loop.close()
            os.close(self._fd)
        if self._follower.gone:
            note(self._target.gone_note(self._follower.replaced))  # bare, as the reference prints it

    def _is_stream(self, loop: Loop) -> bool:
        mode = os.fstat(self._fd).st_mode
        if stat.S_ISREG(mode):
            return False
        try:
            loop.add_reader(self._fd, self._on_readable)
        except PermissionError:
            return False  # not pollable (/dev/null): reads never wait, like a file's
        if stat.S_ISFIFO(mode):
            loop.call_later(FOLLOW_POLL_SECONDS, lambda: self._look_for_writer(loop))
        return True

    def _look_for_writer(self, loop: Loop) -> None:
        """Read a FIFO once: what came is taken; an end of file with no writer yet (no poll
        says it) makes the stream unreadable (111) once it has lasted FIFO_WRITER_SECONDS and,
        under --follow, no live run names the stream."""
        if self._follower.done:
            return
        if self._read_once() == b"":
            if self._follow and self._target.still_written():
                self._writerless_since = time.monotonic()
            elif time.monotonic() - self._writerless_since >= FIFO_WRITER_SECONDS:
                raise Failure(  # never an empty stream: --validate's 0 lied
                    Kind.SETUP,
                    f"could not read the events stream `{self._target.path}`: no process opened the FIFO "
                    f"for writing within {FIFO_WRITER_SECONDS:g} s",
                )
        loop.call_later(FOLLOW_POLL_SECONDS, lambda: self._look_for_writer(loop))

    def _on_readable(self) -> None:
        if self._read_once() == b"":  # its writers gone: the stream's end
            self._take(self._follower.feed(b""))

    def _read_once(self) -> bytes | None:
        """One read of a stream that is no file, its bytes taken: ``b""`` at an end of file (on
        a FIFO, also while no writer has opened it), None when a writer holds it and nothing
        came. Anything but an end says a writer is there: a FIFO's look for one counts from
        now, not from before it."""
        try:
            data = os.read(self._fd, READ_CHUNK)
        except BlockingIOError:  # a writer holds it: its bytes wake the reader
            data = None
        except OSError as exc:
            raise self._unreadable("read", exc) from None
        if data != b"":
            self._writerless_since = time.monotonic()
        if data:
            self._take(self._follower.feed(data))
        return data

    def _poll(self, loop: Loop) -> None:
        try:
            lines = self._follower.read()
        except ForeignStream as exc:
            raise self._refused(exc) from None
        except OSError as exc:
            raise self._unreadable("read", exc) from None
        self._take(lines)
        if not self._follower.done:
            loop.call_later(0 if self._follower.more else FOLLOW_POLL_SECONDS, lambda: self._poll(loop))

    def _take(self, lines: list[Line]) -> None:
        if lines:
            for line in lines:
                if line.replaced:  # replaced and reported (the reference's contract), whatever the mode
                    _notice(line, f"not valid UTF-8 (byte {line.replaced}), replaced with U+FFFD")
            self._consumer.take(lines)


def _notice(line: Line, reason: str) -> None:
    """A line's problem (one that cannot be shown as an event, or whose bytes not UTF-8 were
    replaced) goes to stderr, so stdout stays the stream."""
    note(f"line {line.number}: {reason}: {sanitize(line.text)}")  # bare, as the reference prints it


# -- the three ways to consume lines -------------------------------------------------------------
class Rendering:
    """One readable line per event (``events.render``)."""

    def __init__(self) -> None:
        from ..events.render import Renderer

        self._renderer = Renderer()
        self._shown = 0

    def take(self, lines: list[Line]) -> None:
        shown = []
        for line in lines:
            event = line.event
            if event is None:
                _notice(line, line.problem or "not a JSON object")
            else:
                shown.append(self._renderer.line(event))
        if shown:
            output.lines(shown)
            self._shown += len(shown)

    def finish(self) -> None:
        if not self._shown:
            output.lines(["no events in the stream"])


class PassThrough:
    """``--json``: every JSON line byte for byte as it was written, bytes that are not UTF-8
    included (they are reported, ``Reading._take``; the line is JSON once they are replaced)."""

    def take(self, lines: list[Line]) -> None:
        passed = []
        for line in lines:
            if line.problem is not None:
                _notice(line, line.problem)
            else:
                passed.append(line.raw + b"\n")
        if passed:
            output.raw(b"".join(passed))

    def finish(self) -> None:
        return None


class Validation:
    """``--validate``: every line against the shipped schema, then the whole stream's
    invariants; a report on stdout, and 114 when a line (or, strictly, the stream) is wrong."""

    def __init__(self, *, strict_stream: bool) -> None:
        from ..events.stream import StreamChecks

        self._stream = StreamChecks()
        self._strict_stream = strict_stream
        self._checked = 0
        self._invalid = 0

    def take(self, lines: list[Line]) -> None:
        report = []
        for line in lines:
            self._checked += 1
            self._stream.add(line)
            if line.problem is not None:
                problems = [f"{line.problem}: {sanitize(line.text)}"]
            else:
                problems = [sanitize(str(violation), REPORT_LIMIT) for violation in validate_event(line.value)]
            if problems:
                self._invalid += 1
                report += [f"line {line.number}: {problem}" for problem in problems]
        if report:
            output.lines(report)

    def finish(self) -> None:
        stream = self._stream.problems()
        noun = "line" if self._checked == 1 else "lines"
        if not self._strict_stream:
            for problem in stream:
                note(f"processkit-cli: note: stream: {problem}")
            stream = []
        if not self._invalid and not stream:
            output.lines([f"checked {self._checked} {noun}: all valid"])
            return
        summary = f"checked {self._checked} {noun}: {self._checked - self._invalid} valid, {self._invalid} invalid"
        if stream:
            summary += f"; {plural(len(stream), 'stream problem')}"
        output.lines([f"stream: {problem}" for problem in stream] + [summary])
        if self._invalid:
            message = (
                f"{self._invalid} of {self._checked} checked {noun} do not conform to this binary's event schema "
                "(`probe --print-schema`)"  # the reference's words, "do" whatever the count
            )
        else:
            message = f"the stream as a whole is not well-formed (--strict-stream): {'; '.join(stream)}"
        raise Failure(Kind.EVENTS_INVALID, message)
