"""Exit codes, the event stream of a plain run, pre-spawn failures and how errors are printed."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    LOADED_MACHINE_HEALTH,
    SAFETY_NET,
    REFERENCE_SCHEMAS,
    cli_command,
    reference_schemas_present,
    pid_alive,
    read_events_tolerant,
    run_cli,
    start_cli,
    wait_for_event,
)
from processkit.events.validate import validate_event
from streams import check_stream, one, python_child, reference_summary, run_checked, stderr_lines

ENVELOPE_KEYS = ["error_version", "code", "kind", "operation", "run_id", "retryable", "message"]


@pytest.mark.parametrize("code", [0, 1, 42, 101, 255])
def test_the_runner_exits_with_the_childs_own_code(tmp_path, code):
    proc, events = run_checked(tmp_path, command=["sh", "-c", f"exit {code}"], returncode=code)
    assert [e["event"] for e in events] == [
        "run_started",
        "members_snapshot",
        "root_exited",
        "resource_summary",
        "cleanup_started",
        "cleanup_finished",
        "runner_exit",
    ]
    exited = one(events, "root_exited")
    assert (exited["outcome"], exited["code"], exited["signal"]) == ("exited", code, None)
    # A code inside the reserved band is the child's: only runner_exit.source can tell.
    assert (events[-1]["source"], events[-1]["child_code"]) == ("child_exit", code)
    finished = one(events, "cleanup_finished")
    assert (finished["soft_terminate"], finished["shutdown"]) == (None, None)
    assert proc.stderr == b""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGUSR1])
def test_a_signal_death_exits_128_plus_the_signal(tmp_path, signum):
    code = 128 + int(signum)
    _, events = run_checked(tmp_path, command=["sh", "-c", f"kill -{int(signum)} $$"], returncode=code)
    exited = one(events, "root_exited")
    assert (exited["outcome"], exited["code"], exited["signal"]) == ("signalled", None, int(signum))
    assert (events[-1]["source"], events[-1]["child_code"]) == ("child_exit", code)


def _write_script(path, mode: int):
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize(
    "program, reason",
    [
        (lambda tmp: str(tmp / "no-such-program"), "not found"),
        (lambda tmp: _write_script(tmp / "not-executable.sh", 0o644), "Permission denied"),
        (lambda tmp: str(tmp), "Permission denied"),
    ],
    ids=["missing", "not-executable", "directory"],
)
def test_a_program_that_cannot_start_is_a_spawn_failure(tmp_path, program, reason):
    proc, events = run_checked(tmp_path, command=[program(tmp_path)], returncode=101)
    assert [e["event"] for e in events] == ["spawn_failed", "runner_exit"]
    assert reason in events[0]["message"]
    assert events[-1]["source"] == "spawn_error"
    assert stderr_lines(proc) == [f"processkit-cli: could not start the program: {events[0]['message']}"]


@pytest.mark.parametrize("backend", ["native", "python"])
def test_an_empty_program_name_is_no_such_file(tmp_path, backend):
    """execvp("") fails ENOENT, as the reference's spawn does; ProcessKit takes "" for a path (its
    ``is_bare_name("")`` is false), so it is "not found", not "on PATH". A search of the PATH for
    "" tried each directory itself (``/usr/bin/``) and said "Permission denied". Both spawns, 101."""
    env = {**os.environ, "PROCESSKIT_SPAWN": backend}
    proc, events = run_checked(tmp_path, command=[""], returncode=101, env=env)
    assert [e["event"] for e in events] == ["spawn_failed", "runner_exit"]
    assert stderr_lines(proc) == ["processkit-cli: could not start the program: `` not found"]


def _open_file_limit(soft: int, hard: int):
    """A preexec_fn giving the CLI's process this open-file limit."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("soft", [7, 12, 16])
