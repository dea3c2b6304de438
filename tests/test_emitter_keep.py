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
