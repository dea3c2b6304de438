"""``events``: a run's JSONL read back. Rendered for people, passed through byte for byte,
followed to the run's end, and validated (every line against the shipped schema, and the whole
stream's invariants) on the streams of every kind of ending the runner has."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, read_events, run_cli, start_cli, wait_for_event
from control_support import envelope
from streams import PY, check_stream, python_child, read_until
from test_registry import _hold, _record, _write

SLEEP = ("sleep", "30")


@dataclasses.dataclass(frozen=True)
class Scenario:
    options: tuple
    command: tuple
    code: int
    words: str  # what the rendering must say about this ending
    ending: str | None = None  # how the test ends the run once it started: a signal or a client
    env: tuple = ()


SCENARIOS = {
    "exit": Scenario((), python_child("print('hello')"), 0, "the child exited with code 0"),
    "signal_death": Scenario(
        (), python_child("import os; os.kill(os.getpid(), 9)"), 137, "killed by signal 9 (SIGKILL)"
    ),
    "timeout": Scenario(
        ("--timeout", "300ms", "--snapshot-interval", "100ms"), SLEEP, 106, "the run exceeded its 300ms"
    ),
    "idle_timeout": Scenario(
        ("--idle-timeout", "200ms", "--grace", "1s"), SLEEP, 106, "no output for 200ms (grace 1s)"
    ),
    "cancel": Scenario((), SLEEP, 107, "cancelled by SIGTERM", ending="sigterm"),
    "control_cancel": Scenario((), SLEEP, 108, "cancelled by a control-plane cancel", ending="cancel"),
    "control_kill": Scenario((), SLEEP, 109, "hard-killed by a control-plane kill", ending="kill"),
    "capture": Scenario(
        ("--capture-dir", "{tmp}/cap"), python_child("print('x' * 3000)"), 0, "captured stdout 2.9 KiB"
    ),
    "overflow": Scenario(
        ("--capture-dir", "{tmp}/ovf", "--capture-max-bytes", "16", "--capture-overflow", "cancel"),
        python_child("import time; print('y' * 100, flush=True); time.sleep(30)"),
        113,
        "stdout went over its capture limit of 16 B",
    ),
    "spawn_failure": Scenario((), ("{tmp}/no-such-program",), 101, "the program could not be started"),
    "setup_failure": Scenario(("--stdin-file", "{tmp}/no-such-file"), ("true",), 111, "a setup failure"),
    "limit_refused": Scenario(
        ("--max-processes", "8"),
        ("true",),
        102,
        "the processes limit cannot be enforced here",
        env=(("PROCESSKIT_CGROUP_PARENT", "{tmp}/no-cgroup2"), ("PROCESSKIT_CGROUP_V1_ROOT", "{tmp}/no-cgroup1")),
    ),
}


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    """Every scenario's finished stream, all runs started at once: name -> (path, exit code)."""
    tmp = tmp_path_factory.mktemp("scenarios")
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": str(tmp / "registry")}
    started = {}
    for name, scenario in SCENARIOS.items():
        jsonl = tmp / f"{name}.jsonl"
        args = ["run", "--run-id", name, "--no-echo", "--jsonl", jsonl, *scenario.options, "--", *scenario.command]
        own_env = {**env, **{key: value.replace("{tmp}", str(tmp)) for key, value in scenario.env}}
        started[name] = (jsonl, start_cli(*[str(a).replace("{tmp}", str(tmp)) for a in args], env=own_env))
    for name, (jsonl, proc) in started.items():
        ending = SCENARIOS[name].ending
        if ending is None:
            continue
        wait_for_event(jsonl, "run_started")
        if ending == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            stopped = run_cli(ending, "--run-id", name, env=env)
            assert stopped.returncode == 0, stopped.stderr
    finished = {}
    for name, (jsonl, proc) in started.items():
        proc.communicate(timeout=SAFETY_NET)
        finished[name] = (jsonl, proc.returncode)
    return finished


def events_cli(*args, **kwargs) -> subprocess.CompletedProcess:
    proc = run_cli("events", *args, **kwargs)
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc


