"""What one ``processkit.run`` costs on the wire (issue 49, api52): one round trip on the
service's socket, and a reply that carries each figure as values, not as records or objects
rebuilt on both sides. Each through the real service and a real child."""

from __future__ import annotations

import os
import pickle
import socket

import pytest

import processkit
from processkit.api import shared, wire
from processkit.containment.accounting import Usage
from test_api_held_stream import raw_reply


def test_a_call_is_one_request_and_one_reply_on_the_socket(monkeypatch, isolated_registry):
    processkit.run(["true"])  # the service started, its hello read
    frames: list[str] = []
    plain_framed, plain_receive = wire.framed, wire.receive

    def sent(message, *mark):  # each request's frame is made just before it is written
        frames.append(f"sent {message[0]}")
        return plain_framed(message, *mark)

    def received(
        sock: socket.socket, found: wire.Frames, size: int = 1 << 16, space: int = wire.ANCILLARY, kept: bool = True
    ):
        messages = plain_receive(sock, found, size, space, kept)
        frames.extend(f"received {message[0]}" for message, _ in messages or ())
        return messages

    monkeypatch.setattr(wire, "framed", sent)
    monkeypatch.setattr(wire, "receive", received)
    done = processkit.run(["sh", "-c", "echo out; exit 3"], capture_output=True)
    assert (done.returncode, done.stdout) == (3, b"out\n")
    assert frames == ["sent run", "received done"], "one round trip, whatever the result holds"


def test_the_reply_carries_the_usage_and_the_events_as_values(isolated_registry):
    from processkit.api import launch

    report = raw_reply(["true"])
    call = launch.prepare(["true"], {}, echo=False, function="run")
    assert type(report["usage"]) is tuple and len(report["usage"]) == len(Usage._fields), "values, not a record"
    assert all(type(item) is tuple for item in pickle.loads(report["records"])), "no event made a record"
    result = call.result(report)
    assert isinstance(result.usage, Usage) and result.usage._values() == report["usage"]
    assert result.resources is not None and result.resources.extra["cpu_ns"] == result.usage.cpu_ns
    assert [event.event for event in result.events][:1] == ["run_started"]
    assert result.events[-1].event == "runner_exit" and result.source == "child_exit"


def test_a_change_of_the_places_a_service_reads_once_starts_another(monkeypatch, tmp_path, isolated_registry):
    """What the caller compares at every call to know its service still fits (``caller_env.fingerprint``,
    kept between calls) follows every change of the environment."""
    first = processkit.run(["true"]).runner_pid
    assert processkit.run(["true"]).runner_pid == first, "nothing changed: the same service"
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(tmp_path))
    moved = processkit.run(["true"]).runner_pid
    assert moved != first, "another registry: another service"
    os.environ["PROCESSKIT_API52_UNRELATED"] = "1"  # a setting the service reads once: another again
    try:
        assert processkit.run(["true"]).runner_pid not in (first, moved)
    finally:
        del os.environ["PROCESSKIT_API52_UNRELATED"]
    assert shared.connection().pid != first


def _memfds(pid: int) -> set[int]:
    """The inodes of the memfds the service holds between calls."""
    found = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("/memfd:processkit-api"):
                found.add(os.stat(f"/proc/{pid}/fd/{name}").st_ino)
        except OSError:
            pass
    return found


def test_a_held_stream_or_capture_left_empty_is_the_next_runs_not_made_again(isolated_registry):
    pid = processkit.run(["true"]).runner_pid
    assert pid is not None
    kept = _memfds(pid)
    assert kept, "the memfd a run's stream was held in, left empty, is kept"
    for _ in range(3):
        processkit.run(["true"])
        assert _memfds(pid) == kept, "taken again and given back: none made, none closed"
    # One that was written is never taken again: each run's capture is its own, from its first byte.
    outputs = [
        processkit.run(["sh", "-c", command], capture_output=True)
        for command in ("printf abc", "true", "printf de >&2")
    ]
    assert [(done.stdout, done.stderr) for done in outputs] == [(b"abc", b""), (b"", b""), (b"", b"de")]
    assert len(_memfds(pid)) <= 4


def test_a_request_with_no_run_id_is_refused_in_the_run_grammars_words(isolated_registry):
    """The service checks a request's run id by the grammar's own rule, so a request that did
    not come through ``processkit.run``'s checks is refused as the caller would have been."""
    from processkit.api import launch
    from processkit.errors import Failure
    from processkit.grammar.values import parse_run_id

    call = launch.prepare(["true"], {}, echo=False, function="run")
    bad = "bad\x07id"
    with pytest.raises(Failure) as refused:
        parse_run_id(bad, "run_id")
    expected = refused.value.message
    connection, rid = shared.send("run", call.spec.replace(run_id=bad), dict(call.extra), env=True)
    try:
        reply = connection.take(rid)
    finally:
        connection.forget(rid)
    assert reply is not None
    assert reply[2]["failure"] == ("usage", expected, False)
    assert processkit.run(["true"]).returncode == 0, "the service goes on"


def test_a_request_sent_as_changes_gets_a_copy_of_the_last_spec_without_copy_copy(monkeypatch):
    """A request that sends only what changed since the last (``Connection.send``) is applied
    to a copy of the last spec, field by field (``Plain.copied``), not through ``copy.copy``'s
    ``__reduce_ex__`` and state dict each call: the last spec stays as it was, and the copy
    equals a spec built with the change."""
    import copy

    from processkit.service import inbound
    from processkit.spec import RunSpec

    last = pickle.loads(pickle.dumps(RunSpec(argv=("true",), jsonl="x", run_id="r1", run_id_given=False)))

    def refused(*args):
        raise AssertionError("copy.copy was called")

    monkeypatch.setattr(copy, "copy", refused)
    spec = inbound.spec_of({"run_id": "r2", "argv": ("echo", "x")}, last)
    assert spec is not last and last.run_id == "r1" and last.argv == ("true",)
    assert spec == RunSpec(argv=("echo", "x"), jsonl="x", run_id="r2", run_id_given=False)
