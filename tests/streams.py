"""What every run test asserts about a JSONL stream, and small helpers to drive runs.

``check_stream`` validates each line against the project's shipped schema and, when the
reference schemas are beside the repo, against the reference schema too (patched only where
the seed differs). It also checks the line encoding, the key order and the ordering invariants
of the stream, so a scenario test only has to assert what is special about its scenario.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import select
import sys
import time
from pathlib import Path

import pytest

from conftest import REFERENCE_SCHEMAS, SAFETY_NET, reference_schemas_present, run_cli
from processkit.events.validate import load_event_schema, validate_event

PY = sys.executable
ENDINGS = ("root_exited", "timeout", "output_overflow", "cancelled", "killed")

# The stream shapes of docs/events.md §4, as space-joined event names: a run whose child spawned
# (the ending is missing only when the race itself failed), a failed terminal hand-off, and
# the failures before spawn.
_SPAWNED = re.compile(
    r"run_started members_snapshot( members_snapshot)*(" + "|".join(" " + e for e in ENDINGS) + r")?"
    r"( limit_evidence)? resource_summary cleanup_started cleanup_finished( output_captured)? runner_exit"
)
_HANDOFF_FAILED = re.compile(
    r"container_failed( limit_evidence)? resource_summary cleanup_started cleanup_finished runner_exit"
)
_PRE_SPAWN = re.compile(r"runner_exit|(limit_hit )?container_failed runner_exit|spawn_failed runner_exit")
_SOURCE_CODES = {
    "timeout": 106,
    "cancelled": 107,
    "control_cancel": 108,
    "control_kill": 109,
    "output_overflow": 113,
    "spawn_error": 101,
    "container_error": 102,
    "internal": 104,
    "setup": 111,
}


@functools.cache
def reference_validator():
    """The reference's event schema, or None when ../shared/reference/schemas is absent.

    Patched only where the seed differs: each output_captured stream also reports bytes_seen
    and bytes_written.
    """
    if not reference_schemas_present():
        return None
    path = REFERENCE_SCHEMAS / "events-v1.schema.json"
    import jsonschema

    schema = json.loads(path.read_text(encoding="utf-8"))
    capture = schema["$defs"]["captureInfo"]
    for field in ("bytes_seen", "bytes_written"):
        capture["properties"][field] = {"$ref": "#/$defs/u64"}
        capture["required"].append(field)
    return jsonschema.Draft202012Validator(schema)


def reference_problems(event: dict) -> list[str]:
    validator = reference_validator()
    if validator is None:
        return []
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(event)]


def _key_order_problems(value, schema: dict, defs: dict, where: str) -> list[str]:
    """Objects list their keys in the schema's property order (docs/events.md §1: fixed order)."""
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    problems = []
    if isinstance(value, dict) and "properties" in schema:
        declared = [key for key in schema["properties"] if key in value]
        if list(value) != declared:
            problems.append(f"{where}: keys {list(value)} are not in the order {declared}")
        for key, item in value.items():
            if key in schema["properties"]:
                problems += _key_order_problems(item, schema["properties"][key], defs, f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problems += _key_order_problems(item, schema["items"], defs, f"{where}[{index}]")
    return problems


def check_stream(path, returncode: int | None = None) -> list[dict]:
    """Validate a finished stream in every way the contract allows; return its events."""
    raw = Path(path).read_bytes()
    assert raw.endswith(b"\n"), f"stream does not end with a complete line: {raw[-200:]!r}"
    schema = load_event_schema()
    events = []
    for number, line in enumerate(raw.decode("utf-8").split("\n")[:-1], start=1):
        event = json.loads(line)
        assert line == json.dumps(event, ensure_ascii=False, separators=(",", ":")), (
            f"line {number} is not compact: {line}"
        )
        assert list(event)[:3] == ["schema_version", "time", "event"], f"line {number}: envelope order {list(event)}"
        problems = [str(v) for v in validate_event(event)]
        problems += [f"reference: {p}" for p in reference_problems(event)]
        problems += _key_order_problems(event, schema["$defs"].get(event["event"], {}), schema["$defs"], "$")
        assert not problems, f"line {number} ({event['event']}): {problems}\n{line}"
        events.append(event)
    names = " ".join(e["event"] for e in events)
    shapes = (_SPAWNED, _HANDOFF_FAILED, _PRE_SPAWN)
    assert any(shape.fullmatch(names) for shape in shapes), f"bad event order: {names}"
    if events[0]["event"] == "run_started":
        assert events[1]["reason"] == "spawn" and all(
            e["reason"] == "interval" for e in by_name(events, "members_snapshot")[1:]
        )
        # Only a runner failure during the race (a failed wait) leaves no ending event.
        assert any(e["event"] in ENDINGS for e in events) or events[-1]["source"] == "internal", names
    _check_runner_exit(events[-1], returncode)
    return events


def _check_runner_exit(final: dict, returncode: int | None) -> None:
    if final["source"] == "child_exit":
        assert final["child_code"] == final["code"], final
    else:
        assert final["child_code"] is None and final["code"] == _SOURCE_CODES[final["source"]], final
    if returncode is not None:
        assert final["code"] == returncode, (final, returncode)


def by_name(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["event"] == name]


def one(events: list[dict], name: str) -> dict:
    found = by_name(events, name)
    assert len(found) == 1, f"expected one {name}, got {[e['event'] for e in events]}"
    return found[0]


def run_checked(tmp_path, *args, command, returncode: int | None = None, **kwargs):
    """``run --jsonl`` a command to completion; returns (completed process, checked events)."""
    jsonl = tmp_path / f"run-{os.urandom(4).hex()}.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, *args, "--", *command, **kwargs)
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    if returncode is not None:
        assert proc.returncode == returncode, (proc.returncode, proc.stderr.decode(errors="replace"))
    return proc, check_stream(jsonl, proc.returncode)


def python_child(code: str) -> list[str]:
    """A child program written in Python (the test's interpreter)."""
    return [PY, "-c", code]


def stderr_lines(proc) -> list[str]:
    return proc.stderr.decode("utf-8", "replace").splitlines()


def event_time(event: dict) -> float:
    """An event's wall-clock time in seconds since the epoch (millisecond resolution)."""
    moment = datetime.datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


def seconds_between(events: list[dict], first: str, second: str) -> float:
    return event_time(one(events, second)) - event_time(one(events, first))


def wait_until(condition, timeout: float = SAFETY_NET, what: str = "condition"):
    """Poll a condition no event announces (a process gone): its first truthy value, or an
    AssertionError naming ``what`` once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.01)


def read_to_the_end(fd: int) -> bytes:
    """All a terminal's master (or a pipe) gives until its every writer closed it (EOF, or EIO:
    a terminal whose every holder is gone)."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the last holder closed its end
            return data
        if not chunk:
            return data
        data += chunk