# -- every scenario's stream ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenarios_stream_validates(streams, name):
    jsonl, code = streams[name]
    assert code == SCENARIOS[name].code
    events = check_stream(jsonl, code)  # the test suite's own checker agrees it is valid
    proc = events_cli("--file", jsonl, "--validate")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.decode() == f"checked {len(events)} line{'s' if len(events) > 1 else ''}: all valid\n"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_json_reproduces_the_stream_byte_for_byte(streams, name):
    jsonl, _ = streams[name]
    proc = events_cli("--file", jsonl, "--json")
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout == jsonl.read_bytes()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_rendering_is_one_line_per_event_in_words(streams, name):
    jsonl, code = streams[name]
    events = read_events(jsonl)
    proc = events_cli("--file", jsonl)
    assert proc.returncode == 0 and proc.stderr == b""
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(events)
    for line, event in zip(lines, events):
        assert line.startswith(event["time"]) and f"  {event['event']} " in line
        assert all(ch.isprintable() for ch in line), line
    assert SCENARIOS[name].words in proc.stdout.decode()
    assert f"the runner exited with code {code}: " in lines[-1]


# -- invalid streams -----------------------------------------------------------------------------
def _mutations(lines: list[bytes]) -> dict:
    """name -> (the corrupted stream, what the report must say)."""
    exit_line = lines[-1]
    wrong_type = json.loads(exit_line)
    wrong_type["code"] = "zero"
    extra_field = json.loads(lines[0])
    extra_field["surprise"] = True
    ending = next(line for line in lines if b'"root_exited"' in line)
    return {
        "no_runner_exit": (lines[:-1], "stream: 0 runner_exit events, expected exactly one"),
        "two_runner_exits": (lines + [exit_line], "stream: 2 runner_exit events"),
        "runner_exit_not_last": (lines + [lines[1]], "stream: runner_exit (line 7) is not the last line"),
        "run_started_not_first": (
            [lines[1], lines[0]] + lines[2:],
            "stream: run_started is not the first line (line 2)",
        ),
        "two_endings": (lines[:3] + [ending] + lines[3:], "stream: 2 ending events"),
        "wrong_type": (lines[:-1] + [json.dumps(wrong_type).encode()], 'line 7: /code: expected integer, got "zero"'),
        "unknown_field": ([json.dumps(extra_field).encode()] + lines[1:], "line 1: /surprise: property is not allowed"),
        "not_json": (lines[:2] + [lines[2][:-5]] + lines[3:], "line 3: not valid JSON"),
        # replaced as the reference replaces it (U+FFFD for each bad byte), then checked as any line
        "invalid_utf8": (
            lines[:2] + [b'{"event":"\xff\xfe"}'] + lines[2:],
            'line 3: /event: "\ufffd\ufffd" is not one of',
        ),
        "over_a_mebibyte": (
            lines[:2] + [b'{"pad":"' + b"p" * (1024 * 1024) + b'"}'] + lines[2:],
            "line 3: line exceeds the 1048576-byte limit",
        ),
    }


