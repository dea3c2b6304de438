"""The shipped event schema and the package's own validator.

The validator is what ``events --validate`` runs, so it must agree with a real JSON Schema
implementation on the shipped schema, name the path of every violation, and work without
``jsonschema`` installed.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import SAFETY_NET, require_reference_schemas
from processkit.events.validate import (
    EVENT_SCHEMA_FILE,
    SchemaError,
    Validator,
    event_validator,
    load_event_schema,
    validate_event,
)
from streams import reference_problems

ROOT = Path(__file__).resolve().parents[1]
TIME = "2026-01-02T03:04:05.678Z"
SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def event(name: str, **fields) -> dict:
    return {"schema_version": 1, "time": TIME, "event": name, **fields}


def captured(path: str, seen: int, written: int) -> dict:
    return {
        "path": path,
        "bytes": seen,
        "bytes_seen": seen,
        "bytes_written": written,
        "sha256": SHA,
        "truncated": seen > written,
        "write_error": False,
    }


# One valid line of every event type, in the shapes the runner writes them.
VALID = [
    event(
        "run_started",
        run_id="build-1",
        labels={"team": "core", "_x.y-z": ""},
        root_pid=4242,
        mechanism="cgroup_v2",
        abrupt_cleanup="direct_child_only",
        cwd="/srv/work",
        command={"redacted": True, "argv": None, "argv_sha256": SHA, "hint": None},
    ),
    event(
        "members_snapshot",
        reason="spawn",
        read_error=False,
        members=[
            {"pid": 4242, "ppid": 4200, "name": "make", "start_time": "61044"},
            {"pid": 4243, "ppid": None, "name": None, "start_time": None},
        ],
    ),
    event("root_exited", outcome="signalled", code=None, signal=9),
    event("timeout", timeout_ms=5000, grace_ms=None, reason="idle"),
    event("output_overflow", stream="stderr", max_bytes=1024, grace_ms=2000),
    event("cancelled", source="sighup", grace_ms=0),
    event("killed", source="control_kill"),
    event("limit_hit", limit="memory", detail=None),
    event("limit_evidence", memory="tripped", processes="not_tripped", cpu="unknown"),
    event(
        "resource_summary",
        read_error=False,
        peak_memory_bytes=None,
        total_cpu_ms=0,
        io_read_bytes=None,
        io_write_bytes=None,
        peak_process_count=None,
    ),
    event("cleanup_started", members_before=2, read_error=False),
    event(
        "cleanup_finished",
        remaining=0,
        remaining_pids=[],
        soft_terminate="signalled",
        shutdown={
            "soft_stop_scope": "whole_tree",
            "soft_signal": "sent",
            "members_before": 2,
            "members_after": 0,
            "drained_within_grace": True,
            "escalated": False,
            "elapsed_ms": 12,
        },
        read_error=False,
        kill_error=False,
    ),
    event("output_captured", stdout=captured("cap/stdout.log", 10, 4), stderr=captured("cap/stderr.log", 0, 0)),
    event("spawn_failed", code=101, message="`x` not found on PATH"),
    event("container_failed", phase="attach", code=102, message="cannot join"),
    event("runner_exit", code=143, source="child_exit", child_code=143),
]
WRONG_VALUES = (None, True, -1, 1.5, 2**64, "", "x", [], {})
NESTED_WRONG_VALUES = (None, -1, "x", {})


@pytest.fixture(scope="module")
def reference():
    return jsonschema.Draft202012Validator(load_event_schema())


def test_the_schema_ships_inside_the_package_and_is_valid_draft_2020_12():
    # Package data is found, not listed: every file under processkit/ ships (a wheel's contents
    # are held by tests/test_packaging.py), so the schema ships when it sits in the package.
    from importlib.resources import files

    assert files("processkit.events").joinpath(EVENT_SCHEMA_FILE).is_file()
    schema = load_event_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert sorted(schema["$defs"][name]["properties"]["event"]["const"] for name in _event_defs(schema)) == sorted(
        e["event"] for e in VALID
    )


def _event_defs(schema: dict) -> list[str]:
    return [ref["$ref"].rsplit("/", 1)[1] for ref in schema["oneOf"]]


@pytest.mark.parametrize("line", VALID, ids=lambda e: e["event"])
def test_every_event_type_validates(line):
    assert validate_event(line) == []


def _mutations(line: dict):
    """Every way to break (or keep) a line one field at a time: drop, add, retype."""
    for key in line:
        yield {k: v for k, v in line.items() if k != key}
    yield {**line, "unexpected": 1}
    for key, value in line.items():
        for wrong in WRONG_VALUES:
            yield {**line, key: wrong}
        if isinstance(value, dict):
            for inner in value:
                for wrong in NESTED_WRONG_VALUES:
                    yield {**line, key: {**value, inner: wrong}}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for inner in value[0]:
                for wrong in NESTED_WRONG_VALUES:
                    yield {**line, key: [{**value[0], inner: wrong}]}


def test_the_validator_agrees_with_jsonschema_on_every_mutation(reference):
    validator = event_validator()
    checked = 0
    for line in VALID:
        for mutated in _mutations(line):
            ours = validator.errors(mutated)
            assert (not ours) == reference.is_valid(mutated), (mutated, [str(v) for v in ours])
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda e: e["stdout"].pop("bytes"), "/stdout: missing required property 'bytes'"),
        (lambda e: e["stderr"].update(sha256="ABC"), '/stderr/sha256: "ABC" does not match ^[0-9a-f]{64}$'),
        (lambda e: e.update(event="file_written"), '/event: "file_written" is not one of "run_started", '),
        (lambda e: e.update(schema_version=2), "/schema_version: expected 1, got 2"),
        (lambda e: e["stdout"].update({"odd key": 1}), "/stdout/odd key: property is not allowed here"),
    ],
)
def test_violations_name_the_json_path(mutate, expected):
    line = copy.deepcopy(VALID[12])
    mutate(line)
    found = [str(v) for v in validate_event(line)]
    assert len(found) == 1 and found[0].startswith(expected), found


def test_the_closest_alternative_explains_a_bad_event():
    members = copy.deepcopy(VALID[1])
    members["members"][1]["pid"] = -5
    assert [str(v) for v in validate_event(members)] == ["/members/1/pid: -5 is less than the minimum 0"]
    assert [str(v) for v in validate_event(event("killed", source="sigterm"))] == [
        '/source: expected "control_kill", got "sigterm"'
    ]
    assert [str(v) for v in validate_event([])] == ["(whole event): expected object, got []"]
    missing = {k: v for k, v in VALID[3].items() if k != "event"}
    assert [str(v) for v in validate_event(missing)] == ["(whole event): missing required property 'event'"]


@pytest.mark.parametrize(
    "schema, good, bad",
    [
        ({"type": "integer"}, [0, -3, 2.0, 2**70], [True, 1.5, "1", None]),
        ({"type": ["string", "null"]}, ["", None], [0, False, []]),
        ({"const": 1}, [1, 1.0], [True, "1"]),
        ({"enum": [False, None]}, [False, None], [0, ""]),
        ({"minLength": 2, "maxLength": 3}, ["ab", "\u00e9\u00e9\u00e9", 7], ["a", "abcd"]),
        ({"minimum": 0, "maximum": 10}, [0, 10, "x"], [-1, 10.5]),
        ({"additionalProperties": {"type": "string"}}, [{}, {"a": "b"}, 3], [{"a": 1}]),
        ({"propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1}], [{"aB": 1}]),
        ({"items": {"type": "integer"}}, [[], [1, 2]], [[1, "2"]]),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, [-1, 0.5, "x"], [1, -0.5]),
        ({"pattern": "b"}, ["abc", 1], ["ac"]),
    ],
)
def test_keyword_semantics_match_draft_2020_12(schema, good, bad):
    ours = Validator(schema)
    reference = jsonschema.Draft202012Validator(schema)
    for value in good:
        assert ours.is_valid(value) and reference.is_valid(value), value
    for value in bad:
        assert not ours.is_valid(value) and not reference.is_valid(value), value


@pytest.mark.parametrize(
    "schema",
    [{"format": "date-time"}, {"anyOf": [{"type": "null"}]}, {"$ref": "#/$defs/missing"}, {"$ref": "other.json"}],
)
def test_a_keyword_the_validator_does_not_implement_is_refused(schema):
    with pytest.raises(SchemaError):
        Validator(schema)


def test_the_runtime_validator_needs_no_jsonschema_package():
    """``events --validate`` must work on an install without the test extras."""
    code = (
        "import json, sys\n"
        "sys.modules['jsonschema'] = None\n"
        "from processkit.events.validate import validate_event\n"
        "print(json.dumps([str(v) for v in validate_event(json.loads(sys.argv[1]))]))"
    )
    line = json.dumps({**VALID[6], "source": 1})
    proc = subprocess.run([sys.executable, "-c", code, line], capture_output=True, text=True, timeout=SAFETY_NET)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ['/source: expected "control_kill", got 1']


def reference_file(name: str) -> Path:
    """A file of the reference's published schemas; skips the test (fails it in CI) when absent."""
    return require_reference_schemas() / name


