"""Reading a stream into a :class:`~processkit.report.model.Run`: each line parsed and checked
against the shipped schema, each event folded into the run's facts by ``Builder``.

Nothing here raises on content: a line that is not a documented event becomes a note of what is
missing or wrong (the page says it instead of guessing).
"""

from __future__ import annotations

import datetime
import os
import shlex

from ..bounded import REPORT_ENTRY, REPORT_STREAM, InputError, blocking
from ..capture_layout import STREAMS
from ..errors import Failure, Kind
from ..events import render
from ..events.reader import Line, LineSplitter
from ..events.stream import ENDINGS, StreamChecks
from ..events.types import CapturedStream, Command, MemberInfo
from ..events.validate import event_validator
from ..summary_line import oom_words
from ..text import plural
from ..userfiles import open_judged
from .arrange import nested, stop_words
from .model import NO_RUNNER_EXIT, NOTES_SHOWN, READ_CHUNK, UNCOUNTED, Moment, Run, SeenProcess, shown


def read_lines(path: str, *, regular: bool = False) -> list[Line]:
    """Every line of the stream at ``path``, within ``bounded.REPORT_STREAM`` (a page holds the
    whole stream); an unreadable path, or one over a bound, is a setup Failure. ``regular``: a
    directory's entry, which must be a regular file (a FIFO or a link to ``/dev/zero`` planted
    there never is)."""
    splitter = LineSplitter()
    lines: list[Line] = []
    total = REPORT_STREAM.total
    assert total is not None
    read = 0
    try:
        limits = REPORT_ENTRY if regular else REPORT_STREAM
        with os.fdopen(blocking(open_judged(path, limits)), "rb") as file:
            while chunk := file.read(READ_CHUNK):
                read += len(chunk)
                if read > total:
                    raise InputError(
                        f"the events stream {shown(path)} is larger than {total >> 20} MiB, the most a report reads"
                    )
                lines += splitter.feed(chunk)
    except InputError as exc:
        raise Failure(Kind.SETUP, str(exc)) from None
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read the events stream {shown(path)}: {exc.strerror}") from None
    return lines + splitter.end()


def load(path: str, anchor: str, *, live: bool = False, regular: bool = False) -> Run:
    """The Run of the stream at ``path``; a file holding no event at all is invalid input (114).

    ``live`` says a registered runner still writes the stream, which explains a missing end;
    ``regular`` as for ``read_lines``."""
    lines = read_lines(path, regular=regular)
    if not any(_is_event(line) for line in lines):
        what = "it is empty" if not lines else "no line is a JSONL event"
        if lines and isinstance(lines[0].value, dict) and {"id", "run_id", "exit_code"} <= lines[0].value.keys():
            what += f" (a batch's summary.jsonl: its lines are jobs; report {shown(os.path.dirname(path) or '.')} draws the batch)"
        raise Failure(Kind.EVENTS_INVALID, f"{shown(path)} is not a processkit event stream: {what}")
    return Builder(Run(source=shown(path), anchor=anchor, path=path, live=live)).build(lines)


def add_usage(run: Run, record: dict) -> None:
    """``report --usage-file``: the whole tree's figures (``run --usage-file``'s JSON) in place of
    the stream's summary, those the stream cannot hold beside them, and an OOM kill named in the
    ending sentence."""
    from ..containment.accounting import Usage

    usage = Usage.from_json(record)
    _figures(run, usage.resource_summary())  # the whole tree's, in place of the stream's
    for label, value in (("user CPU", usage.user_cpu_ms), ("system CPU", usage.system_cpu_ms)):
        if value is not None:
            run.resources.append((label, f"{value} ms"))
    if usage.oom_kills is not None:
        run.resources.append(("OOM kills", str(usage.oom_kills)))
    if usage.oom_kills:
        run.ending += f"; {oom_words(usage.oom_kills, 'its')}"
    counters = sorted(set(usage.sources.values()))
    if counters:
        run.resources.append(("counters", shown("; ".join(counters), 600)))


