"""Hand-made event streams for the report tests: hostile values, damaged files."""

from __future__ import annotations

import json

HOSTILE_ID = '<script>alert("id")</script>'
HOSTILE_LABEL = "<img src=x onerror=alert(1)>"
HOSTILE_MESSAGE = "no such program: \x1b[31m<b>bold</b>\x1b]0;pwned\x07"


def event(name: str, time: str = "2026-01-01T00:00:00.000Z", **fields) -> dict:
    return {"schema_version": 1, "time": time, "event": name, **fields}


def write_stream(path, events: list[dict], tail: bytes = b"") -> None:
    """``events`` as JSONL lines, then ``tail`` as raw bytes (a damaged or unfinished line)."""
    body = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events)
    path.write_bytes(body.encode("utf-8") + tail)


def started(run_id: str = "run-hand", labels: dict | None = None, argv: list[str] | None = None) -> dict:
    return event(
        "run_started",
        run_id=run_id,
        labels=labels or {},
        root_pid=4242,
        mechanism="process_group",
        abrupt_cleanup="direct_child_only",
        cwd="/srv/<b>build</b>",
        command={"redacted": argv is None, "argv": argv, "argv_sha256": "ab" * 32, "hint": None},
    )


def cleaned(time: str) -> dict:
    """A teardown's end that left no member and had nothing to report."""
    quiet = {"soft_terminate": None, "shutdown": None, "read_error": False, "kill_error": False}
    return event("cleanup_finished", time, remaining=0, remaining_pids=[], **quiet)


def hostile_stream(path) -> None:
    """A complete stream whose every free-text field holds markup, script or terminal escapes."""
    write_stream(
        path,
        [
            started(HOSTILE_ID, {"team": HOSTILE_LABEL}, argv=["<script>alert(2)</script>", "\x1b[2J"]),
            event(
                "members_snapshot",
                reason="spawn",
                read_error=False,
                members=[{"pid": 4242, "ppid": 1, "name": "<svg onload=alert(3)>", "start_time": "1"}],
            ),
            event("root_exited", "2026-01-01T00:00:01.000Z", outcome="exited", code=3, signal=None),
            event(
                "resource_summary",
                "2026-01-01T00:00:01.000Z",
                read_error=False,
                peak_memory_bytes=1 << 20,
                total_cpu_ms=40,
                io_read_bytes=None,
                io_write_bytes=None,
                peak_process_count=1,
            ),
            event("cleanup_started", "2026-01-01T00:00:01.000Z", members_before=0, read_error=False),
            cleaned("2026-01-01T00:00:01.000Z"),
            event("container_failed", "2026-01-01T00:00:01.000Z", phase="<i>x</i>", code=102, message=HOSTILE_MESSAGE),
            event("runner_exit", "2026-01-01T00:00:01.000Z", code=3, source="child_exit", child_code=3),
        ],
    )