@pytest.fixture(scope="module")
def corrupted(streams, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corrupted")
    lines = streams["exit"][0].read_bytes().splitlines()
    made = {}
    for name, (content, expected) in _mutations(lines).items():
        path = tmp / f"{name}.jsonl"
        path.write_bytes(b"\n".join(content) + b"\n")
        made[name] = (path, expected)
    return made


MUTATIONS = (
    "no_runner_exit",
    "two_runner_exits",
    "runner_exit_not_last",
    "run_started_not_first",
    "two_endings",
    "wrong_type",
    "unknown_field",
    "not_json",
    "invalid_utf8",
    "over_a_mebibyte",
)


LINE_MUTATIONS = ("wrong_type", "unknown_field", "not_json", "invalid_utf8", "over_a_mebibyte")
STREAM_MUTATIONS = tuple(name for name in MUTATIONS if name not in LINE_MUTATIONS)


@pytest.mark.parametrize("name", LINE_MUTATIONS)
def test_a_corrupted_line_fails_validation_with_what_is_wrong(corrupted, name):
    path, expected = corrupted[name]
    proc = events_cli("--error-format", "json", "--file", path, "--validate")
    assert proc.returncode == 114
    report = proc.stdout.decode()
    assert expected in report, report
    assert report.splitlines()[-1].startswith("checked ")
    problem = envelope(proc)
    assert problem["kind"] == "events_invalid"
    count, noun = report.splitlines()[-1].split(":")[0].split()[1:]  # checked 8 lines
    # the reference's sentence, its "do" whatever the count
    said = f"1 of {count} checked {noun} do not conform to this binary's event schema (`probe --print-schema`)"
    assert problem["message"] == said


@pytest.mark.parametrize("name", STREAM_MUTATIONS)
def test_a_stream_whose_every_line_conforms_validates_with_a_note(corrupted, name):
    """As the reference: exit 0 when every line conforms; what only the whole stream gets
    wrong is a note on stderr, and stdout is the reference's report."""
    path, expected = corrupted[name]
    proc = events_cli("--file", path, "--validate")
    assert proc.returncode == 0, proc.stderr
    lines = len(path.read_bytes().splitlines())
    assert proc.stdout.decode() == f"checked {lines} lines: all valid\n"
    assert f"processkit-cli: note: {expected}".encode() in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", STREAM_MUTATIONS)
def test_strict_stream_makes_the_whole_streams_findings_count(corrupted, name):
    path, expected = corrupted[name]
    proc = events_cli("--error-format", "json", "--file", path, "--validate", "--strict-stream")
    assert proc.returncode == 114
    report = proc.stdout.decode()
    assert expected in report, report
    assert report.splitlines()[-1].endswith("stream problem") or report.splitlines()[-1].endswith("stream problems")
    assert envelope(proc)["kind"] == "events_invalid"


def test_strict_stream_passes_a_well_formed_stream_and_needs_validate(streams):
    jsonl, _ = streams["exit"]
    proc = events_cli("--file", jsonl, "--validate", "--strict-stream")
    assert proc.returncode == 0 and proc.stdout.decode().endswith(": all valid\n") and proc.stderr == b""
    proc = events_cli("--file", jsonl, "--strict-stream")
    assert proc.returncode == 100 and b"'--strict-stream' requires '--validate'" in proc.stderr


@pytest.mark.parametrize("mode", [(), ("--json",)])
def test_unreadable_lines_are_reported_and_the_rest_is_still_read(corrupted, mode):
    path, _ = corrupted["over_a_mebibyte"]
    proc = events_cli("--file", path, *mode)
    assert proc.returncode == 0
    assert b"line 3: line exceeds the 1048576-byte limit and was skipped" in proc.stderr
    assert len(proc.stdout.splitlines()) == len(path.read_bytes().splitlines()) - 1
    path, _ = corrupted["invalid_utf8"]
    proc = events_cli("--file", path, *mode)
    said = 'line 3: not valid UTF-8 (byte 11), replaced with U+FFFD: {"event":"\ufffd\ufffd"}\n'
    assert (proc.returncode, proc.stderr.decode()) == (0, said)  # replaced and reported, as the reference
    third = proc.stdout.splitlines()[2]
    assert third == b'{"event":"\xff\xfe"}' if mode else "\ufffd\ufffd" in third.decode()


def test_the_rendering_is_terminal_safe(tmp_path):
    hostile = {
        "schema_version": 1,
        "time": "2026-07-20T21:00:00.000Z",
        "event": "spawn_failed",
        "code": 101,
        "message": "evil\u001b[31m\u202ereversed\nforged line",
    }
    unknown = {
        "schema_version": 1,
        "time": "2026-07-20T21:00:01.000Z",
        "event": "teleported\u001b]0;x\u0007",
        "to": "\u200bmars",
    }
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(hostile) + "\n" + json.dumps(unknown) + "\n")
    proc = events_cli("--file", path)
    text = proc.stdout.decode()
    assert len(text.splitlines()) == 2
    # As the reference's terminal boundary: each unsafe character is shown as a space, so the
    # words it separated stay apart ("reversed forged", not "reversedforged").
    assert "the program could not be started: evil [31m reversed forged line" in text
    assert "teleported ]0;x " in text and "to= mars" in text
    assert all(ch.isprintable() and ch not in "\u202e\u200b" for ch in text.replace("\n", ""))


@pytest.mark.parametrize("error_format", ["human", "json"])
def test_an_unreadable_streams_hostile_name_is_said_with_its_controls_escaped(tmp_path, error_format):
    """The human line shows the name's controls as escapes (one line, nothing a terminal acts
    on); the envelope holds the name as given, which its JSON escapes."""
    missing = tmp_path / "a\nb\x1b[31m\u202ec.jsonl"
    proc = run_cli("events", "--file", missing, "--error-format", error_format)
    assert proc.returncode == 111 and proc.stdout == b""
    said = proc.stderr.decode()
    assert said.count("\n") == 1 and "\x1b" not in said
    if error_format == "json":
        assert f"could not open the events stream `{missing}`: " in json.loads(said)["message"], said
    else:
        assert "\u202e" not in said
        assert f"could not open the events stream `{tmp_path}/a\\nb\\x1b[31m\\u202ec.jsonl`: " in said, said