def _figures(run: Run, summary: dict) -> None:
    """The run's figures, from a ``resource_summary`` (the stream's: the reference's, at its read
    point) or a usage file's (the whole tree's, ``add_usage``)."""
    if not summary["read_error"]:
        run.resources = [
            (label, show(summary[key]) if summary[key] is not None else "not measured")
            for key, label, show in render.RESOURCES
        ]
        run.peak_memory = summary["peak_memory_bytes"]
        run.cpu_ms = summary["total_cpu_ms"]
    else:
        run.resources = [("resources", "the figures could not be read")]


def _is_event(line: Line) -> bool:
    event = line.event
    return event is not None and isinstance(event.get("event"), str) and "schema_version" in event


# -- building ------------------------------------------------------------------------------------
# Each documented event type against its own definition: the same verdict as the whole
# schema's oneOf (the types differ in their ``event`` constant), without trying all sixteen.
_TYPE_SCHEMAS = {name: {"$ref": f"#/$defs/{name}"} for name in render.WORDS}


def _documented(event: dict, name: str, checked_members: set) -> bool:
    """Whether ``event`` is a schema-valid ``name``. A member listed, unchanged, in many
    snapshots of one stream is checked once: snapshots are most of a long run's lines."""
    schema = _TYPE_SCHEMAS.get(name)
    if schema is None:
        return False
    members = event.get("members") if name == "members_snapshot" else None
    if not isinstance(members, list):
        return event_validator().is_valid(event, schema)
    keys = [_member_key(member) for member in members]
    fresh = [member for member, key in zip(members, keys) if key is None or key not in checked_members]
    if not event_validator().is_valid({**event, "members": fresh}, schema):
        return False
    checked_members.update(key for key in keys if key is not None)
    return True


def _member_key(member) -> tuple | None:
    """A hashable identity of one listed member as written, or None (then it is always checked)."""
    if not isinstance(member, dict):
        return None
    key = tuple((name, type(value), value) for name, value in member.items())  # true is not 1
    try:
        hash(key)
    except TypeError:
        return None
    return key


KINDS = {
    "run_started": "start",
    "members_snapshot": "snapshot",
    "limit_hit": "limit",
    "limit_evidence": "limit",
    "resource_summary": "other",
    "cleanup_started": "teardown",
    "cleanup_finished": "teardown",
    "output_captured": "other",
    "spawn_failed": "failure",
    "container_failed": "failure",
    "runner_exit": "exit",
} | {name: "ending" for name in ENDINGS}


