"""Property tests for the inputs a user, a file or a peer controls and that no other test fuzzes:
every CLI value grammar against a model written from docs/run.md §2, env files, the events reader
fed arbitrary bytes, and the control client fed arbitrary replies. Each input is accepted with
exactly the model's value or refused with the documented code, and nothing ever raises past
the CLI (no traceback, no 104).

Already fuzzed elsewhere: the control wire's request side and the registry record reader
(test_control_fuzz.py), the run argv as a whole (test_run_exit_codes.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import LOADED_MACHINE_HEALTH, run_cli
from control_support import registry_record
from processkit.grammar import values
from processkit.cli.control import render_snapshot
from processkit.control import replies
from processkit.control.client import request_by_id
from processkit.rundir import RunDir
from processkit.engine.environment import build_environment
from processkit.errors import Failure, Kind
from processkit.events import reader
from processkit.events.render import Renderer
from processkit.events.stream import StreamChecks
from processkit.events.validate import validate_event
from processkit.spec import EnvPlan
from processkit.text import is_terminal_unsafe

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
DIGITS = "0123456789"
# Unicode White_Space, Rust's char::is_whitespace (docs/run.md's env key and env file rules).
RUST_WHITESPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}
# Characters that sit on the grammars' edges: signs, units in both cases, look-alikes (the
# Kelvin sign lowercases to "k", non-ASCII digits pass str.isdigit), separators, controls.
EDGES = "0123456789+-._ eEmshbkgMSHBKG\u212a\u0661\uff11=\t\n\r\x1b\x85\xa0\u200b\u202e#\x00"
edgy_text = st.text(st.sampled_from(EDGES), max_size=12) | st.text(max_size=12)


def refused(call) -> Failure:
    """Run a parser that must refuse; the refusal is a usage Failure (exit 100)."""
    with pytest.raises(Failure) as caught:
        call()
    assert (caught.value.kind, caught.value.code) == (Kind.USAGE, 100)
    return caught.value


def check_against(model, parse, text):
    """The parser returns exactly the model's value, or refuses where the model does."""
    expected = model(text)
    if expected is None:
        refused(lambda: parse(text))
    else:
        assert parse(text) == expected


# -- value grammars -----------------------------------------------------------------------------
def ascii_digits(text: str) -> bool:
    return bool(text) and all(ch in DIGITS for ch in text)