def test_the_reference_samples_validate_once_capture_carries_the_seed_fields():
    text = reference_file("events-v1.sample.jsonl").read_text(encoding="utf-8")
    for line in map(json.loads, filter(str.strip, text.splitlines())):
        if line["event"] == "output_captured":
            for stream in ("stdout", "stderr"):
                counts = {"bytes_seen": line[stream]["bytes"], "bytes_written": line[stream]["bytes"]}
                line[stream] = {key: {**line[stream], **counts}[key] for key in VALID[12][stream]}
        assert validate_event(line) == [], line
        assert reference_problems(line) == [], line


def test_our_lines_satisfy_the_patched_reference_schema():
    reference_file("events-v1.schema.json")
    for line in VALID:
        assert reference_problems(line) == [], line


def test_our_schema_has_every_reference_event_and_field_in_order():
    theirs = json.loads(reference_file("events-v1.schema.json").read_text(encoding="utf-8"))
    ours = load_event_schema()
    their_events = {
        theirs["$defs"][name]["properties"]["event"]["const"]: list(theirs["$defs"][name]["properties"])
        for name in _event_defs(theirs)
    }
    assert {name: list(ours["$defs"][name]["properties"]) for name in _event_defs(ours)} == their_events
    their_stream = list(theirs["$defs"]["captureInfo"]["properties"])
    seed_fields = ["bytes_seen", "bytes_written"]
    assert list(ours["$defs"]["captured_stream"]["properties"]) == their_stream[:2] + seed_fields + their_stream[2:]