# -- following -----------------------------------------------------------------------------------
def _first_output(proc: subprocess.Popen, timeout: float = SAFETY_NET) -> bytes:
    """What the follower printed up to its first newline (at least): proof that it is reading
    before the run ends. Read unbuffered, so communicate() gets exactly the rest."""
    return read_until(proc.stdout, b"\n", "the follower printed no line", timeout)


@pytest.mark.parametrize("locator", ["--run-id", "--file"])
def test_follow_ends_with_the_runner_exit_of_a_live_run(tmp_path, locator):
    jsonl, go = tmp_path / "f.jsonl", tmp_path / "go"
    wait_go = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)"
    run = start_cli("run", "--run-id", "fol", "--no-echo", "--jsonl", jsonl, "--", *python_child(wait_go))
    wait_for_event(jsonl, "run_started")
    follower = start_cli("events", locator, "fol" if locator == "--run-id" else jsonl, "--follow", "--json")
    first = _first_output(follower)
    go.touch()
    rest, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert run.wait(SAFETY_NET) == 0
    assert first + rest == jsonl.read_bytes()
    assert json.loads(rest.splitlines()[-1])["event"] == "runner_exit"
    run.stdout.close()
    run.stderr.close()


def test_follow_stops_once_a_killed_runner_is_gone_and_the_file_is_still(tmp_path):
    jsonl = tmp_path / "k.jsonl"
    run = start_cli("run", "--run-id", "doomed", "--no-echo", "--jsonl", jsonl, "--", *SLEEP)
    wait_for_event(jsonl, "run_started")
    follower = start_cli("events", "--run-id", "doomed", "--follow")
    _first_output(follower)
    run.kill()  # abrupt: no runner_exit is ever written
    run.communicate(timeout=60)
    try:
        # It stops (a follower that never did would run into the bound). Its settle runs from its
        # last look that saw the runner live, which a stalled follower took long before the kill:
        # timed from here it can look early on a loaded host, so the settle is checked on a clock
        # the test moves (test_follow.py's test_the_follower_waits_its_settle_once_the_writer_is_gone).
        out, err = follower.communicate(timeout=60)
    finally:  # the killed run's tree (its child sleeps on in its group): ended now, not by a later sweep
        pruned = run_cli("prune")
        assert pruned.returncode == 0, pruned.stderr
    assert follower.returncode == 0
    assert b"ends without a terminal `runner_exit` event: run `doomed` is no longer live" in err
    assert b"runner_exit" not in out


def test_a_stream_input_is_read_without_a_first_byte_deadline(streams):
    """/dev/stdin is a pipe whose first bytes come late: nothing here may give up on it."""
    data = streams["exit"][0].read_bytes()
    late = f"import sys, time; time.sleep(0.6); sys.stdout.buffer.write(open({str(streams['exit'][0])!r}, 'rb').read())"
    for mode in (["--json"], ["--validate"]):
        writer = subprocess.Popen([PY, "-c", late], stdout=subprocess.PIPE)
        proc = subprocess.run(
            cli_command() + ["events", "--file", "/dev/stdin", *mode],
            stdin=writer.stdout,
            capture_output=True,
            timeout=SAFETY_NET,
        )
        writer.stdout.close()
        writer.wait()
        assert proc.returncode == 0, proc.stderr
        expected = data if mode == ["--json"] else f"checked {len(data.splitlines())} lines: all valid\n".encode()
        assert proc.stdout == expected


# -- finding the stream --------------------------------------------------------------------------
def test_run_id_reads_the_stream_a_live_run_publishes(tmp_path):
    jsonl = tmp_path / "live.jsonl"
    run = start_cli("run", "--run-id", "alive", "--no-echo", "--jsonl", jsonl, "--", *SLEEP)
    wait_for_event(jsonl, "members_snapshot")
    proc = events_cli("--run-id", "alive", "--json")
    assert proc.returncode == 0 and proc.stdout == jsonl.read_bytes()
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=60)