def read_until(source, wanted: bytes, what: str, timeout: float = SAFETY_NET) -> bytes:
    """What ``source`` (a pipe, a socket, a terminal's master: a file object or a descriptor)
    gives until ``wanted`` is among it, read as it comes (``os.read``: a file object's buffer keeps
    nothing back from a later ``communicate``); an AssertionError naming ``what`` when the source
    ends first (EOF, or a terminal whose every holder is gone: EIO) or nothing comes in time."""
    fd = source if isinstance(source, int) else source.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while wanted not in data:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"{what}: not within {timeout}s: {data!r}"
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:  # a non-blocking source another reader emptied first
            continue
        except OSError:  # EIO: a terminal's every holder gone
            chunk = b""
        assert chunk, f"{what}: ended first: {data!r}"
        data += chunk
    return data


WRITE_SYSCALLS = ("1", "64")  # write(2): its number on x86_64, on aarch64


def waits_in_write(process, *fds: int) -> bool:
    """Whether ``process`` came to wait in a ``write`` to one of ``fds`` (True, seen in
    ``/proc/PID/task/*/syscall``) before it ended (False); one or the other within the safety net."""

    def writing() -> bool:
        for task in Path(f"/proc/{process.pid}/task").iterdir():
            try:
                call = (task / "syscall").read_text().split()
            except OSError:  # the thread (or the process) ended meanwhile
                continue
            if len(call) > 1 and call[0] in WRITE_SYSCALLS and int(call[1], 16) in fds:
                return True
        return False

    return wait_until(lambda: "ended" if process.poll() is not None else writing(), what="an end or a write") is True