def test_a_low_soft_open_file_limit_is_raised_for_the_run_and_given_back_to_the_child(tmp_path, soft):
    """``ulimit -Sn 7``..``16`` failed as an internal error (104, "Too many open files") at
    whichever import or open came first; the runner raises its own soft limit to what a run needs
    where the hard one allows, and the child runs with the caller's."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 64:
        pytest.skip("the hard open-file limit here leaves no room to raise a soft one")
    show = python_child("import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))")
    proc, events = run_checked(tmp_path, command=show, returncode=0, preexec_fn=_open_file_limit(soft, hard))
    assert proc.stdout.decode().split() == [str(soft), str(hard)]
    assert events[-1]["source"] == "child_exit"


@pytest.mark.parametrize("limit", [7, 12, 16])
def test_a_hard_open_file_limit_too_low_for_a_run_is_one_setup_line_naming_it(tmp_path, limit):
    marker = tmp_path / "ran"
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--", "touch", marker, preexec_fn=_open_file_limit(limit, limit))
    assert proc.returncode == 111, proc.stderr
    assert stderr_lines(proc) == [
        f"processkit-cli: the open-file limit (ulimit -n: {limit}, hard limit {limit}) is below the 48 files "
        "a run may need; raise the limit"
    ]
    assert not marker.exists() and not jsonl.exists()


@pytest.mark.parametrize("command", [["probe", "--json"], ["list", "--json"]])
def test_a_command_that_runs_nothing_still_answers_under_an_open_file_limit_too_low_for_a_run(command):
    """Only the commands that run something are refused under such a limit: ``probe`` and ``list``
    (and ``doctor``, to say why) answer with what the hard limit allows, as before the check."""
    proc = run_cli(*command, preexec_fn=_open_file_limit(20, 20))
    assert proc.returncode == 0, proc.stderr
    assert b"open-file limit" not in proc.stderr
    for line in proc.stdout.splitlines():  # list --json: a line a run, none here maybe
        json.loads(line)


# A process that has loaded the limit's words, then makes them once its limit was lowered.
WORDS_AT_THE_LIMIT = (
    "import sys; from processkit import fdlimit; print('ready', flush=True); sys.stdin.readline(); "
    "print(fdlimit.exhausted('for the run'))"
)


def test_the_words_for_no_descriptor_left_need_no_descriptor(tmp_path):
    """A run's fault out of descriptors is said with the limit (``fdlimit.exhausted``), which read
    it through an import (``resource``) that itself needs a file: where none was left (the limit
    lowered under a running runner: ``prlimit``) the words raised ImportError, a traceback in the
    CLI's last resort. Now the limit is read by ``sysconf``."""
    child = subprocess.Popen(
        [sys.executable, "-c", WORDS_AT_THE_LIMIT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert child.stdout.readline() == b"ready\n"
    resource.prlimit(child.pid, resource.RLIMIT_NOFILE, (3, resource.prlimit(child.pid, resource.RLIMIT_NOFILE)[1]))
    out, err = child.communicate(b"\n", timeout=SAFETY_NET)
    assert (child.returncode, out.decode()) == (
        0,
        "no descriptor left for the run: the open-file limit (ulimit -n: 3) is reached; raise the limit\n",
    ), err.decode()[-2000:]


@pytest.mark.parametrize("bad", ["missing-dir", "a-file"])
def test_a_bad_cwd_is_a_spawn_failure(tmp_path, bad):
    (tmp_path / "a-file").write_text("")
    marker = tmp_path / "ran"
    proc, events = run_checked(tmp_path, "--cwd", tmp_path / bad, command=["touch", marker], returncode=101)
    assert [e["event"] for e in events] == ["spawn_failed", "runner_exit"]
    assert "--cwd" in events[0]["message"]
    assert not marker.exists()


@pytest.mark.parametrize(
    "words",
    [["--cwd", ""], ["--cwd="], ["--capture-dir", ""], ["--stdin-file", ""], ["--env-file", ""], ["--usage-file", ""]],
)
def test_an_empty_path_is_a_usage_error_before_anything_runs(tmp_path, words):
    """An empty path names none: the reference's parser (clap's PathBuf) refuses it, 100, nothing
    spawned, no events. Before, ``--cwd ''`` ran the child in the runner's directory (or failed
    101), ``--capture-dir ''`` wrote the logs there, the others failed 111."""
    proc = run_cli("run", "--jsonl", "run.jsonl", *words, "--", "touch", "ran", cwd=tmp_path)
    assert proc.returncode == 100, proc.stderr
    flag = words[0].rstrip("=")
    assert stderr_lines(proc) == [
        f"processkit-cli: invalid value '' for '{flag}': expected a path (an empty one names none)"
    ]
    assert os.listdir(tmp_path) == []


def test_an_empty_jsonl_is_a_usage_error(tmp_path):
    proc = run_cli("run", "--jsonl", "", "--", "touch", "ran", cwd=tmp_path)
    assert proc.returncode == 100, proc.stderr
    assert b"invalid value '' for '--jsonl'" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_cwd_is_resolved_against_the_runners_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    proc, events = run_checked(tmp_path, "--cwd", "sub", command=["pwd"], returncode=0, cwd=tmp_path)
    assert one(events, "run_started")["cwd"] == str(tmp_path / "sub")
    assert proc.stdout.decode().strip() == str(tmp_path / "sub")
    _, events = run_checked(tmp_path, command=["true"], returncode=0, cwd=tmp_path)
    assert one(events, "run_started")["cwd"] == str(tmp_path)


@pytest.mark.parametrize("where", ["missing-dir/run.jsonl", "."], ids=["missing-dir", "directory"])
def test_an_unopenable_jsonl_is_a_setup_failure_before_anything_runs(tmp_path, where):
    marker = tmp_path / "ran"
    proc = run_cli("run", "--jsonl", tmp_path / where, "--", "touch", marker)
    assert proc.returncode == 111
    assert not marker.exists() and not (tmp_path / "missing-dir").exists()
    [line] = stderr_lines(proc)
    assert line.startswith("processkit-cli: could not open the JSONL events file ")


def test_an_unreadable_runner_cwd_fails_setup_before_the_jsonl_is_opened(tmp_path):
    gone, jsonl, marker = tmp_path / "gone", tmp_path / "run.jsonl", tmp_path / "ran"
    gone.mkdir()
    proc = run_cli("run", "--jsonl", jsonl, "--", "touch", marker, cwd=gone, preexec_fn=gone.rmdir)
    assert proc.returncode == 111
    assert stderr_lines(proc) == [
        "processkit-cli: could not resolve the runner's current directory: No such file or directory (os error 2)"
    ]
    assert not jsonl.exists() and not marker.exists()


def test_a_jsonl_write_failure_warns_once_and_changes_nothing_else(tmp_path):
    proc = run_cli("run", "--jsonl", "/dev/full", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert proc.returncode == 7
    assert proc.stdout == b"out\n"
    warnings = [line for line in stderr_lines(proc) if "JSONL event logging disabled" in line]
    assert warnings == [
        "processkit-cli: warning: JSONL event logging disabled: could not write a JSONL event: No space left on device (os error 28)"
    ]
    assert b"err\n" in proc.stderr


def test_a_jsonl_write_failure_mid_run_stops_the_stream_not_the_run(tmp_path):
    """The file stops growing at RLIMIT_FSIZE while interval snapshots keep coming."""
    jsonl, limit = tmp_path / "run.jsonl", 2048

    def cap_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = run_cli(
        "run",
        "--jsonl",
        jsonl,
        "--snapshot-interval",
        "10ms",
        "--",
        "sh",
        "-c",
        "sleep 0.5; exit 3",
        preexec_fn=cap_file_size,
    )
    assert proc.returncode == 3
    assert stderr_lines(proc) == [
        "processkit-cli: warning: JSONL event logging disabled: could not write a JSONL event: File too large (os error 27)"
    ]
    complete = read_events_tolerant(jsonl)
    assert complete[0]["event"] == "run_started" and len(complete) > 2
    assert all(validate_event(e) == [] for e in complete)
    assert "runner_exit" not in [e["event"] for e in complete]
    assert jsonl.stat().st_size <= limit


@pytest.mark.parametrize(
    "args, code",
    [
        (["run", "--jsonl", "{dir}/run.jsonl", "--", "{dir}/missing"], 101),
        (["run", "--timeout", "soon", "--jsonl", "{dir}/run.jsonl", "--", "true"], 100),
        (["run", "--jsonl", "/dev/full", "--", "sh", "-c", "echo out; echo err >&2; exit 5"], 5),
        (["--help"], 0),
    ],
    ids=["spawn-failure", "usage-error", "jsonl-warning-and-echo", "help"],
)
def test_a_broken_stdout_and_stderr_change_no_exit_code(tmp_path, args, code):
    """Nobody reads the runner's output: its messages are lost, its exit code is not."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        argv = cli_command() + [arg.format(dir=tmp_path) for arg in args]
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=write_end, stderr=write_end, timeout=SAFETY_NET)
    finally:
        os.close(write_end)
    assert proc.returncode == code


def test_run_started_describes_the_run(tmp_path):
    argv = ["sh", "-c", "exit 0", "--token=s3cret"]
    proc, events = run_checked(
        tmp_path, "--label", "b=2", "--label", "a=1", "--label", "b=3", command=argv, returncode=0
    )
    started = one(events, "run_started")
    assert started["labels"] == {"a": "1", "b": "3"} and list(started["labels"]) == ["a", "b"]
    assert started["run_id"].startswith("run-") and started["root_pid"] > 0
    assert started["mechanism"] in ("cgroup_v2", "process_group") and started["abrupt_cleanup"] == "direct_child_only"
    digest = hashlib.sha256(b"\0".join(a.encode() for a in argv)).hexdigest()
    assert started["command"] == {"redacted": True, "argv": None, "argv_sha256": digest, "hint": None}
    assert "s3cret" not in json.dumps(events)


def test_the_generated_run_id_names_the_runner_pid(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--jsonl", jsonl, "--", "true")
    proc.communicate(timeout=SAFETY_NET)
    run_id = one(check_stream(jsonl, proc.returncode), "run_started")["run_id"]
    pid, nanos = run_id.split("-")[1:]
    assert int(pid) == proc.pid and len(nanos) >= 19


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["sh", "-c", "exit 0", "/x/MSBuild.dll", "/nodemode:1", "/NODEREUSE:TRUE"], "msbuild_node_reuse"),
        (["sh", "-c", "exit 0", "msbuild.dll /NodeMode:1", "/nodeReuse:true"], "msbuild_node_reuse"),
        (["sh", "-c", "exit 0", "MSBuild.dll", "/nodemode:1"], None),
        # Only ASCII is case-folded: U+0130 must not fold to an ASCII 'i'.
        (["sh", "-c", "exit 0", "MSBU\u0130LD.dll", "/nodemode:1", "/nodeReuse:true"], None),
    ],
)
def test_argv_raw_and_the_hint(tmp_path, argv, hint):
    _, events = run_checked(tmp_path, "--argv-raw", command=argv, returncode=0)
    command = one(events, "run_started")["command"]
    assert command["redacted"] is False and command["argv"] == argv and command["hint"] == hint
    assert command["argv_sha256"] == hashlib.sha256("\0".join(argv).encode()).hexdigest()


def test_an_argv_element_that_is_not_utf8_is_escaped_and_hashed_raw(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    raw = [b"sh", b"-c", b"exit 0", b"--path=/tmp/logs\xe9\\"]
    cmd = [os.fsencode(a) for a in cli_command()] + [b"run", b"--argv-raw", b"--jsonl", bytes(jsonl), b"--"] + raw
    proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, timeout=SAFETY_NET)
    command = one(check_stream(jsonl, proc.returncode), "run_started")["command"]
    assert command["argv"] == ["sh", "-c", "exit 0", "\0--path=/tmp/logs\\xe9\\\\"]
    assert command["argv_sha256"] == hashlib.sha256(b"\0".join(raw)).hexdigest()


def test_the_spawn_snapshot_lists_the_root_child(tmp_path):
    jsonl, release = tmp_path / "run.jsonl", tmp_path / "release"
    proc = start_cli("run", "--jsonl", jsonl, "--", "sh", "-c", f"while [ ! -e {release} ]; do sleep 0.01; done")
    snapshot = wait_for_event(jsonl, "members_snapshot")
    release.touch()
    proc.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, proc.returncode)
    root = one(events, "run_started")["root_pid"]
    assert snapshot["reason"] == "spawn" and snapshot["read_error"] is False
    [member] = [m for m in snapshot["members"] if m["pid"] == root]
    assert member["ppid"] == proc.pid and member["name"] == "sh" and int(member["start_time"]) > 0


def test_the_bare_fallback_says_what_it_cannot_measure_with_nulls(tmp_path, monkeypatch):
    """A process group on a host with no usable cgroup: the stream's summary is the reference's
    fallback's, every figure null and no read error; in the usage file, the subreaper's rusage
    gives CPU and I/O, and nothing holds a tree's peak memory or process count
    (test_accounting.py has the rest)."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    (tmp_path / "no-v1").mkdir()
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(tmp_path / "no-v1"))
    usage_file = tmp_path / "usage.json"
    _, events = run_checked(
        tmp_path, "--usage-file", usage_file, command=python_child("sum(range(10**6))"), returncode=0
    )
    reference_summary(events, forced=False)
    summary = json.loads(usage_file.read_text())
    assert summary["read_error"] is False
    assert (summary["peak_memory_bytes"], summary["peak_process_count"]) == (None, None)
    assert None not in (summary["total_cpu_ms"], summary["io_read_bytes"], summary["io_write_bytes"])


# -- --error-format --------------------------------------------------------------------------


def _envelope(proc) -> dict:
    lines = stderr_lines(proc)
    envelope = json.loads(lines[-1])
    assert list(envelope) == ENVELOPE_KEYS and envelope["error_version"] == 1
    assert envelope["code"] == proc.returncode and envelope["operation"] == "run"
    assert envelope["retryable"] is False
    if reference_schemas_present():
        import jsonschema

        jsonschema.validate(envelope, json.loads((REFERENCE_SCHEMAS / "error.schema.json").read_text()))
    return envelope


@pytest.mark.parametrize("before", [True, False], ids=["before-subcommand", "after-subcommand"])
def test_the_json_envelope_is_one_line_on_stderr(tmp_path, before):
    flag = ["--error-format", "json"]
    args = ["run", "--jsonl", tmp_path / "run.jsonl", "--", tmp_path / "missing"]
    proc = run_cli(*(flag + args if before else args[:1] + flag + args[1:]))
    assert proc.returncode == 101 and proc.stdout == b""
    assert len(stderr_lines(proc)) == 1
    envelope = _envelope(proc)
    assert (envelope["kind"], envelope["run_id"]) == ("spawn_error", None)
    # The reference's envelope says its error's message: the stream's, framed as stderr frames it.
    said = check_stream(tmp_path / "run.jsonl")[0]["message"]
    assert envelope["message"] == f"could not start the program: {said}"


def test_the_envelope_names_a_given_run_id_and_follows_the_childs_stderr(tmp_path):
    proc = run_cli(
        "run",
        "--error-format=json",
        "--run-id",
        "build-7",
        "--timeout",
        "100ms",
        "--jsonl",
        tmp_path / "run.jsonl",
        "--",
        "sh",
        "-c",
        "echo child-said >&2; exec sleep 30",
    )
    assert proc.returncode == 106
    envelope = _envelope(proc)
    assert (envelope["kind"], envelope["run_id"]) == ("timeout", "build-7")
    assert stderr_lines(proc)[0] == "child-said"


def test_a_setup_failure_renders_as_an_envelope_too(tmp_path):
    proc = run_cli("--error-format", "json", "run", "--jsonl", tmp_path / "no" / "run.jsonl", "--", "true")
    assert proc.returncode == 111 and _envelope(proc)["kind"] == "setup"


def test_usage_errors_stay_human_even_in_json_mode(tmp_path):
    proc = run_cli(
        "--error-format", "json", "run", "--timeout", "soon", "--jsonl", tmp_path / "run.jsonl", "--", "true"
    )
    assert proc.returncode == 100
    assert stderr_lines(proc)[0].startswith("processkit-cli: invalid value 'soon' for '--timeout'")


_TOKENS = [
    "run",
    "--jsonl",
    "--timeout",
    "--idle-timeout",
    "--grace",
    "--label",
    "--env",
    "--env-file",
    "--env-remove",
    "--run-id",
    "--run-id-env",
    "--cwd",
    "--capture-dir",
    "--capture-max-bytes",
    "--error-format",
    "--argv-raw",
    "--no-echo",
    "--inherit-stdio",
    "--max-processes",
    "--cpu-quota",
    "--",
    "=",
    "",
    "0",
    "1s",
    "json",
    "k=v",
    "-x",
    "\udcff",
    "\u202e",
    "nan",
    "99999999999999999999999",
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(
    st.lists(
        st.sampled_from(_TOKENS)
        | st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=8)
        | st.binary(min_size=1, max_size=8).filter(lambda b: b"\0" not in b).map(os.fsdecode),
        max_size=8,
    )
)
def test_no_input_ever_produces_a_traceback(tmp_path, argv):
    command = [os.fsencode(a) for a in cli_command()] + [os.fsencode(a) for a in argv] + [b"--", b"true"]
    proc = subprocess.run(command, capture_output=True, stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=SAFETY_NET)
    assert b"Traceback" not in proc.stderr
    assert proc.returncode in (0, 100, 101, 102, 111), (argv, proc.returncode, proc.stderr)
    if proc.returncode:
        assert proc.stderr.splitlines()[-1].startswith((b"processkit-cli: ", b"usage: ", b"{")), proc.stderr


BREAK_THE_RACE = """
import sys
from processkit.engine import runner

def broken(*args):
    raise RuntimeError("injected")

runner.race = broken
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_runner_bug_mid_run_still_tears_down_and_ends_the_stream(tmp_path):
    """No ending event, the usual tail, runner_exit(internal, 104), and no orphaned child."""
    jsonl = tmp_path / "run.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", BREAK_THE_RACE, "run", "--jsonl", str(jsonl), "--", "sleep", "30"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )
    assert proc.returncode == 104
    assert stderr_lines(proc) == ["processkit-cli: internal error: RuntimeError: injected"]
    events = check_stream(jsonl, 104)
    assert [e["event"] for e in events][2:] == [
        "resource_summary",
        "cleanup_started",
        "cleanup_finished",
        "runner_exit",
    ]
    assert one(events, "cleanup_finished")["shutdown"] is None
    assert not pid_alive(one(events, "run_started")["root_pid"])
