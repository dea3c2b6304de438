"""Hangs and bad input (issue 23): the drain's bounds whatever the producer and the reader do,
and failures after set-up that must still release everything and end the stream.

Faults that no outside timing can hit are injected the way tests/test_faults.py does: a small
wrapper program patches one function or constant of the engine, then runs the CLI's ``main``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import (
    SAFETY_NET,
    SHORT_EXIT_DRAIN,
    cli_command,
    patched_cli,
    pid_alive,
    read_events_tolerant,
    run_cli,
    wait_for_event,
    wait_for_file,
)
from processkit.events.validate import validate_event
from run_groups import groups_of
from streams import cgroup_v2_dir, check_stream, seconds_between, stderr_lines, wait_until

PY = sys.executable

# A reader that is slow but live: it takes a pipe's worth now and then.
SLOW_READER = "import os, time\nwhile os.read(0, 65536): time.sleep(0.05)"


def _escapee_run(tmp_path, ceiling: str):
    """A runner (drain ceiling patched to ``ceiling`` seconds, the pipes' bound after the root's
    exit shortened) whose child leaves an escapee
    (``setsid -f``) writing into the inherited stdout while the runner's stdout goes to a slow
    reader. Returns the runner, the reader, the JSONL and the escapee's pid file."""
    jsonl, pidfile = tmp_path / "run.jsonl", tmp_path / "escapee.pid"
    # The root ends once the escapee has told its pid from its own session: one still in the
    # root's process group when the root exits is ended with it, and no escapee holds the pipe.
    escape = f"setsid -f sh -c 'echo $$ > {pidfile}; exec timeout 120 yes aaaa'"
    child = f"{escape}; while [ ! -e {pidfile} ]; do sleep 0.01; done; exit 3"
    env = dict(os.environ, PROCESSKIT_CONTAINMENT="process_group")
    reader = subprocess.Popen([PY, "-c", SLOW_READER], stdin=subprocess.PIPE)
    runner = subprocess.Popen(
        patched_cli("teardown", "DRAIN_CEILING_SECONDS", ceiling, *SHORT_EXIT_DRAIN)
        + ["run", "--jsonl", str(jsonl), "--", "sh", "-c", child],
        stdin=subprocess.DEVNULL,
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert reader.stdin is not None
    reader.stdin.close()
    return runner, reader, jsonl, pidfile


def _end_escapee(reader, pidfile) -> None:
    try:
        with open(pidfile) as handle:
            os.kill(int(handle.read()), signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    reader.kill()
    reader.wait()


def test_an_escapee_refilling_the_pipe_for_a_slow_reader_ends_at_the_drain_ceiling(tmp_path, pump_backend):
    """The reader keeps making progress and the escapee keeps the backlog full: the drain still
    ends at its ceiling (patched to 1 s here), long before the escapee would, with one warning
    (and the escapee's own, when it outlived the pipe's close until the runner killed it)."""
    runner, reader, jsonl, pidfile = _escapee_run(tmp_path, "1.0")
    try:
        _, stderr = runner.communicate(timeout=60)  # unbounded, it would last the escapee's 120 s
    finally:
        _end_escapee(reader, pidfile)
    assert runner.returncode == 3
    # The escapee is killed after the run if the pipe's close (SIGPIPE) has not ended it first.
    escaped = "had left its process group (setsid or setpgid)"
    said = [line for line in stderr.decode().splitlines() if line.startswith("processkit-cli:")]
    assert [line for line in said if escaped not in line] == [
        "processkit-cli: warning: the consumer of the runner's stdout was still behind after 1s of draining; "
        "live echo abandoned"
    ]
    check_stream(jsonl, 3)


def test_a_stop_signal_during_the_drain_ends_it_at_once(tmp_path, pump_backend):
    """The same producer and reader, a ceiling far away: SIGTERM to the runner once the tree is
    torn down ends the drain; the run's own ending and exit code stand."""
    runner, reader, jsonl, pidfile = _escapee_run(tmp_path, "600.0")
    try:
        wait_for_event(jsonl, "cleanup_finished")
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=60)
    finally:
        runner.kill()
        _end_escapee(reader, pidfile)
    assert runner.returncode == 3
    assert "a stop signal cut the echo of the runner's stdout short; live echo abandoned" in stderr.decode()
    events = check_stream(jsonl, 3)
    assert "cancelled" not in [e["event"] for e in events]


def _into_a_pipe_nobody_reads(command: list[str], stderr_too: bool = False) -> subprocess.CompletedProcess:
    """``command`` run to its end with its stdout (and its stderr: ``stderr_too``, else ours to
    read) into a pipe nobody reads."""
    read_end, write_end = os.pipe()
    try:
        stderr = write_end if stderr_too else subprocess.PIPE
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=write_end, stderr=stderr, timeout=SAFETY_NET)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_two_echoes_into_one_pipe_nobody_reads_stall_once(tmp_path, pump_backend):
    """stdout and stderr into one pipe nobody reads (an agent's, ``--error-format json``): both
    echoes wait on one stall clock (patched to 1.5 s here), so the runner ends one stall after
    the child, not one for each stream in turn."""
    stall, jsonl = 1.5, tmp_path / "run.jsonl"
    child = "import sys; sys.stdout.buffer.write(b'x' * 1000000); sys.stdout.flush(); sys.stderr.buffer.write(b'y' * 1000000)"
    runner = _into_a_pipe_nobody_reads(
        patched_cli("teardown", "ECHO_STALL_SECONDS", repr(stall))
        + ["run", "--error-format", "json", "--jsonl", str(jsonl), "--", PY, "-c", child],
        stderr_too=True,
    )
    assert runner.returncode == 0
    events = check_stream(jsonl, 0)
    assert stall <= seconds_between(events, "root_exited", "runner_exit") < 1.6 * stall


