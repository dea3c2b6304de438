"""Property tests for the two parsers that take untrusted input: the control wire (the request
framing and verb parser, then a live runner's socket) and the registry record reader."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import LOADED_MACHINE_HEALTH
from hypothesis import strategies as st

from control_support import cli_json, exchange, listed, registry_record, runs  # noqa: F401
from processkit.control import protocol
from processkit.registry import records
from processkit.text import is_terminal_safe, is_valid_label_key, is_valid_label_value, is_valid_run_id

LIMIT = protocol.MAX_LINE
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


# -- the wire ---------------------------------------------------------------------------------
@given(st.binary(max_size=300))
def test_a_request_line_is_a_known_verb_or_a_refusal(line):
    try:
        verb = protocol.parse_request(line)
    except protocol.ProtocolError as refusal:
        assert str(refusal)
        return
    assert verb in protocol.VERBS
    assert verb == (line.decode("utf-8").strip() or "inspect")


@given(st.sampled_from(protocol.VERBS + ("",)), st.text(" \t\r\x0b\x0c", max_size=5), st.text(" \t\r", max_size=5))
def test_surrounding_whitespace_is_trimmed(verb, before, after):
    assert protocol.parse_request(f"{before}{verb}{after}".encode()) == (verb or "inspect")


@given(
    newline_at=st.one_of(st.none(), st.integers(0, LIMIT + 10), st.sampled_from([LIMIT - 1, LIMIT, LIMIT + 1])),
    length=st.integers(0, LIMIT + 2000),
    fill=st.binary(min_size=1, max_size=16).filter(lambda b: b"\n" not in b),
    chunks=st.lists(st.integers(1, 70_000), min_size=1, max_size=6),
)
@settings(max_examples=60, deadline=None)
def test_request_framing_matches_the_64k_rule_for_any_chunking(newline_at, length, fill, chunks):
    data = bytearray((fill * (length // len(fill) + 1))[:length])
    if newline_at is not None and newline_at < len(data):
        data[newline_at] = ord("\n")
    data = bytes(data)
    end = data.find(b"\n")
    # None: refused (too long, or cut mid-line); nothing at all before the half-close is an empty
    # request, as the reference's read_bounded_line returns Ok(0) and classify_request("") is inspect
    expected = data[:end] if 0 <= end < LIMIT else (b"" if not data else None)

    buffer, offset, turn, line = protocol.RequestBuffer(), 0, 0, None
    try:
        while line is None:
            chunk = data[offset : offset + min(chunks[turn % len(chunks)], buffer.room())]
            offset, turn = offset + len(chunk), turn + 1
            line = buffer.feed(chunk) if chunk else buffer.finish()
    except protocol.ProtocolError:
        line = None
    assert line == expected
    assert offset <= LIMIT  # never more than the limit is taken in


@given(json_values)
def test_every_reply_is_one_line(value):
    encoded = protocol.encode({"error": value})
    assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1


def test_an_oversized_reply_is_replaced_never_truncated():
    fits = {"members": ["x" * (LIMIT - 20)]}
    assert json.loads(protocol.encode(fits)) == fits
    oversized = protocol.encode({"members": ["x" * 1000] * 70})
    assert json.loads(oversized) == {"error": protocol.OVERSIZED_REPLY} and len(oversized) < LIMIT


# -- the record reader ------------------------------------------------------------------------
def _assert_sound(record: records.Record) -> None:
    assert isinstance(record.run_id, str)
    record.run_id.encode()  # any valid text (no lone surrogate), empty too: the reference's rule
    assert records.valid_started_at(record.started_at) and records.valid_lock_name(record.lock_file)
    assert record.argv_sha256 is None or len(record.argv_sha256) == 64
    assert record.hint is None or is_terminal_safe(record.hint)
    assert all(is_valid_label_key(k) and is_valid_label_value(v) for k, v in record.labels.items())
    for path in (record.endpoint, record.jsonl, record.capture_dir):
        assert path is None or (isinstance(path, str) and "\0" not in path)


@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_break_the_record_reader(data):
    record = records.parse(data.decode("utf-8", "replace"))  # its reader refuses bytes not UTF-8 first
    if record is not None:
        _assert_sound(record)


VALID = registry_record(
    "build-42",
    "run-1.lock",
    endpoint="/tmp/pkc-1-2-3/c.sock",
    argv_sha256="0" * 64,
    hint="msbuild_node_reuse",
    labels={"lane": "a"},
    jsonl="/abs.jsonl",
)


@given(
    st.dictionaries(st.sampled_from(sorted(VALID) + ["extra"]), json_values, max_size=4), st.sampled_from(sorted(VALID))
)
def test_a_damaged_record_is_skipped_or_keeps_only_sound_values(overrides, removed):
    document = dict(VALID)
    document.update(overrides)
    if removed not in overrides:
        del document[removed]
    record = records.parse(json.dumps(document))
    structural = {"registry_version", "run_id", "started_at", "liveness"}
    if structural.isdisjoint(overrides) and removed not in structural:
        assert record is not None  # only optional values were damaged: the record survives
    if record is not None:
        _assert_sound(record)


@given(
    run_id=st.text(min_size=1, max_size=40).filter(is_valid_run_id),
    labels=st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9._-]{0,20}", fullmatch=True),
        st.text(max_size=30).filter(is_valid_label_value),
    ),
    endpoint=st.one_of(st.none(), st.text(min_size=1, max_size=60).filter(lambda t: "\0" not in t)),
)
def test_what_a_run_writes_reads_back_unchanged(run_id, labels, endpoint):
    record = records.Record(
        run_id=run_id,
        endpoint=endpoint,
        started_at=VALID["started_at"],
        argv_sha256="ab" * 32,
        hint=None,
        labels=labels,
        jsonl="/j.jsonl",
        capture_dir=None,
        lock_file="run-9.lock",
    )
    assert records.parse(record.encode().decode()) == record


# -- a live runner's socket -------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(
    payload=st.one_of(
        st.binary(max_size=400),
        st.builds(
            lambda v, junk: v.encode() + junk, st.sampled_from(["inspect", "attest", " ", ""]), st.binary(max_size=50)
        ),
        st.builds(lambda n, b: b * n, st.integers(1, 90_000), st.sampled_from([b"a", b"\x00", b"\xff", b"\n\n"])),
    )
)
def test_a_live_runner_answers_any_bytes_with_one_line_and_carries_on(fuzz_run, payload):
    first_line = payload.split(b"\n", 1)[0]
    if b"\n" in payload[:LIMIT]:
        try:
            assume(protocol.parse_request(first_line) not in protocol.STOP_VERBS)
        except protocol.ProtocolError:
            pass
    reply = exchange(fuzz_run.endpoint, payload)
    assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply[:200]
    document = json.loads(reply)
    assert list(document) == ["error"] or document.get("run_id") == "fuzz"
    assert fuzz_run.run.proc.poll() is None


class _FuzzRun:
    def __init__(self, run, endpoint):
        self.run, self.endpoint = run, endpoint


@pytest.fixture
def fuzz_run(runs):
    """One run for all examples; afterwards it must still answer and stop as usual."""
    run = runs(run_id="fuzz")
    yield _FuzzRun(run, listed()[0]["endpoint"])
    assert cli_json("inspect", "--run-id", "fuzz", "--json")["run_id"] == "fuzz"
    assert cli_json("cancel", "--run-id", "fuzz")["accepted"] is True
    assert run.finish() == 108