def duration_model(text: str, positive: bool):
    for unit, factor in (("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("", 1000)):
        digits = text[: len(text) - len(unit)] if text.endswith(unit) else None
        if digits is not None and ascii_digits(digits):
            total = int(digits) * factor
            return None if total > U64_MAX or (positive and total == 0) else total
    return None


def size_model(text: str):
    digits, suffix = (text[:-1], text[-1].lower()) if text and text[-1] in "bkmgBKMG" else (text, "b")
    if not ascii_digits(digits):
        return None
    total = int(digits) * {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[suffix]
    return total if 0 < total <= U64_MAX else None


def count_model(text: str):
    digits = text[1:] if text.startswith("+") else text
    return int(digits) if ascii_digits(digits) and 1 <= int(digits) <= U32_MAX else None


def unsigned(text: str) -> str:
    return text[1:] if text[:1] in ("+", "-") else text


def cores_model(text: str):
    """Rust's f64 syntax less inf/nan: a sign, digits around one optional point, an exponent."""
    mantissa, marker, exponent = unsigned(text).replace("E", "e").partition("e")
    whole, _, fraction = mantissa.partition(".")
    if marker and not ascii_digits(unsigned(exponent)):
        return None
    if not (whole or fraction) or any(part and not ascii_digits(part) for part in (whole, fraction)):
        return None
    value = float(text)
    return value if 0 < value < float("inf") else None


def is_format(ch: str) -> bool:
    """docs/run.md §2.4's format characters, which can reorder or hide text: the reference lists
    Unicode 15.0's (category Cf). Named too, for interpreters with older tables: U+0890-0891
    (Arabic marks, Cf from 14.0 on, which Python 3.10 lacks) and U+13439-1343F (Egyptian
    hieroglyph controls, Cf from 15.0 on, which Python 3.11 lacks)."""
    point = ord(ch)
    return unicodedata.category(ch) == "Cf" or 0x890 <= point <= 0x891 or 0x13439 <= point <= 0x1343F


def terminal_safe(text: str) -> bool:
    return not any(unicodedata.category(ch) == "Cc" or 0xD800 <= ord(ch) <= 0xDFFF or is_format(ch) for ch in text)


def test_terminal_unsafe_is_every_control_surrogate_and_format_character():
    """The production table against the model, over every code point: hypothesis's draws seldom
    land in a 1-character range."""
    wrong = [hex(point) for point in range(0x110000) if is_terminal_unsafe(chr(point)) == terminal_safe(chr(point))]
    assert wrong == []


def run_id_model(text: str):
    return text if 1 <= len(text) <= 256 and terminal_safe(text) else None


def label_model(text: str):
    key, sep, value = text.partition("=")
    key_ok = 1 <= len(key) <= 64 and key[0] in "_" + "".join(map(chr, range(65, 91))) + "".join(
        map(chr, range(97, 123))
    )
    key_ok = key_ok and all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in key)
    return (key, value) if sep and key_ok and len(value) <= 256 and terminal_safe(value) else None


def env_key_ok(key: str) -> bool:
    return (
        bool(key)
        and "=" not in key
        and not any(ch in RUST_WHITESPACE or unicodedata.category(ch) == "Cc" for ch in key)
    )


def env_model(text: str):
    key, sep, value = text.partition("=")
    return (key, value) if sep and env_key_ok(key) else None


@given(edgy_text | st.from_regex(r"[0-9]{1,22}(ms|s|m|h)?", fullmatch=True), st.booleans())
def test_durations(text, positive):
    check_against(
        lambda t: duration_model(t, positive),
        lambda t: values.parse_duration_ms(t, "--timeout", positive=positive),
        text,
    )


@given(edgy_text | st.from_regex(r"[0-9]{1,21}[bkmgBKMG]?", fullmatch=True))
def test_sizes(text):
    check_against(size_model, lambda t: values.parse_size(t, "--max-memory"), text)


@given(edgy_text | st.from_regex(r"\+?[0-9]{1,11}", fullmatch=True))
def test_process_counts(text):
    check_against(count_model, lambda t: values.parse_count(t, "--max-processes", low=1, high=U32_MAX), text)


@given(edgy_text | st.from_regex(r"[+-]?([0-9]{0,4}\.?[0-9]{0,4})([eE][+-]?[0-9]{1,3})?", fullmatch=True))
def test_cpu_quotas(text):
    check_against(cores_model, values.parse_cpu_quota, text)


long_text = st.text(min_size=250, max_size=260)


@given(edgy_text | long_text)
def test_run_ids(text):
    check_against(run_id_model, values.parse_run_id, text)


@given(
    st.builds(
        "{}={}".format,
        edgy_text | st.from_regex(r"[A-Za-z_][A-Za-z0-9._-]{0,70}", fullmatch=True),
        edgy_text | long_text,
    )
    | edgy_text
)
def test_labels(text):
    check_against(label_model, values.parse_label, text)


@given(st.builds("{}={}".format, edgy_text, edgy_text) | edgy_text)
def test_env_entries(text):
    check_against(env_model, values.parse_env_assignment, text)
    check_against(lambda t: t if env_key_ok(t) else None, lambda t: values.parse_env_key(t, "--env-remove"), text)


# The same grammars through the real CLI: a model-valid value runs, anything else is 100 with
# one line of explanation.
FLAG_VALUES = st.one_of(
    st.tuples(st.sampled_from(["--grace", "--snapshot-interval"]), edgy_text),
    st.tuples(st.just("--capture-max-bytes"), edgy_text),
    st.tuples(st.just("--run-id"), edgy_text),
    st.tuples(st.just("--label"), st.builds("{}={}".format, edgy_text, edgy_text)),
    st.tuples(st.just("--env"), st.builds("{}={}".format, edgy_text, edgy_text)),
    st.tuples(st.just("--env-remove"), edgy_text),
)
CLI_MODELS = {
    "--grace": lambda t: duration_model(t, False),
    "--snapshot-interval": lambda t: duration_model(t, True),
    "--capture-max-bytes": size_model,
    "--run-id": run_id_model,
    "--label": label_model,
    "--env": env_model,
    "--env-remove": lambda t: t if env_key_ok(t) else None,
}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(FLAG_VALUES.filter(lambda pair: "\x00" not in pair[1] and not pair[1].startswith("-")))
def test_the_cli_applies_each_grammar(tmp_path, pair):
    flag, value = pair
    extra = ["--capture-dir", tmp_path / "cap"] if flag == "--capture-max-bytes" else []
    proc = run_cli("run", "--jsonl", tmp_path / "run.jsonl", *extra, flag, value, "--", "true")
    assert b"Traceback" not in proc.stderr
    if CLI_MODELS[flag](value) is None:
        assert proc.returncode == 100, (flag, value, proc.stderr)
        assert proc.stderr.startswith(b"processkit-cli: "), proc.stderr
    else:
        assert proc.returncode == 0, (flag, value, proc.stderr)


# -- env files ------------------------------------------------------------------------------------
def rust_lines(text: str) -> list[str]:
    """Rust's str::lines: split at "\\n" or "\\r\\n"; a final line ending is optional, and a
    bare "\\r" (not before "\\n") stays in the line."""
    lines, current = [], []
    for ch in text:
        if ch == "\n":
            lines.append("".join(current[:-1] if current[-1:] == ["\r"] else current))
            current = []
        else:
            current.append(ch)
    if current:
        lines.append("".join(current))
    return lines


def env_file_model(data: bytes):
    """(entries, None) for a good file, or (None, the first bad line number; 0 for bad UTF-8)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, 0
    entries = []
    # a byte order mark that begins the file is skipped, as Docker's --env-file reads it (a5e5e293)
    for number, line in enumerate(rust_lines(text.removeprefix("\ufeff")), start=1):
        trimmed = "".join(line).strip("".join(RUST_WHITESPACE))
        if not trimmed or trimmed.startswith("#"):
            continue
        entry = env_model(line)
        if entry is None or "\x00" in entry[1]:  # no environment can carry a NUL: refused, not cut
            return None, number
        entries.append(entry)
    return entries, None


LINE_PIECES = st.sampled_from(
    [
        "K=v",
        "_A.b=",
        "K=a=b",
        "# c",
        "  #x=1",
        "=v",
        "K",
        "K V=1",
        "\u00a0",
        "\x1c",
        "\x1f=1",
        " ",
        "\t",
        "é=ü",
        "K=\x1b[31m",
    ]
)
env_file_text = st.lists(st.one_of(LINE_PIECES, edgy_text), max_size=8).flatmap(
    lambda lines: st.lists(st.sampled_from(["\n", "\r\n", "\r", ""]), min_size=len(lines), max_size=len(lines)).map(
        lambda ends: "".join(line + end for line, end in zip(lines, ends))
    )
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(env_file_text.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=40))
@example(b"\xef\xbb\xbf")  # a byte order mark alone: an empty file (found by this test in CI)
@example(b"\xef\xbb\xbfA=1\n\xef\xbb\xbfB=2\n")  # only the first is skipped: a later one is in its key
def test_env_files(tmp_path, data):
    """Accepted entries are applied in order (the last one for a key wins); a bad file is a
    setup failure (111) naming the file and the line, never the value."""
    path = tmp_path / "vars.env"
    path.write_bytes(data)
    entries, bad_line = env_file_model(data)
    try:
        built = build_environment(EnvPlan(clear=True, files=(str(path),)), "run-x")
    except Failure as failure:
        assert (failure.kind, failure.code) == (Kind.SETUP, 111)
        assert bad_line is not None, (data, failure.message)
        if bad_line == 0:
            assert failure.message == f"invalid environment file `{path}`: environment file must contain valid UTF-8"
        else:
            prefix = f"invalid environment file `{path}`: line {bad_line}: "
            assert failure.message.startswith(prefix), (data, failure.message)
            assert failure.message[len(prefix) :] in (
                "expected KEY=VALUE",
                "an environment key may not be empty",
                "an environment key may not contain whitespace",
                "an environment key may not contain control characters or '='",
                "the value holds a NUL byte, which no environment can carry",
            )
        return
    assert bad_line is None, (data, built)
    assert built == dict(entries)


# -- the events reader ------------------------------------------------------------------------------
def refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity are Python's extensions


def lines_model(data: bytes, limit: int):
    """(number, raw, kind) per reported line: every "\\n"-separated piece is numbered; blank
    ones are not reported; over-long ones are reported by a head (compared on limit + 1 bytes:
    how much more of it is kept depends on where the chunks fell); the bytes kept as found, the
    JSON read from their lossy text."""
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    found = []
    for number, raw in enumerate(pieces, start=1):
        if len(raw) > limit:
            found.append((number, raw[: limit + 1], "overlong"))
        elif raw.strip():
            text = raw.decode("utf-8", "replace")  # the reference's from_utf8_lossy
            try:
                json.loads(text, parse_constant=refuse_constant)
                kind = None
            except (ValueError, RecursionError):
                kind = "json"
            found.append((number, raw, kind))
    return found


def line_kind(line: reader.Line):
    if line.problem is None:
        return None
    return {"not valid JSON": "json", "line exceeds": "overlong"}[line.problem.split(" (")[0].split(" the ")[0]]


stream_bytes = st.lists(
    st.one_of(
        st.binary(max_size=90),
        st.sampled_from([b'{"event":"runner_exit"}', b"{}", b"[1,2]", b"NaN", b'"\xff"', b"  ", b'{"a":' * 3]),
        st.builds(
            lambda v: json.dumps(v).encode(), st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
        ),
    ),
    max_size=10,
).map(b"\n".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH])
@given(stream_bytes, st.lists(st.integers(1, 40), min_size=1, max_size=8), st.booleans())
def test_the_reader_splits_any_bytes_in_any_chunking_like_the_model(monkeypatch, data, chunks, final_newline):
    """A 64-byte line limit, so that small examples reach the over-long path too."""
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 64)
    data += b"\n" if final_newline else b""
    splitter, got, offset, turn = reader.LineSplitter(), [], 0, 0
    while offset < len(data):
        size = chunks[turn % len(chunks)]
        got += splitter.feed(data[offset : offset + size])
        offset, turn = offset + size, turn + 1
    got += splitter.end()
    heads = [
        (line.number, line.raw[:65] if line_kind(line) == "overlong" else line.raw, line_kind(line)) for line in got
    ]
    assert heads == lines_model(data, 64)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | edgy_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(edgy_text, inner, max_size=3),
    max_leaves=10,
)
EVENT_NAMES = [
    "run_started",
    "members_snapshot",
    "root_exited",
    "timeout",
    "cancelled",
    "cleanup_finished",
    "output_captured",
    "runner_exit",
    "limit_hit",
    "spawn_failed",
    "\x1b[2J",
]


@pytest.fixture(scope="module")
def real_events(tmp_path_factory) -> list[dict]:
    """Every line of a real stream with capture, as templates to mutate."""
    where = tmp_path_factory.mktemp("real")
    run_cli(
        "run",
        "--jsonl",
        where / "run.jsonl",
        "--capture-dir",
        where / "cap",
        "--label",
        "k=v",
        "--",
        "sh",
        "-c",
        "echo x",
    )
    return [json.loads(line) for line in (where / "run.jsonl").read_text().splitlines()]


def _mutate(value, strings):
    """``value`` with every string leaf replaced by the next of ``strings`` (cycled)."""
    if isinstance(value, str):
        return next(strings)
    if isinstance(value, dict):
        return {key: _mutate(item, strings) for key, item in value.items()}
    if isinstance(value, list):
        return [_mutate(item, strings) for item in value]
    return value


def assert_one_safe_line(text: str) -> None:
    assert "\n" not in text
    assert not [ch for ch in text if unicodedata.category(ch) in ("Cc", "Cf")], text


@settings(max_examples=200, deadline=None)
@given(
    st.data(),
    st.lists(
        st.text(min_size=1, max_size=10) | st.sampled_from(["\x1b[31m", "\u202e", "\x07", "a\nb"]),
        min_size=1,
        max_size=6,
    ),
)
def test_any_event_renders_as_one_terminal_safe_line(real_events, data, strings):
    """Real events with hostile strings (still schema-shaped: the words path) and arbitrary
    objects (the field-by-field path): one line each, nothing unsafe, validation never raises."""
    import itertools

    template = data.draw(st.sampled_from(real_events))
    keep = {"schema_version", "time", "event"}
    mutated = {k: v if k in keep else _mutate(v, itertools.cycle(strings)) for k, v in template.items()}
    arbitrary = data.draw(
        st.dictionaries(st.sampled_from(["event", "time", "code", "source", "members", "labels"]), json_values)
    )
    arbitrary.setdefault("event", data.draw(st.sampled_from(EVENT_NAMES)))
    renderer, checks = Renderer(), StreamChecks()
    for number, event in enumerate((template, mutated, arbitrary), start=1):
        assert_one_safe_line(renderer.line(event))
        assert isinstance(validate_event(event), list)
        checks.add(reader.Line(number, json.dumps(event).encode(), event))
    assert isinstance(checks.problems(), list)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(stream_bytes, st.booleans())
def test_the_events_reader_renders_and_validates_any_file(tmp_path, monkeypatch, data, validate):
    """What ``events --file`` does with the file (``cli.events``: the reader, then the rendering or
    the validation), in this process: each line it writes is one safe line, and the only failure
    is the validation's (114). The command itself, end to end, is the next test's."""
    from processkit.cli import events

    written: list[bytes] = []
    monkeypatch.setattr(events.output, "_write", written.append)
    monkeypatch.setattr(events, "note", lambda text: None)  # stderr's notices: not the stream
    path = tmp_path / "stream.jsonl"
    path.write_bytes(data)
    consumer = events.Validation(strict_stream=False) if validate else events.Rendering()
    try:
        events.Reading(events.Target(str(path), None), consumer, follow=False).run()
        consumer.finish()
    except Failure as failure:
        assert validate and failure.kind is Kind.EVENTS_INVALID, failure
    assert written, "read to its end, either way says something"
    for line in b"".join(written).decode("utf-8").splitlines():
        assert_one_safe_line(line)


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(stream_bytes)
@example(b'\xff\x1b[31m\n{"event":"runner_exit"}\n{"a":{"a":\n[1,2]\n{"event":"\\u202e\\u0007","time":1}')
def test_the_events_command_survives_any_file(tmp_path, data):
    path = tmp_path / "stream.jsonl"
    path.write_bytes(data)
    rendered = run_cli("events", "--file", path)
    validated = run_cli("events", "--validate", "--file", path)
    assert (rendered.returncode, validated.returncode in (0, 114)) == (0, True), (rendered.stderr, validated.stderr)
    for proc in (rendered, validated):
        assert b"Traceback" not in proc.stderr
        for line in proc.stdout.decode("utf-8").splitlines():
            assert_one_safe_line(line)


# -- the control client against a hostile runner ---------------------------------------------------
class FakeRunner:
    """A registry record whose lock this process holds (so it is live) and a socket that answers
    every connection with the next reply it is given (a callable: what it returns, once called)."""

    def __init__(self, registry):
        self.registry = str(registry)
        self.run_dir = RunDir()  # an endpoint of the shape a runner publishes
        self.endpoint = self.run_dir.socket_path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.endpoint)
        self._listener.listen(4)
        self.reply = b""
        registry.mkdir(mode=0o700, exist_ok=True)
        self._lock = os.open(registry / "run-f.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        record = registry_record("fake", "run-f.lock", endpoint=self.endpoint)
        (registry / "run-f.json").write_text(json.dumps(record))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(100)
                    conn.sendall(self.reply() if callable(self.reply) else self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()
        os.close(self._lock)
        os.unlink(self.endpoint)
        self.run_dir.close()


@pytest.fixture(scope="module")
def fake_runner(tmp_path_factory):
    where = tmp_path_factory.mktemp("fake")
    runner = FakeRunner(where / "registry")
    yield runner
    runner.close()


SNAPSHOT = {
    "snapshot_version": 2,
    "run_id": "fake",
    "mechanism": "cgroup_v2",
    "root_pid": 7,
    "started_at": "2026-07-20T21:00:00.000Z",
    "jsonl": "/x.jsonl",
    "capture_dir": None,
    "members": [{"pid": 7, "ppid": 1, "name": "sh", "start_time": "1"}],
}
ATTESTATION = {
    "attestation_version": 1,
    "run_id": "fake",
    "verdict": "member",
    "peer_pid": 7,
    "mechanism": "cgroup_v2",
    "checked_at": "2026-07-20T21:00:00.000Z",
}
ACK = {"accepted": True, "action": "cancel", "run_id": "fake"}


def _bend(document: dict, data) -> dict:
    """The document with some fields replaced by arbitrary JSON values (or hostile text)."""
    bent = dict(document)
    for key in data.draw(st.lists(st.sampled_from(sorted(document) + ["error", "extra"]), max_size=3)):
        bent[key] = data.draw(json_values)
    if data.draw(st.booleans()):
        bent["members"] = [{"pid": 7, "ppid": None, "name": data.draw(edgy_text), "start_time": data.draw(edgy_text)}]
    return bent


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(st.data())
def test_the_control_client_takes_only_replies_that_keep_the_contract(fake_runner, monkeypatch, data):
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", fake_runner.registry)
    verb, document, check = data.draw(
        st.sampled_from(
            [
                ("inspect", SNAPSHOT, replies.check_snapshot),
                ("attest", ATTESTATION, replies.check_attestation),
                ("cancel", ACK, replies.ack_check("cancel")),
            ]
        )
    )
    reply = data.draw(
        st.one_of(
            st.builds(lambda d: json.dumps(d).encode() + b"\n", st.just(document).map(lambda d: _bend(d, data))),
            st.binary(max_size=200),
            st.binary(max_size=100).map(lambda b: b + b"\n"),
        )
    )
    fake_runner.reply = reply
    try:
        answer = request_by_id("fake", verb, check)
    except Failure as failure:
        assert failure.code == 103 and failure.kind.label in (
            "control_unreachable",
            "incompatible_contract",
            "ipc_deadline",
        ), failure.message
        assert_one_safe_line(failure.message)
        return
    assert answer == check(answer, "fake", verb)  # what is handed on keeps the contract itself
    if verb == "inspect":
        for line in render_snapshot(answer):
            assert_one_safe_line(line)


def test_a_runners_refusal_shows_each_control_character_as_a_space(fake_runner):
    """As the reference's normalize_peer_error_text: each unsafe character of a runner's error
    becomes one space (a run is not collapsed), then the ends are trimmed."""
    fake_runner.reply = json.dumps({"error": "\n no\n\nentry\x1b\u202e here \t"}).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli("cancel", "--run-id", "fake", env=env)
    assert done.returncode == 103, done.stderr
    assert done.stderr.decode() == "processkit-cli: cannot cancel run `fake`: no  entry   here\n", done.stderr
