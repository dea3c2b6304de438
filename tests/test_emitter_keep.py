"""``Emitter(remember=...)``: a batch's job line takes the events the stream got, not the file again."""

from __future__ import annotations

import json
import os

from processkit.events.emitter import Emitter
from processkit.events.types import ResourceSummary, RootExited, RunnerExit


def test_it_keeps_the_last_event_written_of_each_kept_type(tmp_path):
    path = tmp_path / "events.jsonl"
    emitter = Emitter(str(path), ("resource_summary", "runner_exit"))
    emitter.emit(ResourceSummary(peak_memory_bytes=1))
    emitter.emit(RootExited(code=0))
    emitter.emit(ResourceSummary(peak_memory_bytes=2))
    emitter.emit(RunnerExit(code=0, source="child_exit", child_code=0))
    emitter.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert emitter.remembered == {"resource_summary": json.loads(lines[2]), "runner_exit": json.loads(lines[3])}
    assert emitter.remembered["resource_summary"]["peak_memory_bytes"] == 2


def test_a_line_that_never_reached_the_stream_is_not_kept(tmp_path):
    path = tmp_path / "events.jsonl"
    emitter = Emitter(str(path), ("runner_exit",))
    os.close(emitter._fd)  # every later write fails: the stream has no runner_exit
    emitter._fd = os.open(os.devnull, os.O_RDONLY)
    emitter.emit(RunnerExit(code=0, source="child_exit", child_code=0))
    emitter.close()
    assert emitter.failure is not None and emitter.remembered == {}


def test_nothing_is_kept_unless_asked(tmp_path):
    emitter = Emitter(str(tmp_path / "events.jsonl"))
    emitter.emit(RunnerExit(code=0, source="child_exit", child_code=0))
    emitter.close()
    assert emitter.remembered == {}


def _held_emitter() -> tuple[Emitter, int]:
    """An emitter writing a memfd, as a ``--keep failed`` job's; and a descriptor to read it by."""
    memfd = os.memfd_create("events.jsonl", os.MFD_CLOEXEC)
    return Emitter("events.jsonl", ("runner_exit",), os.dup(memfd)), memfd


def test_a_held_stream_is_encoded_and_written_only_when_it_is_kept():
    for keep in (True, False):
        emitter, memfd = _held_emitter()
        emitter.emit(RootExited(code=0))
        emitter.emit(RunnerExit(code=0, source="child_exit", child_code=0))
        assert os.fstat(memfd).st_size == 0, "written before the run ended"
        emitter.close(keep=keep)
        lines = os.pread(memfd, 1 << 16, 0).splitlines()
        os.close(memfd)
        assert [json.loads(line)["event"] for line in lines] == (["root_exited", "runner_exit"] if keep else [])
        assert emitter.remembered["runner_exit"]["code"] == 0, "the job's line is made either way"


class _Unencodable:
    def to_json(self) -> dict:
        return {"event": "runner_exit", "code": object()}  # no JSON for it


def test_a_held_stream_keeps_the_lines_before_one_that_cannot_be_encoded():
    emitter, memfd = _held_emitter()
    emitter.emit(RootExited(code=0))
    emitter.emit(_Unencodable())
    emitter.close()
    lines = os.pread(memfd, 1 << 16, 0).splitlines()
    os.close(memfd)
    assert [json.loads(line)["event"] for line in lines] == ["root_exited"]
    assert emitter.failure is not None and emitter.remembered == {}, "what never reached the stream is not kept"


def test_a_held_stream_past_its_weight_is_written_as_it_goes_and_stays_whole():
    """A job snapshotting a large tree often (issue 46): its events are not gathered without a
    bound; past ``SPILL_WEIGHT`` they reach the memfd as they come, in order, nothing lost."""
    from processkit.events.emitter import SPILL_WEIGHT
    from processkit.events.types import MembersSnapshot

    emitter, memfd = _held_emitter()
    members = [{"pid": n} for n in range(300)]
    snapshots = 4 * SPILL_WEIGHT // len(members)
    for _ in range(snapshots):
        emitter.emit(MembersSnapshot(reason="interval", read_error=False, members=members))
        assert len(emitter._gathered or ()) * len(members) <= SPILL_WEIGHT + len(members)
    assert os.fstat(memfd).st_size > 0, "written before the run ended"
    emitter.emit(RunnerExit(code=1, source="child_exit", child_code=1))
    emitter.close()
    lines = os.pread(memfd, 1 << 26, 0).splitlines()
    os.close(memfd)
    assert [json.loads(line)["event"] for line in lines] == ["members_snapshot"] * snapshots + ["runner_exit"]
    assert emitter.remembered["runner_exit"]["code"] == 1


def test_a_dropped_held_stream_never_makes_records_of_what_it_does_not_remember(monkeypatch):
    """A passing ``--keep failed`` job's stream is dropped unread: its events of a type the job's
    line does not take are gathered as themselves and never made into objects to encode."""
    from processkit.events.base import Event

    made: list[str] = []
    real = Event.to_json
    monkeypatch.setattr(Event, "to_json", lambda event, *stamp: made.append(event.name) or real(event, *stamp))
    for keep in (False, True):
        made.clear()
        emitter, memfd = _held_emitter()
        emitter.emit(RootExited(code=0))
        emitter.emit(ResourceSummary(peak_memory_bytes=1))
        emitter.emit(RunnerExit(code=0, source="child_exit", child_code=0))
        emitter.close(keep=keep)
        os.close(memfd)
        assert made == (["runner_exit", "root_exited", "resource_summary"] if keep else ["runner_exit"])
        assert emitter.remembered["runner_exit"]["code"] == 0


def test_a_kept_held_stream_is_the_bytes_a_stream_written_as_it_goes_has_with_the_times_of_the_emits(
    tmp_path, monkeypatch
):
    """Made into records only at the end, a kept held stream's events still carry the time each
    was emitted, and its bytes are those a file stream written event by event gets."""
    import time

    from processkit.events.types import MembersSnapshot

    clock = [1_700_000_000_123_456_789]
    monkeypatch.setattr(time, "time_ns", lambda: clock[0])
    events = [
        lambda: MembersSnapshot(reason="spawn", read_error=False, members=[{"pid": 7, "name": "caf\udce9"}]),
        lambda: RootExited(outcome="exited", code=0),
        lambda: ResourceSummary(peak_memory_bytes=2),
        lambda: RunnerExit(code=0, source="child_exit", child_code=0),
    ]
    emitter, memfd = _held_emitter()
    written = Emitter(str(tmp_path / "events.jsonl"), ("runner_exit",))
    for index, event in enumerate(events):
        clock[0] += 1_001_000_000 * index  # each a second and a millisecond later: a new stamp
        emitter.emit(event())
        written.emit(event())
    clock[0] += 5_000_000_000  # the run's end, later still: no event is stamped then
    emitter.close()
    written.close()
    held = os.pread(memfd, 1 << 16, 0)
    os.close(memfd)
    assert held == (tmp_path / "events.jsonl").read_bytes()
    assert [json.loads(line)["time"] for line in held.splitlines()] == [
        "2023-11-14T22:13:20.123Z",
        "2023-11-14T22:13:21.124Z",
        "2023-11-14T22:13:23.126Z",
        "2023-11-14T22:13:26.129Z",
    ]
