"""A call whose stream nobody names (issue 49, api51): the runner service holds it in memory and
sends its events as the objects the engine made, never encoded there nor parsed here; a scratch
capture beside it is held in memfds, never a directory or a file. Each through the real service."""

from __future__ import annotations

import json
import os
import time
import subprocess

import processkit
from processkit.api import launch, result, shared
from streams import CROWD_DEADLINE, CROWD_UNREAD, snapshotted_crowd
from conftest import SAFETY_NET

STREAMS_OF_EVERY_KIND = [  # (args, keywords): each ends differently, so its stream holds other event types
    (["true"], {}),
    (["sh", "-c", "echo out; echo err >&2; exit 3"], {"capture_output": True, "labels": {"k": "v"}}),
    (["sh", "-c", "kill -9 $$"], {}),
    (["sleep", "30"], {"timeout": 0.05}),
    (["/nonexistent/program"], {}),
]


def raw_reply(args, **keywords) -> dict:
    """The service's reply to one run, as it came (``processkit.run`` makes its result from it)."""
    call = launch.prepare(args, dict(keywords), echo=False, function="run")
    connection, rid = call.send()
    try:
        reply = connection.take(rid)
    finally:
        connection.forget(rid)
    assert reply is not None
    return reply[2]


def lines_of(events) -> bytes:
    """The stream's bytes for these events, as a named ``jsonl`` gets them."""
    from processkit.events.emitter import encode

    return b"".join(encode(event.to_json()) + b"\n" for event in events)


def test_a_stream_nobody_names_comes_back_unencoded_as_the_events_its_lines_give(isolated_registry):
    import pickle

    for args, keywords in STREAMS_OF_EVERY_KIND:
        reply = raw_reply(args, **keywords)
        assert "records" in reply and "jsonl" not in reply, f"{args}: no JSON made in the service"
        records = pickle.loads(reply["records"])
        events = result.from_records(reply["records"])
        assert events == result.parse_lines(lines_of(events)), f"{args}: the same typed events as its lines"
        assert all(event.time for event in events), f"{args}: each stamped when it was emitted"
        names = [record[0] if type(record) is tuple else record["event"] for record in records]
        assert [event.event for event in events] == names
        # No record made in the service, none parsed here, but the one whose capture counts bound
        # what the service reads back (``request.REMEMBER``), for a run that captured.
        made = [record["event"] for record in records if type(record) is not tuple]
        assert made == (["output_captured"] if keywords.get("capture_output") else [])
    # A stream too heavy to hold as objects (a large tree snapshotted often) was written as it
    # went: it comes as its lines, whole.
    # 251 members in each of the 20 snapshots it waits for (at least: reads merge) outweigh the spill's bound (2048).
    crowd = snapshotted_crowd(250, 20)
    reply = raw_reply(crowd, snapshot_interval=0.02)
    assert "records" not in reply and reply["jsonl"].endswith(b"\n")
    events = result.parse_lines(reply["jsonl"])
    assert events[0].event == "run_started" and events[-1].event == "runner_exit"
    assert events[-1].code == 0, f"the crowd saw too few reads ({CROWD_UNREAD}: none for {CROWD_DEADLINE} s)"
    assert sum(len(event.members) for event in events if event.event == "members_snapshot") > 2048


def test_a_surrogate_in_the_stream_takes_the_json_route_and_reads_as_the_lines_do(tmp_path, isolated_registry):
    odd = os.fsencode(str(tmp_path)) + b"/dir\x80name"
    os.mkdir(odd)
    assert "records" in raw_reply(["true"], cwd=tmp_path), "the objects, where nothing in them is odd"
    reply = raw_reply(["true"], cwd=odd)
    assert "records" not in reply and reply["jsonl"], "a lone surrogate would not read as its line does"
    assert processkit.run(["true"], cwd=odd).events[0].cwd == str(tmp_path) + "/dir\ufffdname"


def test_a_scratch_capture_is_held_in_memory_not_in_files(isolated_registry):
    scratch = shared.connection().scratch
    listing = processkit.run(["sh", "-c", 'ls -A "$1"; echo err >&2', "sh", scratch], capture_output=True)
    assert (listing.returncode, listing.stdout, listing.stderr) == (0, b"", b"err\n"), "no directory while it runs"
    assert listing.stdout_capture is not None and listing.stdout_capture.bytes_written == 0
    assert listing.stderr_capture is not None and listing.stderr_capture.sha256 is not None
    # Over the size a reply carries, it travels through a file the caller reads once and removes.
    big = processkit.run(["head", "-c", str(3 << 20), "/dev/zero"], stdout=subprocess.PIPE)
    assert big.stdout == bytes(3 << 20) and big.stdout_capture.bytes_written == 3 << 20
    assert os.listdir(scratch) == [], "the file it travelled through is removed once read"


