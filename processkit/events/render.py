"""One event as one line a person can read: when, how long into the run, and what happened in
words (durations, sizes, signals and outcomes spelled out).

The words need the documented shape, so only a schema-valid event gets them; anything else (a
newer runner's event or field, a damaged line) is shown field by field instead of being dropped.
Every fragment taken from the stream is terminal-safe (``text.sanitize``): the file is untrusted.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex

from ..text import killed_by, plural, sanitize
from .types import CapturedStream, Command, MemberInfo, Shutdown
from .validate import event_validator

NAME_WIDTH = 16
OFFSET_WIDTH = 9
MEMBERS_SHOWN = 5


def duration(ms: int) -> str:
    """``250ms``, ``1.5s``, ``2m 3s``, ``1h 5m``."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    hours, rest = divmod(ms // 1000, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if value]
    return " ".join(parts)


def size(count: int) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``12 MiB``."""
    if count < 1024:
        return f"{count} B"
    value, units = count / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f}".removesuffix(".0") + f" {units[0]}"


def _s(value) -> str:
    return sanitize(str(value))


def _grace(ms) -> str:
    return "no grace" if ms is None else f"grace {duration(ms)}"


# -- one function per documented event: the words for a schema-valid event -------------------
def _run_started(e: dict) -> str:
    pid = "no pid" if e["root_pid"] is None else f"pid {e['root_pid']}"
    command = Command.read(e["command"])
    assert command is not None  # a schema-valid run_started's
    if command.argv is not None:
        shown = "command " + " ".join(shlex.quote(_s(arg)) for arg in command.argv)
    elif command.argv_sha256 is not None:
        shown = f"command sha256 {command.argv_sha256[:12]}..."
    else:
        shown = "command redacted"
    if command.hint is not None:
        shown += f" (looks like {_s(command.hint)})"
    cwd = "an unknown directory" if e["cwd"] is None else _s(e["cwd"])
    labels = ", ".join(f"{_s(k)}={_s(v)}" for k, v in e["labels"].items())
    text = (
        f"run '{_s(e['run_id'])}' started: {pid} in {_s(e['mechanism'])} "
        f"(abrupt cleanup: {_s(e['abrupt_cleanup'])}), in {cwd}, {shown}"
    )
    return text + (f", labels {labels}" if labels else "")


def _members_snapshot(e: dict) -> str:
    when = "at spawn" if e["reason"] == "spawn" else "snapshot"
    members = e["members"]
    if e["read_error"] and not members:
        return f"{when}: the members could not be read"
    listed = [member for raw in members[:MEMBERS_SHOWN] if (member := MemberInfo.read(raw)) is not None]
    shown = [f"{_s(member.name or '?')} (pid {member.pid})" for member in listed]
    if len(members) > MEMBERS_SHOWN:
        shown.append(f"and {len(members) - MEMBERS_SHOWN} more")
    # read_error with members: a list cut to the line bound (events/fit.py), not the whole tree
    count = f"only {plural(len(members), 'member')} written" if e["read_error"] else plural(len(members), "member")
    return f"{when}: {count}" + (": " + ", ".join(shown) if shown else "")


def _root_exited(e: dict) -> str:
    outcome = e["outcome"]
    if outcome == "exited":
        return f"the child exited with code {e['code']}"
    if outcome == "signalled":
        return "the child was " + ("killed by an unknown signal" if e["signal"] is None else killed_by(e["signal"]))
    if outcome == "timed_out":
        return "waiting for the child timed out"
    return f"the child ended with an unknown outcome ({_s(outcome)})"


def _timeout(e: dict) -> str:
    if e["reason"] == "idle":
        return f"timed out: no output for {duration(e['timeout_ms'])} ({_grace(e['grace_ms'])})"
    return f"timed out: the run exceeded its {duration(e['timeout_ms'])} limit ({_grace(e['grace_ms'])})"


def _output_overflow(e: dict) -> str:
    return f"{_s(e['stream'])} went over its capture limit of {size(e['max_bytes'])} ({_grace(e['grace_ms'])})"


CANCEL_SOURCES = {
    "ctrl_c": "Ctrl-C (SIGINT)",
    "sigterm": "SIGTERM",
    "sighup": "SIGHUP",
    "control_cancel": "a control-plane cancel",
}


def _cancelled(e: dict) -> str:
    source = CANCEL_SOURCES.get(e["source"], _s(e["source"]))
    return f"cancelled by {source} ({_grace(e['grace_ms'])})"


def _killed(e: dict) -> str:
    return "hard-killed by a control-plane kill"


def _limit_hit(e: dict) -> str:
    detail = "" if e["detail"] is None else f": {_s(e['detail'])}"
    return f"the {_s(e['limit'])} limit cannot be enforced here{detail}"


def _limit_evidence(e: dict) -> str:
    return "limits: " + ", ".join(f"{axis} {_s(e[axis]).replace('_', ' ')}" for axis in ("memory", "processes", "cpu"))


RESOURCES = (
    ("peak_memory_bytes", "peak memory", size),
    ("total_cpu_ms", "CPU", duration),
    ("io_read_bytes", "read", size),
    ("io_write_bytes", "written", size),
    ("peak_process_count", "peak processes", str),
)


def _resource_summary(e: dict) -> str:
    if e["read_error"]:
        return "the resource figures could not be read"
    measured = [f"{label} {show(e[key])}" for key, label, show in RESOURCES if e[key] is not None]
    missing = [label for key, label, _ in RESOURCES if e[key] is None]
    if not measured:  # a natural exit (no member left to read), or a mechanism that keeps none
        return "no resource figures at this read point (the whole tree's: run --usage-file)"
    return "resources: " + ", ".join(measured) + (f" (not measured: {', '.join(missing)})" if missing else "")


def _cleanup_started(e: dict) -> str:
    if e["read_error"]:  # its 0 is no count
        return "teardown began with its members not counted (the member read failed)"
    return f"teardown began with {plural(e['members_before'], 'member')}"


def _cleanup_finished(e: dict) -> str:
    remaining = e["remaining"]
    if remaining == 0:
        text = "teardown finished: no member remains"
    else:
        pids = e["remaining_pids"]
        cut = f": {len(pids)} of {remaining} shown" if len(pids) < remaining else ""  # a list cut to the line bound
        text = f"teardown finished: {plural(remaining, 'member remains', 'members remain')} (pids {', '.join(map(str, pids))}{cut})"
    shutdown = Shutdown.read(e["shutdown"])
    if shutdown is not None:
        signal_word = {"sent": "SIGTERM sent", "unsupported": "no soft stop here", "failed": "SIGTERM failed"}
        stop = signal_word.get(shutdown.soft_signal or "", _s(shutdown.soft_signal))
        after = "" if shutdown.elapsed_ms is None else f" after {duration(shutdown.elapsed_ms)}"
        if shutdown.drained_within_grace:  # true of a no-grace ending too: the event names no grace
            stop += f", the tree drained{after}, no hard kill needed"
        elif shutdown.escalated:
            stop += f", then a hard kill{after}"
        else:
            stop += after
        text += f"; {stop}"
    if e["read_error"]:
        text += " (the member read failed)"
    if e["kill_error"]:
        text += " (the hard kill failed)"
    return text


def _captured(name: str, value: dict, run_id: str | None, cwd: str | None) -> str:
    stream = CapturedStream.read(name, value)
    assert stream is not None and stream.bytes_seen is not None  # a schema-valid event's
    flags = [word for flag, word in ((stream.truncated, "truncated"), (stream.write_error, "write error")) if flag]
    if flags and stream.bytes_written is not None:
        flags.append(_kept(stream, stream.bytes_seen, stream.bytes_written, run_id, cwd))
    return f"{name} {size(stream.bytes_seen)} to {_s(stream.path)} ({', '.join(flags) or 'complete'})"


def _kept(stream: CapturedStream, seen: int, written: int, run_id: str | None, cwd: str | None) -> str:
    """Which part the file holds, where a --capture-keep run recorded it; else only how much. A
    relative path is looked for from here, then from the run's ``cwd`` (a reader elsewhere: the
    record's run id and digest keep another run's from applying)."""
    from .kept import recorded

    spans = recorded(stream, run_id)
    if spans is None and cwd is not None and isinstance(stream.path, str) and not os.path.isabs(stream.path):
        spans = recorded(stream, run_id, os.path.join(cwd, stream.path))
    spans = spans or ()
    parts = [
        f"the first {size(end)}" if start == 0 else f"the last {size(end - start)}" if end == seen else None
        for start, end in spans
    ]
    if parts and None not in parts:
        return "kept " + " and ".join(str(part) for part in parts)
    return f"kept {size(written)}"


def _output_captured(e: dict, run_id: str | None = None, cwd: str | None = None) -> str:
    stdout, stderr = _captured("stdout", e["stdout"], run_id, cwd), _captured("stderr", e["stderr"], run_id, cwd)
    return f"captured {stdout}, {stderr}"


def _spawn_failed(e: dict) -> str:
    return f"the program could not be started: {_s(e['message'])}"


def _container_failed(e: dict) -> str:
    return f"the container failed ({_s(e['phase'])}): {_s(e['message'])}"


EXIT_SOURCES = {
    "child_exit": "the child's own result",
    "timeout": "a timeout",
    "cancelled": "a stop signal",
    "control_cancel": "a control-plane cancel",
    "control_kill": "a control-plane kill",
    "output_overflow": "a capture overflow",
    "spawn_error": "the program could not start",
    "container_error": "a containment failure",
    "internal": "an internal runner error",
    "setup": "a setup failure",
}


def _runner_exit(e: dict) -> str:
    # The machine words too (source=...), as the reference's rendering shows them: scripts grep them.
    source = _s(e["source"])
    return f"the runner exited with code {e['code']}: {EXIT_SOURCES.get(e['source'], source)} (source={source})"


WORDS = {
    "run_started": _run_started,
    "members_snapshot": _members_snapshot,
    "root_exited": _root_exited,
    "timeout": _timeout,
    "output_overflow": _output_overflow,
    "cancelled": _cancelled,
    "killed": _killed,
    "limit_hit": _limit_hit,
    "limit_evidence": _limit_evidence,
    "resource_summary": _resource_summary,
    "cleanup_started": _cleanup_started,
    "cleanup_finished": _cleanup_finished,
    "output_captured": _output_captured,
    "spawn_failed": _spawn_failed,
    "container_failed": _container_failed,
    "runner_exit": _runner_exit,
}


def _fields(event: dict) -> str:
    """The fallback: every field but the envelope, sorted, composites as compact JSON."""
    parts = []
    for key in sorted(k for k in event if k not in ("schema_version", "time", "event")):
        value = event[key]
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        parts.append(_s(key) + "=" + (_s(shown) if shown else '""'))  # an empty value stays visible
    return " ".join(parts)


_CANONICAL_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def timestamp(event: dict) -> datetime.datetime | None:
    value = event.get("time")
    if not isinstance(value, str):
        return None
    try:
        if _CANONICAL_TIME.fullmatch(value):  # the emitter's form: the C parser, many times faster
            return datetime.datetime.fromisoformat(value[:-1])
        return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return None


class Renderer:
    """Renders the events of one stream, timing each from the stream's first timestamp."""

    def __init__(self) -> None:
        self._origin: datetime.datetime | None = None
        self._run_id: str | None = None  # the stream's, for the capture layout record
        self._cwd: str | None = None  # its run_started's, where a relative capture path may lie

    def line(self, event: dict) -> str:
        moment = timestamp(event)
        if self._origin is None:
            self._origin = moment
        offset = "" if moment is None or self._origin is None else _offset(moment - self._origin)
        name = event.get("event")
        words = WORDS.get(name) if isinstance(name, str) and event_validator().is_valid(event) else None
        if name == "run_started" and words is not None:
            self._run_id, self._cwd = event["run_id"], event["cwd"]
        if words is _output_captured:
            text = _output_captured(event, self._run_id, self._cwd)
        else:
            text = words(event) if words is not None else _fields(event)
        when = _s(event["time"]) if moment is not None else "-"
        return f"{when}  {offset:<{OFFSET_WIDTH}}  {_s(name) if isinstance(name, str) else '-':<{NAME_WIDTH}}  {text}".rstrip()


def _offset(delta: datetime.timedelta) -> str:
    ms = round(delta.total_seconds() * 1000)
    return ("+" if ms >= 0 else "-") + duration(abs(ms))