def cgroup_v2_dir(pid: int) -> str | None:
    """The cgroup v2 directory ``pid`` is in (found independently of the code under test); read
    it before the process goes away."""
    with open(f"/proc/{pid}/cgroup") as handle:
        own = next((line[3:].strip() for line in handle if line.startswith("0::")), None)
    with open("/proc/self/mountinfo") as handle:
        mount = next((f[4] for f in map(str.split, handle) if f[f.index("-") + 1] == "cgroup2"), None)
    return None if own is None or mount is None else mount + own


def reference_summary(events: list[dict], forced: bool) -> dict:
    """The stream's ``resource_summary``, held to the reference's rule: memory and CPU summed
    over the members live at its read point, so numbers on a cgroup v2 run's ``forced`` ending
    and null after a natural exit (no member left); every figure null, never a read error, on
    the process-group fallback. The whole tree's figures are the usage file's, the API's and a
    batch line's."""
    summary = one(events, "resource_summary")
    assert summary["read_error"] is False, summary
    live = forced and one(events, "run_started")["mechanism"] == "cgroup_v2"
    for field in ("peak_memory_bytes", "total_cpu_ms"):
        assert (summary[field] is not None) is live, (field, summary)
    if one(events, "run_started")["mechanism"] == "process_group":
        assert all(value is None for name, value in summary.items() if name in SUMMARY_FIGURES), summary
    return summary


SUMMARY_FIGURES = ("peak_memory_bytes", "total_cpu_ms", "io_read_bytes", "io_write_bytes", "peak_process_count")


def require_mechanism(events: list[dict], wanted: str) -> None:
    """Skip when the host cannot give a run a cgroup; the forced fallback must always hold."""
    got = one(events, "run_started")["mechanism"]
    if got != wanted and wanted != "process_group":
        pytest.skip(f"this host gives runs {got}, not {wanted}")
    assert got == wanted


# A crowd that ends once it has been snapshotted often enough, as a run's child argv: argv[1]
# ``sleep`` members, then it waits until one member's ``/proc/<pid>/stat`` has been read argv[2]
# times (inotify's IN_ACCESS) and exits argv[3]. Each snapshot reads it once, and reads made
# before an event was taken merge into one, so the count lags the snapshots (238 snapshots for
# 110 reads at a load of 44); only another process's read of it (a ``ps``) runs it ahead, which
# the counts asked for leave room for. Reads not seen within ``CROWD_DEADLINE`` seconds (a
# runner that stopped snapshotting) end it with ``CROWD_UNREAD``, which the test's exit-code
# check names, rather than hang it. The teardown ends the members. A test that needs many
# snapshots waits on the reads, not on a length of time.
CROWD_DEADLINE = 120
CROWD_UNREAD = 86
SNAPSHOTTED_CROWD = r"""
import ctypes, os, select, subprocess, sys, time
members, reads, code, deadline, unread = (int(arg) for arg in sys.argv[1:])
crowd = [subprocess.Popen(["sleep", "3737"]) for _ in range(members)]
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init1(os.O_CLOEXEC)
assert watch >= 0 and libc.inotify_add_watch(watch, f"/proc/{crowd[0].pid}/stat".encode(), 0x1) >= 0  # IN_ACCESS
seen, end = 0, time.monotonic() + deadline
while seen < reads:
    if not select.select([watch], [], [], max(0, end - time.monotonic()))[0]:
        sys.exit(unread)
    seen += len(os.read(watch, 4096)) // 16  # events with no name: 16 bytes each
sys.exit(code)
"""


def snapshotted_crowd(members: int, reads: int, code: int = 0) -> list[str]:
    """The argv of ``SNAPSHOTTED_CROWD``."""
    return [PY, "-c", SNAPSHOTTED_CROWD, str(members), str(reads), str(code), str(CROWD_DEADLINE), str(CROWD_UNREAD)]