class Builder:
    """Walks the lines once, in order, filling one Run."""

    def __init__(self, run: Run):
        self.run = run
        self.valid: dict[str, dict] = {}  # the last schema-valid event of each type
        self.snapshots: list[tuple[int, list[MemberInfo]]] = []
        self.origin: datetime.datetime | None = None  # the first event's time
        self.last_ms = 0
        self.invalid: list[str] = []
        self.checks = StreamChecks()
        self.checked_members: set = set()
        self.member_views: dict[tuple, MemberInfo | None] = {}

    def build(self, lines: list[Line]) -> Run:
        for line in lines:
            self.checks.add(line)
            event = line.event
            if event is None:
                self.invalid.append(f"line {line.number}: {line.problem or 'not a JSON object'}")
                continue
            moment = render.timestamp(event)
            offset: int | None = None
            if moment is not None:
                if self.origin is None:
                    self.origin = moment
                # A clock stepped back places an event at the start, never before it.
                offset = max(0, int((moment - self.origin).total_seconds() * 1000))
                self.last_ms = max(self.last_ms, offset)
            name = event.get("event")
            name = name if isinstance(name, str) else "?"
            if not _documented(event, name, self.checked_members):
                self.invalid.append(f"line {line.number}: a {shown(name, 40)} event that does not match the schema")
                self.run.moments.append(Moment(offset, shown(name, 40), "(not read: invalid)", "other"))
                continue
            self.valid[name] = event
            if name == "members_snapshot" and not event["read_error"]:
                self.snapshots.append((offset or 0, [self._member(raw) for raw in event["members"]]))
            self.run.moments.append(
                Moment(offset, name, shown(render.WORDS[name](event), 400), KINDS.get(name, "other"))
            )
        self._header()
        self._exit()
        self._resources()
        self._captured()
        self._tree()
        self.run.ending = self._ending()
        self._missing()
        return self.run

    def _member(self, raw: dict) -> MemberInfo:
        """A schema-valid member's typed view, read once however many snapshots list it unchanged."""
        key = (raw["pid"], raw["ppid"], raw["name"], raw["start_time"])
        view = self.member_views.get(key)
        if view is None:
            view = self.member_views[key] = MemberInfo.read(raw)
        return view  # type: ignore[return-value]  # a valid member is an object

    def _header(self) -> None:
        started = self.valid.get("run_started")
        if started is None:
            return
        run = self.run
        run.run_id = shown(started["run_id"])
        run.labels = [(shown(key), shown(value)) for key, value in started["labels"].items()]
        run.mechanism = shown(started["mechanism"])
        run.cwd = None if started["cwd"] is None else shown(started["cwd"])
        run.root_pid = started["root_pid"]
        command = Command.read(started["command"])
        assert command is not None  # a schema-valid run_started carries one
        if not command.redacted and command.argv is not None:
            run.command = shown(" ".join(shlex.quote(arg) for arg in command.argv), 600)
        run.fingerprint = command.argv_sha256
        run.hint = None if command.hint is None else shown(command.hint)

    def _exit(self) -> None:
        exit_event = self.valid.get("runner_exit")
        self.run.duration_ms = self.last_ms if self.origin is not None else None
        if exit_event is not None:
            self.run.exit_code = exit_event["code"]
            self.run.exit_source = shown(exit_event["source"])
            self.run.child_code = exit_event["child_code"]

    def _resources(self) -> None:
        summary = self.valid.get("resource_summary")
        if summary is not None:
            _figures(self.run, summary)
        evidence = self.valid.get("limit_evidence")
        if evidence is not None:
            self.run.limits = [
                (axis, shown(evidence[axis]).replace("_", " ")) for axis in ("memory", "processes", "cpu")
            ]

    def _captured(self) -> None:
        captured = self.valid.get("output_captured")
        if captured is None:
            return
        for name in STREAMS:
            stream = CapturedStream.read(name, captured[name])
            if stream is not None:
                self.run.captured.append(stream)

    def _tree(self) -> None:
        """One SeenProcess per process seen (pid and start token), nested by parent, each lasting
        from the snapshot that first saw it until the snapshot that no longer did (or the
        ending, when the last snapshot still held it)."""
        run = self.run
        run.snapshots = len(self.snapshots)
        if not self.snapshots:
            return
        ending = self._ending_ms()
        seen: dict[tuple, SeenProcess] = {}
        times = [offset for offset, _ in self.snapshots] + [ending]
        for index, (offset, members) in enumerate(self.snapshots):
            for raw in members:
                key = (raw.pid, raw.start_time)
                member = seen.get(key)
                if member is None:
                    member = seen[key] = SeenProcess(
                        pid=raw.pid,
                        ppid=raw.ppid,
                        name=shown(raw.name or "?", 60),
                        depth=0,
                        first_ms=offset,
                        until_ms=offset,
                    )
                member.until_ms = max(times[index + 1], offset)
                member.name = shown(raw.name or "?", 60)  # the latest: an exec renames a process
        cleanup = self.valid.get("cleanup_started")
        ended = self.valid.get("root_exited")
        if ended is not None and cleanup is not None:
            run.outlived_count = None if cleanup["read_error"] else cleanup["members_before"]  # its 0: no count
        outlived = self._outlived(run.outlived_count)
        remaining = set(self.valid.get("cleanup_finished", {}).get("remaining_pids", []))
        for member in seen.values():
            member.is_root = member.pid == run.root_pid
            member.outlived_root = member.pid in outlived and not member.is_root
            member.survived_teardown = member.pid in remaining
        run.members = nested(list(seen.values()))

    def _outlived(self, count: int | None) -> set[int]:
        """The pids shown as having outlived the root, only where the stream proves which: the
        last snapshot taken once the root was gone (a run with --snapshot-interval has one), or
        a last snapshot whose other members are exactly as many as outlived it. Otherwise none
        is marked, and the sentence alone gives the count."""
        if not count:
            return set()
        last = {raw.pid for raw in self.snapshots[-1][1]}
        if self.run.root_pid not in last:
            return last
        others = last - {self.run.root_pid}
        return others if len(others) == count else set()

    def _ending_ms(self) -> int:
        for moment in self.run.moments:
            if moment.kind in ("ending", "teardown", "exit") and moment.offset_ms is not None:
                return moment.offset_ms
        return self.last_ms

    def _ending(self) -> str:
        """How the run ended, in one plain sentence."""
        v = self.valid
        forced = next((v[name] for name in ("timeout", "cancelled", "output_overflow") if name in v), {})
        stop = stop_words(v.get("cleanup_finished"), forced.get("grace_ms"))
        if "timeout" in v:
            e = v["timeout"]
            if e["reason"] == "idle":
                first = f"timed out after {render.duration(e['timeout_ms'])} without output"
            else:
                first = f"timed out after {render.duration(e['timeout_ms'])}"
        elif "cancelled" in v:
            source = v["cancelled"]["source"]
            first = f"cancelled by {render.CANCEL_SOURCES.get(source, shown(source))}"
        elif "killed" in v:
            first = "hard-killed by a control-plane kill; no grace was given"
            stop = ""
        elif "output_overflow" in v:
            e = v["output_overflow"]
            first = f"stopped because {shown(e['stream'])} went over its {render.size(e['max_bytes'])} capture limit"
        elif "root_exited" in v:
            first = render.WORDS["root_exited"](v["root_exited"])
            count = self.run.outlived_count
            if count is None:
                first += f"; {UNCOUNTED}"
            elif count:
                first += f"; {plural(count, 'process', 'processes')} outlived it and {'was' if count == 1 else 'were'} stopped in teardown"
        elif "spawn_failed" in v:
            first = f"the program could not be started: {shown(v['spawn_failed']['message'])}"
        elif "container_failed" in v:
            e = v["container_failed"]
            first = f"the container failed ({shown(e['phase'])}): {shown(e['message'])}"
        elif self.run.exit_source == "setup":
            first = "the run failed during setup, before anything was started"
        else:
            first = "no ending was recorded"
        sentence = first + (f"; {stop}" if stop else "")
        if self.run.exit_code is None:
            sentence += "; the runner's exit was not recorded"
        else:
            sentence += f"; the runner exited {self.run.exit_code}"
        return sentence[:1].upper() + sentence[1:] + "."

    def _missing(self) -> None:
        run = self.run
        if run.exit_code is None:
            if run.live:
                run.missing.append("the stream has no runner_exit yet: a registered runner is still writing it")
            else:
                run.missing.append(NO_RUNNER_EXIT)
        if "run_started" not in self.valid and run.exit_source not in ("setup", "spawn_error", "container_error"):
            run.missing.append("no valid run_started: the run id, labels and command are unknown")
        run.missing += [
            f"stream: {problem}" for problem in self.checks.problems() if "runner_exit events" not in problem
        ]
        run.missing += self.invalid[:NOTES_SHOWN]
        if len(self.invalid) > NOTES_SHOWN:
            run.missing.append(f"and {len(self.invalid) - NOTES_SHOWN} more invalid lines")
