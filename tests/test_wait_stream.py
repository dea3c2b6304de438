"""``wait``'s reads of one run's stream while its ``runner_exit`` is on its way
(``registry.stream_outcome.Stream``): the owner is decided once per file, and only the lines that
arrived since are scanned again, yet a line arriving in pieces still answers, and a file replaced
at the path (a new inode) or emptied in place by another run (same inode) is judged again, never
read as this run's."""

from __future__ import annotations

import json
import os

from processkit.registry.stream_outcome import SETTLED, WINDOW_BYTES, Stream


def line(event: str, **fields) -> bytes:
    return (
        json.dumps({"schema_version": 1, "time": "2026-01-01T00:00:00.000Z", "event": event, **fields}) + "\n"
    ).encode()


def started(run_id: str) -> bytes:
    return line("run_started", run_id=run_id, root_pid=1)


EXIT = line("runner_exit", code=3, source="child_exit", child_code=3)
OUTCOME = {"code": 3, "source": "child_exit", "child_code": 3}


def append(path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def test_a_stream_arriving_in_pieces_still_answers(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"")
    stream = Stream(str(path), "mine")
    assert stream.read() is None  # nothing yet
    append(path, started("mine")[:20])
    assert stream.read() is None  # the head's line still being written
    append(path, started("mine")[20:])
    assert stream.read() is None  # this run's, no outcome yet
    append(path, line("members_snapshot", members=[]) + EXIT[:25])
    assert stream.read() is None  # the outcome's line cut short
    append(path, EXIT[25:])
    assert stream.read() == OUTCOME


def test_a_long_stream_answers_from_its_tail_as_it_grows(tmp_path):
    path = tmp_path / "run.jsonl"
    snapshot = line("members_snapshot", members=[], note="x" * 200)
    path.write_bytes(started("mine") + snapshot * (2 * WINDOW_BYTES // len(snapshot)))
    stream = Stream(str(path), "mine")
    assert stream.read() is None
    append(path, snapshot * 10 + EXIT[:10])
    assert stream.read() is None
    append(path, EXIT[10:])
    assert stream.read() == OUTCOME


def test_a_file_replaced_at_the_path_is_judged_again(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(started("mine"))
    stream = Stream(str(path), "mine")
    assert stream.read() is None
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_bytes(started("theirs") + EXIT)
    os.replace(theirs, path)  # a new inode whose head names another run
    assert stream.read() == SETTLED


def test_a_stream_whose_first_run_started_names_another_run_is_not_this_runs(tmp_path):
    """The first ``run_started`` says whose a stream is, as ``events --run-id`` judges it
    (``events.names_run``): a later line naming this run does not make it this run's."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(started("theirs") + started("mine") + EXIT)
    assert Stream(str(path), "mine").read() == SETTLED


def test_a_file_emptied_in_place_by_another_run_is_judged_again(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(started("mine") + line("members_snapshot", members=[]))
    stream = Stream(str(path), "mine")
    assert stream.read() is None
    inode = path.stat().st_ino
    with open(path, "r+b") as handle:  # as a run given the same --jsonl opens it: truncated, same inode
        handle.truncate(0)
        handle.write(started("other") + line("members_snapshot", members=[]) * 3 + EXIT)
    assert path.stat().st_ino == inode
    assert stream.read() == SETTLED


def test_a_takeover_between_the_judgement_and_the_scan_is_not_this_runs_outcome(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    path.write_bytes(started("mine"))
    stream = Stream(str(path), "mine")
    assert stream.read() is None  # judged this run's, no outcome yet
    theirs = started("theirs") + line("runner_exit", code=42, source="child_exit", child_code=42)
    real_pread = os.pread
    reads = []

    def pread_then_take_over(fd, size, offset):
        data = real_pread(fd, size, offset)
        reads.append(offset)
        if len(reads) == 1:  # right after the judgement's read, another run takes the path
            with open(path, "r+b") as handle:
                handle.truncate(0)
                handle.write(theirs)
        return data

    monkeypatch.setattr(os, "pread", pread_then_take_over)
    assert stream.read() is None  # never the other run's 42
    monkeypatch.setattr(os, "pread", real_pread)
    assert stream.read() == SETTLED  # judged again: the head names only the other run