def test_run_id_failures_are_control_errors(tmp_path, isolated_registry):
    proc = events_cli("--error-format", "json", "--run-id", "nobody")
    assert proc.returncode == 103 and envelope(proc)["kind"] == "not_found"
    _write(isolated_registry, "run-a", _record("nostream", "run-a.lock"))
    proc = events_cli("--run-id", "nostream")
    assert (proc.returncode, proc.stderr.decode()) == (
        103,
        "processkit-cli: cannot read events for run `nostream`: its registry record publishes no JSONL stream — "
        "the run was started without `--jsonl`, so it has no lifecycle stream to read\n",
    )
    _write(isolated_registry, "run-b", _record("twice", "run-b.lock", jsonl=str(tmp_path / "one.jsonl")))
    _write(isolated_registry, "run-c", _record("twice", "run-c.lock", jsonl=str(tmp_path / "two.jsonl")))
    held = _hold(isolated_registry, "run-b")
    try:
        proc = events_cli("--error-format", "json", "--run-id", "twice")
    finally:
        os.close(held)
    assert proc.returncode == 103 and envelope(proc)["kind"] == "ambiguous_run_id"


@pytest.mark.parametrize(
    "args, code",
    [
        (("--json", "--validate", "--file", "x"), 100),
        (("--run-id", "a", "--file", "x"), 100),
        ((), 100),
        (("--file", "{tmp}/absent.jsonl"), 111),
        (("--file", "{tmp}"), 111),
        (("--file", ""), 100),  # an empty path names none (before: 111, "could not open")
    ],
)
def test_bad_invocations_and_unreadable_streams(tmp_path, args, code):
    proc = events_cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == b""


# -- what the shipped schema allows, through the CLI ---------------------------------------------
def test_a_new_limit_kind_validates_and_the_printed_schema_says_any_string(streams, tmp_path):
    """A stream naming a limit kind this build does not know still conforms (new kinds must
    not make old validators reject streams), as the reference's schema says."""
    lines = streams["exit"][0].read_bytes().splitlines()
    started = json.loads(lines[0])
    limit = {"schema_version": 1, "time": started["time"], "event": "limit_hit", "limit": "gpu_memory", "detail": None}
    path = tmp_path / "limit.jsonl"
    path.write_bytes(b"\n".join([json.dumps(limit).encode()] + lines[1:]) + b"\n")
    proc = events_cli("--file", path, "--validate")
    assert proc.returncode == 0, proc.stdout
    schema = json.loads(run_cli("probe", "--json", "--print-schema").stdout)
    assert schema["$defs"]["limit_hit"]["properties"]["limit"]["type"] == "string"
    assert "enum" not in schema["$defs"]["limit_hit"]["properties"]["limit"]


def test_a_time_ending_in_a_newline_does_not_validate(streams, tmp_path):
    """ECMA-262 patterns: ``$`` is the end of the string, not "before a final newline"."""
    lines = streams["exit"][0].read_bytes().splitlines()
    first = json.loads(lines[0])
    first["time"] += "\n"
    path = tmp_path / "newline.jsonl"
    path.write_bytes(b"\n".join([json.dumps(first).encode()] + lines[1:]) + b"\n")
    proc = events_cli("--file", path, "--validate")
    assert proc.returncode == 114
    assert proc.stdout.decode().startswith("line 1: /time: ") and "does not match" in proc.stdout.decode()


def test_a_no_grace_cancel_whose_tree_drained_is_not_said_to_drain_within_a_grace(streams, tmp_path):
    """A control-plane cancel has no grace: a tree that ended on the SIGTERM before the hard kill
    drained, but not "within the grace" (the real stream, with the draining tree's shutdown)."""
    lines = streams["control_cancel"][0].read_bytes().splitlines()
    events = [json.loads(line) for line in lines]
    (cleanup,) = [e for e in events if e["event"] == "cleanup_finished"]
    cleanup["shutdown"].update(members_after=0, drained_within_grace=True, escalated=False, elapsed_ms=0)
    path = tmp_path / "drained.jsonl"
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    text = events_cli("--file", path).stdout.decode()
    assert "cancelled by a control-plane cancel (no grace)" in text
    assert "SIGTERM sent, the tree drained after 0ms, no hard kill needed" in text
    assert "within the grace" not in text


@pytest.mark.parametrize("pids, words", [([4242], "1 member remains (pids 4242)"), ([4242, 4243], "2 members remain")])
def test_the_members_a_teardown_left_agree_with_their_count(streams, tmp_path, pids, words):
    """``cleanup_finished``'s ``remaining`` said with its verb agreeing (before: "1 member
    remain"); the real stream, its teardown made to have left ``pids``."""
    events = [json.loads(line) for line in streams["exit"][0].read_bytes().splitlines()]
    (cleanup,) = [e for e in events if e["event"] == "cleanup_finished"]
    cleanup.update(remaining=len(pids), remaining_pids=pids)
    path = tmp_path / "left.jsonl"
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    assert f"teardown finished: {words}" in events_cli("--file", path).stdout.decode()
