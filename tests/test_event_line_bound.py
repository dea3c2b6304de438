"""No event line over the readers' 1 MiB (docs/events.md §1): every reader skips a longer one, so
the runner never writes one. What has no bound of its own (``--argv-raw``'s argv, a snapshot's
members, the pids left at cleanup) is left out of such an event, in a shape the schema allows,
and a warning says so."""

from __future__ import annotations

import hashlib
import json

from conftest import run_cli
from processkit.bounded import EVENTS_STREAM, LINE_BYTES, LineFeed
from processkit.events import emitter as emitting
from processkit.events.reader import LineSplitter
from processkit.events.base import CleanupFinished, MembersSnapshot, RunStarted


def test_a_raw_argv_over_the_line_bound_is_written_redacted_and_said(tmp_path):
    argv = ["true", *(["x" * 120_000] * 10)]  # 1.2 MB: within the kernel's 2 MiB, past 1 MiB
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--argv-raw", "--jsonl", stream, "--", *argv)
    assert done.returncode == 0, done.stderr
    lines = stream.read_bytes().splitlines()
    assert max(len(line) + 1 for line in lines) <= LINE_BYTES  # the newline splitlines dropped counts
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
    assert LINE_BYTES - 100 < len(snapshot.raw) + 1 <= LINE_BYTES
    kept = len(snapshot.value["members"])
    assert snapshot.value["read_error"] is True and snapshot.value["members"] == members[:kept]  # not the tree
    # The hard kill did not fail: kill_error stays as it was; remaining keeps the full count.
    assert cleanup.value["kill_error"] is False and cleanup.value["read_error"] is False
    shown = len(cleanup.value["remaining_pids"])
    assert cleanup.value["remaining"] == len(pids) and cleanup.value["remaining_pids"] == pids[:shown]
    said = capfd.readouterr().err
    assert f"members_snapshot: {kept} of its 30000 members written" in said and "read_error set" in said
    assert f"cleanup_finished: {shown} of its {len(pids)} remaining_pids written" in said
    assert "remaining keeps the full count" in said and "kill_error" not in said
    assert emitting.LINE_MOST == LINE_BYTES  # the emitter's own copy of the readers' bound
    read = run_cli("events", "--file", path)
    assert read.returncode == 0, read.stderr
    words = read.stdout.decode()
    assert f"only {kept} members written: cc1plus (pid 2)" in words and "could not be read" not in words
    assert f"{shown} of {len(pids)} shown)" in words and "hard kill failed" not in words


def test_labels_too_long_for_a_line_are_left_out_and_said(tmp_path):
    labels = [f"--label=k{n:04}={'v' * 256}" for n in range(4200)]  # about 1.1 MB of labels
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--jsonl", stream, *labels, "--", "true")
    assert done.returncode == 0, done.stderr
    lines = stream.read_bytes().splitlines()
    assert max(len(line) + 1 for line in lines) <= LINE_BYTES  # the newline splitlines dropped counts
    started = json.loads(lines[0])
    assert started["event"] == "run_started" and started["labels"] == {}
    assert b"written redacted" not in done.stderr  # no raw argv asked for: only the labels gave way
    assert b"run_started: the run's 4200 labels would make an event line over 1048576 bytes: written without them" in (
        done.stderr
    )
    checked = run_cli("events", "--validate", "--file", stream)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_event_with_nothing_to_leave_out_is_written_over_the_bound_and_said(tmp_path, capfd):
    path = tmp_path / "run.jsonl"
    emitter = emitting.Emitter(str(path))
    emitter.emit(RunStarted(run_id="r" * (LINE_BYTES + 1), labels={}, root_pid=None, mechanism="process_group",
                            abrupt_cleanup="direct_child_only", cwd="/", command=None))  # fmt: skip
    emitter.close()
    line = path.read_bytes()
    assert len(line) > LINE_BYTES + 1 and line.endswith(b"\n")
    said = capfd.readouterr().err
    assert f"run_started: an event line of {len(line)} bytes, over the {LINE_BYTES} its readers read" in said


def _pids_of_length(length: int) -> tuple[dict, list[int]]:
    """A ``cleanup_finished`` record and its pids whose encoded line is exactly ``length`` bytes."""
    pids = list(range(1_000_000, 1_000_000 + (length // 8)))
    record = CleanupFinished(remaining=len(pids), remaining_pids=pids, soft_terminate=None, shutdown=None,
                             read_error=False, kill_error=False).to_json("2026-12-05T00:00:00Z")  # fmt: skip
    over = len(emitting._utf8(record)) - length
    while over < 0:
        pids.append(1_000_000)
        over += 8
    pids[:over] = [100_000 + n for n in range(over)]  # each one digit shorter
    assert len(emitting._utf8(record)) == length
    return record, pids


def test_a_line_whose_newline_lands_past_the_bound_is_fitted_and_read_back(capfd):
    record, pids = _pids_of_length(LINE_BYTES)  # its newline makes it LINE_BYTES + 1
    line = emitting.encode(record)
    assert len(line) + 1 <= LINE_BYTES and json.loads(line)["remaining"] == len(pids)
    assert "remaining_pids written" in capfd.readouterr().err
    assert LineFeed("p", EVENTS_STREAM).feed(line + b"\n") == [(1, line + b"\n")]
    record, pids = _pids_of_length(LINE_BYTES - 1)  # exactly on the bound with its newline: whole
    line = emitting.encode(record)
    assert len(line) + 1 == LINE_BYTES and json.loads(line)["remaining_pids"] == pids
    assert capfd.readouterr().err == ""
    assert LineFeed("p", EVENTS_STREAM).feed(line + b"\n") == [(1, line + b"\n")]