def test_a_pattern_dollar_does_not_match_before_a_trailing_newline():
    """JSON Schema patterns are ECMA-262: ``$`` is the end of the string, never "\\n" + end."""
    line = {**VALID[0], "time": TIME + "\n"}
    assert [v.keyword for v in validate_event(line)] == ["pattern"]
    assert Validator({"pattern": "^a$"}).is_valid("a")
    assert not Validator({"pattern": "^a$"}).is_valid("a\n")
    assert Validator({"pattern": "^[$]x\\$$"}).is_valid("$x$")  # a literal $ stays literal
    assert not Validator({"pattern": "^\\d$"}).is_valid("\u0663")  # \d is ASCII, as in ECMA-262


def test_a_new_limit_kind_keeps_a_stream_valid():
    assert validate_event(event("limit_hit", limit="pids_per_user", detail="a future cap")) == []


def test_the_shipped_schema_is_never_stricter_than_the_reference():
    """Whatever the reference's schema (with the seed's capture fields) accepts, ours accepts:
    every one-field change of every event type, checked against both."""
    reference_file("events-v1.schema.json")
    from streams import reference_validator

    theirs = reference_validator().schema
    by_event = {
        theirs["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["event"]["const"]: ref for ref in theirs["oneOf"]
    }
    ours = event_validator()
    extra = (0, 2**64, 2**70, "", "\u00e9", "x" * 300, "future_kind")
    accepted = 0
    for line in VALID:
        # The one alternative the line means: the oneOf's other fifteen only slow this down.
        narrowed = jsonschema.Draft202012Validator({**theirs, "oneOf": [by_event[line["event"]]]})
        variants = list(_mutations(line)) + [{**line, key: value} for key in line for value in extra]
        for variant in variants:
            if narrowed.is_valid(variant):
                accepted += 1
                assert ours.is_valid(variant), (variant, [str(v) for v in ours.errors(variant)])
    assert accepted > 50
