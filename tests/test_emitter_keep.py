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