def test_a_run_nobody_can_follow_is_published_late(tmp_path, isolated_registry, late_publication):
    processkit.run(["true"])  # the service's lodging: its record names the directory its runs publish in
    (record,) = [name for name in os.listdir(isolated_registry) if name.endswith(".json")]
    home = json.loads((isolated_registry / record).read_text())["batch_records"]

    def tombstones() -> set[str]:
        return {name for name in os.listdir(home) if name.endswith(".ended")}

    before = tombstones()
    processkit.run(["true"])  # ends well within the wait the fixture set
    assert tombstones() == before, "ended before it was published: no record, socket or tombstone"
    processkit.run(["true"], jsonl=tmp_path / "named.jsonl")
    assert len(tombstones() - before) == 1, "a stream a client can follow: published first, as ever"
    import threading

    lasting = threading.Thread(target=processkit.run, args=(["sleep", "30"],), kwargs={"run_id": "api-late"})
    lasting.start()
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not processkit.runs() and time.monotonic() < deadline:
            time.sleep(0.01)
        (listed,) = processkit.runs()
        assert listed.run_id == "api-late", "one that lasts is listed as any run"
        processkit.attach("api-late").cancel()
    finally:
        lasting.join(60)


def test_a_run_request_carries_only_what_changed_in_its_spec(tmp_path, monkeypatch, isolated_registry):
    from processkit.api import wire

    sent: list = []
    plain_framed = wire.framed

    def recorded(message, *mark):
        if message[0] == "run":
            sent.append(message[2])
        return plain_framed(message, *mark)

    monkeypatch.setattr(wire, "framed", recorded)
    shared.connection().close()  # a fresh service: its first request carries the spec whole
    where = ["sh", "-c", "pwd"]
    first = processkit.run(where, cwd=tmp_path, labels={"team": "a"}, capture_output=True, text=True)
    again = processkit.run(where, cwd=tmp_path, labels={"team": "a"}, capture_output=True, text=True)
    back = processkit.run(where, capture_output=True, text=True)  # the labels and the cwd back to their defaults
    assert not isinstance(sent[0], dict), "the first request of a service carries the whole spec"
    assert sent[1] == {"run_id": again.run_id}, "a run that differs only in its id sends its id"
    # the caller's own directory is not one it named: marked so, as no link to refuse is in it (attack72)
    assert set(sent[2]) == {"run_id", "labels", "cwd", "cwd_implicit"}
    assert (first.stdout, again.stdout, back.stdout) == (f"{tmp_path}\n", f"{tmp_path}\n", f"{os.getcwd()}\n")
    assert [run.events[0].labels for run in (first, again, back)] == [{"team": "a"}, {"team": "a"}, {}]
    assert len({first.run_id, again.run_id, back.run_id}) == 3


def test_a_tail_or_head_tail_capture_beside_a_held_stream_keeps_what_it_asked_for():
    """Memfds hold a head capture only (a ring's tail needs its files): a ``capture_keep`` of
    ``tail`` or ``head-tail`` beside a stream nobody names is captured into files as before, not
    refused as the runner's own failure (the held path's assertion, exit 104)."""
    import warnings

    command = ["sh", "-c", "printf 0123456789; printf abcdefghij >&2"]
    expected = {"tail": (b"6789", b"ghij"), "head-tail": (b"0189", b"abij"), "head": (b"0123", b"abcd")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        for keep, (out, err) in expected.items():
            done = processkit.run(command, capture_output=True, capture_keep=keep, capture_max_bytes=4)
            assert (keep, done.returncode, done.stdout, done.stderr) == (keep, 0, out, err)


def test_the_events_built_from_what_travels_are_those_the_records_give():
    """The service sends an event as its type's name and values (``held_events.travelling``), not as
    the record the emitter would make: the caller's events built from those are the ones the
    records give, stamps, nested values and unknown fields included."""
    import pickle

    from processkit.events.emitter import Emitter
    from processkit.events.types import MembersSnapshot, RootExited, RunStarted, from_json
    from processkit.service.held_events import travelling

    emitter = Emitter("unused", fd=os.memfd_create("test", os.MFD_CLOEXEC))
    try:
        emitter.emit(RunStarted(run_id="r", labels={"k": "v"}, root_pid=7, command={"argv": ["true"]}))
        emitter.emit(MembersSnapshot(reason="spawn", members=[{"pid": 7, "argv": ["x"]}]))
        emitter.emit(RootExited(time="2026-01-01T00:00:00.000Z", outcome="exited", code=0, extra={"later": 1}))
        gathered = emitter.gathered
        assert gathered is not None and all(type(item) is tuple for item in gathered)
        expected = [from_json(record) for record in emitter.records or []]
        events = result.from_records(pickle.dumps(travelling(gathered)))
        assert events == expected and [event.time for event in events] == [event.time for event in expected]
        assert [event.extra for event in events] == [{}, {}, {"later": 1}]
    finally:
        emitter.close(keep=False)