def test_a_stalled_reader_costs_one_stall_from_the_childs_exit(tmp_path):
    """A child that fills the echo's backlog for a reader that takes nothing, and exits at once
    with no descendant: its stdout is paused, so still open at the exit, which the exit's wait
    for the pipes (``race.EXIT_DRAIN_SECONDS``) waits out; the echoes' stall clock starts at the
    exit as well (one bound after it in all, the reference's ``PUMP_TEARDOWN``), so the runner
    ends one stall after the child, not one wait and then one stall (both patched to 1.5 s here).
    Measured from ``run_started``, the child's exit being at once (``root_exited`` comes after
    the wait)."""
    stall, jsonl = 1.5, tmp_path / "run.jsonl"
    child = "import os\nv = memoryview(b'x' * 4_600_000)\nwhile v:\n    v = v[os.write(1, v):]\n"
    patched = patched_cli("teardown", "ECHO_STALL_SECONDS", repr(stall), "race", "EXIT_DRAIN_SECONDS", repr(stall))
    runner = _into_a_pipe_nobody_reads(patched + ["run", "--jsonl", str(jsonl), "--", PY, "-c", child])
    assert runner.returncode == 0, runner.stderr
    assert b"stopped reading; live echo abandoned" in runner.stderr
    events = check_stream(jsonl, 0)
    assert stall <= seconds_between(events, "run_started", "runner_exit") < 1.6 * stall


# -- argv and environments execve cannot carry ------------------------------------------------
def _entries(registry) -> list[str]:
    """Registry records and locks, which a run removes (its ``*.ended`` tombstone stays on purpose)."""
    return sorted(name for name in os.listdir(registry) if not name.endswith(".ended"))


def _nothing_left(runner_pid: int, registry) -> None:
    """No registry entry, no run directory and no cgroup of the runner ``runner_pid``."""
    assert _entries(registry) == []
    assert not [name for name in os.listdir("/tmp") if name.startswith(f"pkc-{runner_pid}-")]
    parent = cgroup_v2_dir(os.getpid())
    if parent is not None:
        assert groups_of(runner_pid, None, parent) == []


