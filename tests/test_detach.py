"""``run --detach``: the launcher returns as soon as the detached copy proves the run started,
relays the copy's failure when it does not, and the run goes on as an ordinary one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, cli_command, pid_alive, read_events, run_cli, start_cli, wait_for_event
from control_support import envelope, listed
from fifo_ends import opened_for_writing
from streams import PY, by_name, check_stream, one, python_child

WAIT = ("--timeout", "20s", "--report-outcome")


def outcome(run_id: str) -> dict:
    proc = run_cli("wait", "--run-id", run_id, *WAIT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_detached_run_returns_once_started_and_carries_on_alone(tmp_path):
    """The child is held at a gate the test opens only after the launcher returned: the launcher
    waited for the handshake, not for the child (an order, whatever the host's speed)."""
    jsonl, capture, gate = tmp_path / "d.jsonl", tmp_path / "cap", tmp_path / "gate"
    os.mkfifo(gate)
    child = python_child(
        "import sys; print('to stdout', flush=True); sys.stderr.write('to stderr\\n'); "
        f"open({str(gate)!r}).read(); sys.exit(7)"
    )
    proc = run_cli("run", "--detach", "--run-id", "det-1", "--jsonl", jsonl, "--capture-dir", capture, "--", *child)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    events = read_events(jsonl)
    started = events[0]
    assert started["event"] == "run_started" and started["run_id"] == "det-1"
    assert not by_name(events, "root_exited"), "the launcher returned only after the child ended"
    assert pid_alive(started["root_pid"])
    assert os.getsid(started["root_pid"]) != os.getsid(0), "the detached runner did not start a new session"
    os.close(opened_for_writing(gate, what="the child's open of the gate"))  # it goes on only now, the launcher gone

    assert outcome("det-1") == {
        "run_id": "det-1",
        "status": "reported",
        "code": 7,
        "source": "child_exit",
        "child_code": 7,
    }
    events = check_stream(jsonl, 7)
    assert (capture / "stdout.log").read_bytes() == b"to stdout\n"
    assert (capture / "stderr.log").read_bytes() == b"to stderr\n"
    captured = one(events, "output_captured")
    assert captured["stdout"]["bytes"] == len(b"to stdout\n") and not captured["stdout"]["truncated"]


def test_the_copy_gets_a_generated_run_id_and_a_command_from_stdin(tmp_path):
    """Without --run-id the launcher picks the id and hands it to the copy; a command piped on
    stdin is written out after '--', since the copy's stdin is null."""
    jsonl, command = tmp_path / "d.jsonl", tmp_path / "argv.json"
    command.write_text(json.dumps(python_child("raise SystemExit(3)")))
    with open(command, "rb") as stdin:
        launcher = start_cli("run", "--detach", "--jsonl", jsonl, stdin=stdin)
        assert launcher.wait(SAFETY_NET) == 0, launcher.stderr.read()
    launcher.stdout.close()
    launcher.stderr.close()
    run_id = read_events(jsonl)[0]["run_id"]
    assert run_id.startswith(f"run-{launcher.pid}-")
    assert wait_for_event(jsonl, "runner_exit")["code"] == 3


def test_deadlines_and_snapshots_keep_working_detached(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    proc = run_cli(
        "run",
        "--detach",
        "--run-id",
        "det-t",
        "--jsonl",
        jsonl,
        "--timeout",
        "1500ms",
        "--snapshot-interval",
        "150ms",
        "--",
        "sleep",
        "30",
    )
    assert proc.returncode == 0, proc.stderr
    assert outcome("det-t") == {
        "run_id": "det-t",
        "status": "reported",
        "code": 106,
        "source": "timeout",
        "child_code": None,
    }
    events = check_stream(jsonl, 106)
    # Ten intervals fit in the timeout; three is the margin a starved runner (each timer late,
    # the next armed from the late one) still clears, while a detached copy that lost its
    # snapshot timer writes none or one.
    assert len(by_name(events, "members_snapshot")) >= 3


def test_a_detached_run_answers_the_control_plane(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    assert run_cli("run", "--detach", "--run-id", "det-c", "--jsonl", jsonl, "--", "sleep", "30").returncode == 0
    [row] = listed()
    assert (row["run_id"], row["health"], row["jsonl"]) == ("det-c", "live", str(jsonl))
    inspected = run_cli("inspect", "--run-id", "det-c", "--json")
    assert json.loads(inspected.stdout)["root_pid"] == read_events(jsonl)[0]["root_pid"]
    assert run_cli("cancel", "--run-id", "det-c").returncode == 0
    wait_for_event(jsonl, "runner_exit")
    check_stream(jsonl, 108)


def test_a_detached_start_failure_relays_the_copys_code(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    proc = run_cli(
        "--error-format",
        "json",
        "run",
        "--detach",
        "--run-id",
        "det-f",
        "--jsonl",
        jsonl,
        "--",
        tmp_path / "no-such-program",
    )
    assert proc.returncode == 101
    assert proc.stdout == b""
    error = envelope(proc)
    assert (error["kind"], error["run_id"]) == ("spawn_error", "det-f")
    assert "no-such-program" in error["message"]
    check_stream(jsonl, 101)
    assert listed() == []


@pytest.mark.parametrize("flag, value, words", [
    ("--capture-dir", "passwd", "could not set up output capture in `{}`: File exists (os error 17)"),
    ("--stdin-file", "missing", "could not open stdin file `{}`: No such file or directory (os error 2)"),
    # a long path: the cause after it is said too (the reason was cut at 256 characters)
    ("--capture-dir", "d" * 150 + "/" + "e" * 150 + "/passwd", "could not set up output capture in `{}`: File exists (os error 17)"),
])  # fmt: skip
def test_a_detached_setup_failure_says_the_copys_reason(tmp_path, flag, value, words):
    """A setup failure is in no event: the copy, whose stderr is null, tells its launcher why."""
    jsonl, path = tmp_path / "d.jsonl", tmp_path / value
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "passwd").write_text("x\n")
    proc = run_cli("run", "--detach", "--run-id", "det-s", "--jsonl", jsonl, flag, path, "--", "true")
    assert proc.returncode == 111
    assert (
        proc.stderr
        == (
            "processkit-cli: run `det-s` did not start: the detached runner failed with the same code it would have "
            f"reported in the foreground (111); see `{jsonl}`: {words.format(path)}\n"
        ).encode()
    )
    check_stream(jsonl, 111)


@pytest.mark.parametrize("flag", ["--inherit-stdio", "--inherit-stdin"])
def test_detach_refuses_to_share_the_callers_terminal(tmp_path, flag):
    jsonl = tmp_path / "d.jsonl"
    proc = run_cli("run", "--detach", flag, "--jsonl", jsonl, "--", "true")
    assert proc.returncode == 100, proc.stderr
    assert b"--detach" in proc.stderr
    assert not jsonl.exists()


def test_an_unopenable_jsonl_fails_before_anything_is_spawned(tmp_path):
    marker = tmp_path / "spawned"
    proc = run_cli(
        "run",
        "--detach",
        "--jsonl",
        tmp_path / "missing" / "d.jsonl",
        "--",
        *python_child(f"open({str(marker)!r}, 'w')"),
    )
    assert proc.returncode == 111
    assert b"could not open the JSONL events file" in proc.stderr
    assert listed() == [] and not marker.exists()


def test_run_does_not_load_the_launcher_unless_detached(tmp_path):
    probe = (
        "import sys\n"
        "from processkit.cli.main import main\n"
        f"code = main(['run', '--jsonl', {str(tmp_path / 'r.jsonl')!r}, '--', 'true'])\n"
        "print(code, 'processkit.cli.detach' in sys.modules)\n"
    )
    result = subprocess.run([PY, "-c", probe], capture_output=True, timeout=SAFETY_NET)
    assert result.stdout.split() == [b"0", b"False"], result.stderr


# -- the handshake's own verdicts, against stand-in copies ------------------------------------------
def _handshake(tmp_path, script: str):
    """Run the launcher's handshake against a stand-in copy (a Python one-liner that may write
    the JSONL itself); returns the Failure it raised, or None when the run counted as started."""
    from processkit.cli.detach import Handshake
    from processkit.errors import Failure

    jsonl = tmp_path / "d.jsonl"
    jsonl.write_bytes(b"")
    stream = os.open(jsonl, os.O_RDONLY | os.O_CLOEXEC)  # the launcher's: the file it made, read there
    copy = subprocess.Popen([PY, "-c", script, str(jsonl)])
    try:
        Handshake(copy, str(jsonl), "hs-1", stream=stream).complete()
    except Failure as failure:
        return failure
    finally:
        os.close(stream)
        if copy.poll() is None:
            copy.kill()
        copy.wait()
    return None


MARKER = 'import json, sys; open(sys.argv[1], "w").write(json.dumps({"event": "run_started", "run_id": %r}) + "\\n")'


def test_the_handshake_accepts_only_this_runs_run_started(tmp_path):
    assert _handshake(tmp_path, MARKER % "hs-1" + "; import time; time.sleep(30)") is None
    failure = _handshake(tmp_path, MARKER % "another-run")
    assert (failure.code, failure.kind.label) == (111, "setup")


@pytest.mark.parametrize(
    "code, kind",
    [(0, "setup"), (5, "setup"), (101, "spawn_error"), (102, "container_error"), (111, "setup"), (116, "unknown")],
)
def test_a_copy_ending_before_the_proof_is_relayed_or_111(tmp_path, code, kind):
    failure = _handshake(tmp_path, f"raise SystemExit({code})")
    expected = code if 100 <= code <= 119 else 111
    assert (failure.code, failure.kind.label) == (expected, kind)


def test_a_relayed_usage_code_gets_the_json_envelope(tmp_path, capsys):
    """Only parse errors stay human text: a usage code relayed from the copy is a run failure."""
    from processkit.cli.main import render_failure

    failure = _handshake(tmp_path, "raise SystemExit(100)")
    assert (failure.code, failure.kind.label) == (100, "usage")
    render_failure(failure, "json", "run", "hs-1")
    envelope = json.loads(capsys.readouterr().err)
    assert (envelope["code"], envelope["kind"], envelope["run_id"]) == (100, "usage", "hs-1")


def test_a_copy_that_never_proves_its_start_is_killed_at_the_bound(tmp_path, monkeypatch):
    from processkit.cli import detach

    monkeypatch.setattr(detach, "HANDSHAKE_SECONDS", 0.3)
    started = time.monotonic()
    failure = _handshake(tmp_path, "import time; time.sleep(30)")
    assert failure.code == 111 and "killed" in failure.message
    # The bound is 0.3 s and the copy would sleep 30 s: 20 s leaves a loaded host 60x the bound
    # while still telling a bound obeyed from one ignored.
    assert time.monotonic() - started < 20


def test_the_copy_argv_drops_detach_and_adds_the_run_id_and_no_echo(tmp_path):
    jsonl = str(tmp_path / "d.jsonl")
    code = (
        "import json; from processkit.cli import detach, run\n"
        f"argv = ['--detach', '--jsonl', {jsonl!r}, '--', 'true', '--detach']\n"
        "print(json.dumps(detach.copy_argv(argv, run.parse(argv))))\n"
    )
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=SAFETY_NET)
    argv = json.loads(result.stdout)
    assert argv[:7] == [sys.executable, "-m", "processkit", "run", "--jsonl", jsonl, "--run-id"]
    assert argv[7].startswith("run-") and argv[8:] == ["--no-echo", "--", "true", "--detach"]


def test_a_launcher_started_as_the_console_script_re_runs_that_script(tmp_path):
    script = cli_command()[0]
    if not os.path.isfile(script) or len(cli_command()) > 1:
        pytest.skip("processkit-cli is not installed as a console script")
    jsonl = tmp_path / "d.jsonl"
    assert (
        run_cli("run", "--detach", "--run-id", "det-s", "--no-echo", "--jsonl", jsonl, "--", "sleep", "30").returncode
        == 0
    )
    runner = wait_for_event(jsonl, "members_snapshot")["members"][0]["ppid"]  # written just after run_started
    with open(f"/proc/{runner}/cmdline", "rb") as handle:
        cmdline = [os.fsdecode(arg) for arg in handle.read().split(b"\0")[:-1]]
    assert os.path.realpath(cmdline[0]) == os.path.realpath(sys.executable)
    assert cmdline[1:] == [script, "run", "--run-id", "det-s", "--no-echo", "--jsonl", str(jsonl), "--", "sleep", "30"]
    assert run_cli("kill", "--run-id", "det-s").returncode == 0
    wait_for_event(jsonl, "runner_exit")
