"""processkit.events.types: one class per schema event, fields in schema order, lenient reading,
and writing back the very object that was read."""

from __future__ import annotations

import json

import processkit
from processkit.events.types import ENVELOPE, EVENT_TYPES, RunnerExit, UnknownEvent, from_json
from processkit.events.validate import load_event_schema, validate_event


def test_one_class_per_schema_event_with_fields_in_schema_order():
    document = load_event_schema()
    names = [ref["$ref"].rsplit("/", 1)[1] for ref in document["oneOf"]]
    assert list(EVENT_TYPES) == names
    for name in names:
        properties = [key for key in document["$defs"][name]["properties"] if key not in ENVELOPE]
        assert EVENT_TYPES[name].field_names() == tuple(properties), name


def test_a_real_stream_reads_and_writes_back_byte_for_byte(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    processkit.run(["sh", "-c", "echo x; exit 1"], jsonl=jsonl, capture_dir=tmp_path / "cap", snapshot_interval="1s")
    for line in jsonl.read_text().splitlines():
        record = json.loads(line)
        event = from_json(record)
        assert type(event) is EVENT_TYPES[record["event"]]
        assert list(event.to_json().items()) == list(record.items())


def test_unknown_fields_and_types_are_kept():
    newer = {
        "schema_version": 1,
        "time": "2026-01-01T00:00:00.000Z",
        "event": "runner_exit",
        "code": 0,
        "source": "child_exit",
        "child_code": 0,
        "extra_info": [1],
    }
    event = from_json(newer)
    assert isinstance(event, RunnerExit) and event.extra == {"extra_info": [1]} and event.to_json() == newer
    future = {"schema_version": 2, "time": "2026-01-01T00:00:00.000Z", "event": "gpu_sampled", "watts": 300}
    unknown = from_json(future)
    assert isinstance(unknown, UnknownEvent) and unknown.event == "gpu_sampled" and unknown.extra == {"watts": 300}
    assert unknown.to_json() == future
    assert isinstance(from_json({"no": "event"}), UnknownEvent)


def test_built_events_are_stamped_and_validate():
    record = RunnerExit(code=3, source="child_exit", child_code=3).to_json()
    assert list(record) == ["schema_version", "time", "event", "code", "source", "child_code"]
    assert validate_event(record) == []


def test_events_are_frozen_comparable_and_picklable():
    import pickle

    event = RunnerExit(code=1, source="timeout", child_code=None, extra={"later": True})
    assert pickle.loads(pickle.dumps(event)) == event
    assert pickle.loads(pickle.dumps(event)).extra == {"later": True}
    assert event == RunnerExit(code=1, source="timeout", child_code=None)  # extra is not compared
    assert event != RunnerExit(code=2, source="timeout", child_code=None)
    try:
        event.code = 2  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("an event could be changed")
    try:
        RunnerExit(cod=1)  # type: ignore[call-arg]
    except TypeError as exc:
        assert "cod" in str(exc)
    else:
        raise AssertionError("an unknown field was accepted")


def test_the_event_types_stay_cheap_to_import():
    """The runner writes through these classes: they must not pull dataclasses (inspect, ast,
    dis, tokenize) onto the run's start-up path."""
    import subprocess
    import sys

    probe = "import sys, processkit.events.types; print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_nested_objects_are_typed_once_and_every_reader_reads_through_them(tmp_path):
    """The captured stream the API hands out is the events' CapturedStream (with its kept
    ranges); a stream's object is read leniently, the reference's ``bytes`` standing in for
    ``bytes_seen``, and anything but an object reads as None."""
    from processkit.api.result import CaptureInfo
    from processkit.events.types import CapturedStream, MemberInfo, OutputCaptured, Shutdown

    result = processkit.run(["sh", "-c", "printf abc"], capture_dir=tmp_path / "cap", jsonl=tmp_path / "r.jsonl")
    captured = result.stdout_capture
    assert isinstance(captured, CaptureInfo) and isinstance(captured, CapturedStream)
    assert (captured.stream, captured.bytes_seen, captured.bytes_written, captured.kept) == ("stdout", 3, 3, ((0, 3),))
    event = next(e for e in result.events if isinstance(e, OutputCaptured))
    assert event.captured("stdout") == CapturedStream.read("stdout", event.stdout)
    assert CaptureInfo.from_event(event.captured("stdout"), result.run_id) == captured
    reference = {"path": "/x", "bytes": 5, "bytes_written": 5, "sha256": "0" * 64, "truncated": False}
    read = CapturedStream.read("stderr", reference)
    assert read is not None and read.bytes_seen == 5 and read.write_error is None
    assert CapturedStream.read("stdout", None) is None and MemberInfo.read([1]) is None
    assert MemberInfo.read({"pid": 7, "name": "sh"}) == MemberInfo(pid=7, ppid=None, name="sh", start_time=None)
    assert Shutdown.read(None) is None