def _run_with_stdin(tmp_path, stdin: bytes, *args) -> tuple[subprocess.CompletedProcess, object]:
    jsonl = tmp_path / "run.jsonl"
    proc = subprocess.run(
        cli_command() + ["run", "--jsonl", str(jsonl), *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    return proc, jsonl


def test_a_nul_in_an_argv_from_stdin_is_a_usage_error_naming_the_argument(tmp_path, spawn_backend, isolated_registry):
    """``["echo", "a\\u0000b"]``: execve would cut the argument at the NUL (the native path did,
    silently). It is refused as the lone surrogate is: 100, naming the argument, before the JSONL
    or anything else exists (it was a spawn failure, 101)."""
    proc, jsonl = _run_with_stdin(tmp_path, b'["echo","a\\u0000b"]')
    assert (proc.returncode, proc.stdout) == (100, b"")
    assert stderr_lines(proc) == [
        "processkit-cli: the command read from standard input: argument 1 holds a NUL character (at offset 1), "
        "which no argument can carry"
    ]
    assert not jsonl.exists()


def test_an_argv_from_stdin_nested_100k_deep_is_a_usage_error(tmp_path, isolated_registry):
    """It was 104 (RecursionError in the decoder); JSON nests at most 64 deep (bounded.loads)."""
    proc, jsonl = _run_with_stdin(tmp_path, b"[" * 100_000 + b"]" * 100_000)
    assert proc.returncode == 100
    assert stderr_lines(proc) == [
        "processkit-cli: standard input must carry the command as a non-empty JSON array of strings"
    ]
    assert not jsonl.exists()


def test_a_lone_surrogate_in_an_argv_from_stdin_is_a_usage_error(tmp_path, spawn_backend, isolated_registry):
    """JSON's ``\\ud800`` alone is no text (the reference's parser refuses it): 100, before the
    JSONL or anything else exists."""
    proc, jsonl = _run_with_stdin(tmp_path, b'["/bin/ech\\ud800"]')
    assert proc.returncode == 100
    assert stderr_lines(proc) == [
        "processkit-cli: the command read from standard input: argument 0 holds a lone surrogate ('\\ud800'), "
        "which no argument can carry"
    ]
    assert not jsonl.exists()


def test_a_nul_in_an_env_file_value_is_refused_at_its_line(tmp_path, isolated_registry):
    env_file = tmp_path / "env"
    env_file.write_bytes(b"A=1\nB=x\0y\n")
    marker = tmp_path / "started"
    proc, jsonl = _run_with_stdin(tmp_path, b"", "--env-file", env_file, "--", "touch", marker)
    assert proc.returncode == 111
    assert stderr_lines(proc) == [
        f"processkit-cli: invalid environment file `{env_file}`: line 2: the value holds a NUL byte, which no environment can carry"
    ]
    assert [e["event"] for e in check_stream(jsonl, 111)] == ["runner_exit"]
    assert not marker.exists()


# -- a phase that raises where it should not --------------------------------------------------
RAISE_EMFILE = "lambda *a, **k: (_ for _ in ()).throw(OSError(24, 'Too many open files'))"

# (module, name): where the fault is injected, and whether the child had been started by then.
FAULTS = {
    "publish_before_spawn": ("launch", "_publish", False),
    "emfile_after_spawn": ("streams", "EchoSink", True),
    "in_finish": ("runner", "ResourceSummary", True),
    "in_release": ("runner", "release", True),
    # the release and the last resort's own release both fail at one step: the rest still runs
    "in_every_release": ("teardown", "close_targets", True),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_after_setup_still_ends_the_tree_releases_everything_and_ends_the_stream(
    tmp_path, isolated_registry, fault
):
    """Whatever raises once the first resource exists: the child is killed, the registry entry,
    the run directory and the cgroup are gone, and the stream ends with runner_exit{internal}."""
    module, name, spawned = FAULTS[fault]
    jsonl, cap_dir = tmp_path / "run.jsonl", tmp_path / "cap"
    runner = subprocess.Popen(
        patched_cli(module, name, RAISE_EMFILE)
        + ["run", "--jsonl", str(jsonl), "--capture-dir", str(cap_dir), "--timeout", "200ms", "--", "sleep", "30"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 104, stderr
    problem = "OSError: [Errno 24] Too many open files"
    warned = (
        [f"processkit-cli: warning: the run's release was incomplete: {problem}"] if fault == "in_every_release" else []
    )
    said = stderr.decode().splitlines()  # the run's fault in the CLI's words for the limit (fdlimit.unexpected)
    assert said[:-1] == warned and said[-1].startswith("processkit-cli: no descriptor left for the run: "), said
    events = read_events_tolerant(jsonl)
    assert all(validate_event(e) == [] for e in events)
    assert (events[-1]["event"], events[-1]["source"], events[-1]["code"]) == ("runner_exit", "internal", 104)
    started = [e for e in events if e["event"] == "run_started"]
    assert bool(started) == spawned
    if started:
        assert not pid_alive(started[0]["root_pid"]), "the child outlived its runner's internal error"
    _nothing_left(runner.pid, isolated_registry)


# -- run --detach: a JSONL that cannot be written, and a launcher that gives up ------------------
def test_a_detached_run_whose_jsonl_fails_is_started_not_killed(tmp_path, isolated_registry):
    """``--jsonl /dev/full``: the copy's proof comes through its readiness pipe; the launcher
    exits 0 at once with one warning, and the run is live and controllable. The child's
    environment does not carry the pipe's variable."""
    env_out = tmp_path / "env"
    child = f"env > {env_out}; sleep 60"
    proc = run_cli("run", "--detach", "--run-id", "full-1", "--jsonl", "/dev/full", "--", "sh", "-c", child)
    assert proc.returncode == 0, proc.stderr
    assert stderr_lines(proc) == [
        "processkit-cli: warning: the detached run started, but its JSONL event logging is disabled: "
        "could not write a JSONL event: No space left on device (os error 28)"
    ]
    try:
        listed = json.loads(run_cli("list", "--json").stdout)
        assert (listed["run_id"], listed["health"]) == ("full-1", "live")
        wait_for_file(env_out)
    finally:
        assert run_cli("cancel", "--run-id", "full-1").returncode == 0
    wait_until(lambda: _entries(isolated_registry) == [], what="the cancelled run's release")
    assert "PROCESSKIT_DETACH_READY_FD" not in env_out.read_text()


# A launcher whose handshake bound is argv[1] seconds and whose copy never proves its start.
GIVING_UP_LAUNCHER = """
import sys
from processkit.cli import detach
detach.HANDSHAKE_SECONDS = float(sys.argv[1])
detach.program = lambda: [sys.executable, "-c", sys.argv[2]]
from processkit.cli.main import main
raise SystemExit(main(sys.argv[3:]))
"""
SILENT_COPY = """
import sys
from processkit.engine import launch
launch._tell_launcher = lambda *args: None
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_launcher_that_gives_up_ends_the_whole_tree_it_started(tmp_path, isolated_registry):
    """The copy runs its child (and a grandchild) but its proof never arrives (JSONL on
    /dev/full, readiness withheld): at the bound the launcher fails with 111, and the child, the
    grandchild, the registry entry and the run directory are all gone, not left for prune."""
    pids = tmp_path / "pids"
    child = f"sleep 60 & echo $$ $! > {pids}; wait"
    launcher = subprocess.run(
        [PY, "-c", GIVING_UP_LAUNCHER, "3", SILENT_COPY]
        + ["run", "--detach", "--run-id", "given-up", "--jsonl", "/dev/full", "--", "sh", "-c", child],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert launcher.returncode == 111, launcher.stderr
    assert b"did not start within 3s" in launcher.stderr
    started = [int(pid) for pid in pids.read_text().split()]
    wait_until(lambda: not any(pid_alive(pid) for pid in started), what="the given-up run's tree to end")
    assert _entries(isolated_registry) == []
