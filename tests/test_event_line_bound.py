"""No event line over the readers' 1 MiB (docs/events.md §1): every reader skips a longer one, so
the runner never writes one. What has no bound of its own (``--argv-raw``'s argv, a snapshot's
members, the pids left at cleanup) is left out of such an event, in a shape the schema allows,
and a warning says so."""

from __future__ import annotations

import hashlib
import json

from conftest import run_cli
from processkit.bounded import LINE_BYTES
from processkit.events import emitter as emitting
from processkit.events.reader import LineSplitter
from processkit.events.base import CleanupFinished, MembersSnapshot


def test_a_raw_argv_over_the_line_bound_is_written_redacted_and_said(tmp_path):
    argv = ["true", *(["x" * 120_000] * 10)]  # 1.2 MB: within the kernel's 2 MiB, past 1 MiB
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--argv-raw", "--jsonl", stream, "--", *argv)
    assert done.returncode == 0, done.stderr
    lines = stream.read_bytes().splitlines()
    assert max(len(line) for line in lines) <= LINE_BYTES
    started = json.loads(lines[0])
    assert started["event"] == "run_started"
    assert started["command"]["redacted"] is True and started["command"]["argv"] is None
    assert started["command"]["argv_sha256"] == hashlib.sha256(b"\0".join(a.encode() for a in argv)).hexdigest()
    assert b"the raw argv would make an event line over 1048576 bytes: written redacted" in done.stderr
    read = run_cli("events", "--json", "--file", stream)
    assert read.returncode == 0 and read.stderr == b"", read.stderr
    assert read.stdout.splitlines() == lines  # every line read back, none skipped
    checked = run_cli("events", "--validate", "--file", stream)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_raw_argv_within_the_bound_is_written_whole(tmp_path):
    argv = ["true", *(["x" * 100_000] * 9)]
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--argv-raw", "--jsonl", stream, "--", *argv)
    assert done.returncode == 0 and b"written redacted" not in done.stderr, done.stderr
    assert json.loads(stream.read_bytes().splitlines()[0])["command"]["argv"] == argv


def test_a_snapshot_and_a_cleanup_too_long_for_a_line_keep_what_fits_and_say_so(tmp_path, capfd):
    members = [{"pid": pid, "ppid": 1, "name": "cc1plus", "start_time": "123456789"} for pid in range(2, 30_002)]
    path = tmp_path / "run.jsonl"
    emitter = emitting.Emitter(str(path))
    emitter.emit(MembersSnapshot(reason="interval", read_error=False, members=members))
    pids = list(range(1_000_000, 1_200_000))
    emitter.emit(CleanupFinished(remaining=len(pids), remaining_pids=pids, soft_terminate=None, shutdown=None,
                                 read_error=False, kill_error=False))  # fmt: skip
    emitter.close()
    reader = LineSplitter()
    snapshot, cleanup = reader.feed(path.read_bytes()) + reader.end()
    assert snapshot.problem is None and cleanup.problem is None  # neither skipped
    assert LINE_BYTES - 100 < len(snapshot.raw) <= LINE_BYTES
    assert (
        snapshot.value["read_error"] is True and snapshot.value["members"] == members[: len(snapshot.value["members"])]
    )
    assert cleanup.value["kill_error"] is True and cleanup.value["remaining"] == len(pids)
    assert cleanup.value["remaining_pids"] == pids[: len(cleanup.value["remaining_pids"])]
    said = capfd.readouterr().err
    assert f"members_snapshot: {len(snapshot.value['members'])} of its 30000 members written" in said
    assert "cleanup_finished:" in said and "remaining_pids written" in said
    assert emitting.LINE_MOST == LINE_BYTES  # the emitter's own copy of the readers' bound
