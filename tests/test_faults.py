"""Faults around a run: a disk that fills under the JSONL, a registry that cannot be written, a
runner killed or signalled at the worst moment, a client whose reader goes away. The promise:
the run carries on, loses nothing it still reports, never hangs and leaves nothing behind.

Covered elsewhere, not repeated here: a capture file system that fills (test_capture.py: a full
file system latches write_error and loses nothing else); the JSONL on /dev/full and past
RLIMIT_FSIZE (test_run_exit_codes.py); repeated stop signals during a signal's teardown
(test_run_signals.py); the direct child of a SIGKILLed runner dying (test_run_containment.py).
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
    cli_command,
    pid_alive,
    read_events_tolerant,
    registry_entries,
    run_cli,
    start_cli,
    wait_for_event,
    wait_for_file,
)
from processkit.events.validate import validate_event
from streams import cgroup_v2_dir, check_stream, one, run_checked, stderr_lines, wait_until
from own_tmp import own_tmp  # noqa: F401
from run_groups import groups_of

PY = sys.executable


# -- disks ------------------------------------------------------------------------------------
def test_a_jsonl_disk_that_fills_mid_run_costs_only_the_stream(tmp_path, small_tmpfs):
    """One page of tmpfs holds the first events; the disk then fills while interval snapshots
    keep coming. One warning, and the echo, the capture and the exit code are untouched."""
    disk = small_tmpfs("jsonl", "size=4k")
    jsonl, cap_dir = disk / "run.jsonl", tmp_path / "cap"
    child = "for i in $(seq 40); do echo out$i; echo err$i >&2; sleep 0.01; done; exit 3"
    proc = run_cli(
        "run", "--jsonl", jsonl, "--snapshot-interval", "5ms", "--capture-dir", cap_dir, "--", "sh", "-c", child
    )
    out = "".join(f"out{i}\n" for i in range(1, 41)).encode()
    err = "".join(f"err{i}\n" for i in range(1, 41)).encode()
    assert proc.returncode == 3
    assert proc.stdout == out
    warnings = [line for line in stderr_lines(proc) if line.startswith("processkit-cli:")]
    assert warnings == [
        "processkit-cli: warning: JSONL event logging disabled: could not write a JSONL event: No space left on device (os error 28)"
    ]
    assert proc.stderr.replace(warnings[0].encode() + b"\n", b"") == err
    assert ((cap_dir / "stdout.log").read_bytes(), (cap_dir / "stderr.log").read_bytes()) == (out, err)
    complete = read_events_tolerant(jsonl)
    assert complete[0]["event"] == "run_started" and all(validate_event(e) == [] for e in complete)
    assert "runner_exit" not in [e["event"] for e in complete]


def test_a_jsonl_pipe_whose_reader_stalls_cannot_hang_the_run(tmp_path):
    """The JSONL is a FIFO whose reader takes one line and then nothing: once the pipe is full,
    a write that makes no progress for 2 s counts as failed. One warning; the child's own end
    (once the pipe is full: a loaded machine's runner had not filled it in the 1 s the child
    once slept, and a reader process of its own could take its line only after that) still
    ends the run, at most that stall later."""
    import fcntl
    import struct
    import termios
    import time

    fifo, go = tmp_path / "events.fifo", tmp_path / "go"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader, there from the start: the runner's open never waits
    child = f'until [ -e "{go}" ]; do sleep 0.01; done; exit 3'
    proc = start_cli("run", "--jsonl", fifo, "--snapshot-interval", "1ms", "--", "sh", "-c", child)
    try:
        deadline = time.monotonic() + SAFETY_NET
        taken = b""
        while not taken.endswith(b"\n"):  # the reader takes one line (a byte at a time: no more)
            assert time.monotonic() < deadline and proc.poll() is None, "no first line"
            try:
                taken += os.read(held, 1)
            except BlockingIOError:
                time.sleep(0.01)
        # The writer is stuck once the pipe holds all but a page and has not moved for 1 s (the
        # snapshots come every 1 ms): its 2 s stall then runs out whatever the child does. A pipe
        # merely nearly full could still take the run's last lines, which a loaded runner wrote
        # at the child's end without any stall.
        full = fcntl.fcntl(held, fcntl.F_GETPIPE_SZ) - 4096
        last, since = -1, time.monotonic()
        while True:
            assert time.monotonic() < deadline and proc.poll() is None, "the runner never filled the pipe"
            queued = struct.unpack("i", fcntl.ioctl(held, termios.FIONREAD, b"\0" * 4))[0]
            if queued != last:
                last, since = queued, time.monotonic()
            elif queued >= full and time.monotonic() - since >= 1.0:
                break
            time.sleep(0.01)
        go.touch()
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(held)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert err.decode().splitlines() == [
        "processkit-cli: warning: JSONL event logging disabled: could not write a JSONL event: its reader took nothing for 2s"
    ]


# -- the registry -----------------------------------------------------------------------------
@pytest.mark.parametrize("blocked", ["not_a_directory", "read_only", "full"])
def test_an_unwritable_registry_costs_only_the_control_plane(tmp_path, small_tmpfs, monkeypatch, blocked):
    """The run warns once and goes on; no client can find it, and nothing is left behind. A
    registry it can open but not add to (no inode left) is said as the reference's entry that
    could not be created; one it cannot even make 0700 again (read-only), or make at all, as its
    open: the system's words and number, as the reference shows them."""
    said = "could not open the run registry: Not a directory (os error 20)"
    if blocked == "read_only":
        registry = small_tmpfs("registry", "size=64k,mode=0700,ro")
        said = "could not open the run registry: Read-only file system (os error 30)"
    elif blocked == "full":
        registry = small_tmpfs("registry", "size=64k,mode=0700,nr_inodes=1")
        said = "could not create the run registry entry: "
    else:
        (tmp_path / "file").write_text("")
        registry = tmp_path / "file" / "runs"
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    proc, events = run_checked(tmp_path, "--run-id", "unlisted", command=["sh", "-c", "echo hi; exit 4"], returncode=4)
    assert proc.stdout == b"hi\n"
    warnings = stderr_lines(proc)
    assert len(warnings) == 1 and warnings[0].startswith(f"processkit-cli: warning: {said}"), warnings
    assert one(events, "run_started")["run_id"] == "unlisted"
    assert not os.path.isdir(registry) or registry_entries(registry) == []


# A bench whose late publication meets an error ``publish`` does not itself warn of: the
# engine's run path's, and the direct sample's (``benchmark/direct.py``).
LATE_PUBLICATION_FAILS = """
import errno, os, sys
from processkit.engine import launch
from processkit.benchmark import direct

def publish(*args, **kwargs):
    with open(os.environ["ATTEMPTS"], "a") as attempts:  # what each run's child waits for
        attempts.write("x")
    raise OSError(errno.ENOSPC, "No space left on device")

launch._publish = direct.register = publish
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("path", ["direct", "engine"])
def test_a_late_publication_that_fails_is_warned_of_in_the_reference_words(tmp_path, isolated_registry, path):
    """Bench runs (each published once its child has run a while) whose registrations fail:
    one warning for the three, the reference's for a registry entry it could not create, and
    the runs go on; through bench's direct sample and the engine's run path (the suite's
    switch). Each child ends once its own run's registration was tried: the k-th run's child once
    k were, which may be before it first looks (a slow start past the publication's time)."""
    attempts, started = tmp_path / "attempts", tmp_path / "started"
    attempts.touch()
    child = f"echo >> {started}; k=$(wc -l < {started}); "
    child += f'while [ "$(wc -c < {attempts})" -lt "$k" ]; do sleep 0.01; done'
    bench = subprocess.Popen(
        [
            sys.executable,
            "-c",
            LATE_PUBLICATION_FAILS,
            "bench",
            "--runs",
            "3",
            "--warmup",
            "0",
            "-N",
            "--command",
            json.dumps(["sh", "-c", child]),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PROCESSKIT_BENCH_PATH=path, ATTEMPTS=str(attempts)),
    )
    try:
        said = bench.communicate(timeout=60)[1]
    finally:
        if bench.poll() is None:
            bench.kill()
    assert said == b"processkit-cli: warning: could not create the run registry entry: No space left on device\n"
    assert (bench.returncode, attempts.read_text()) == (0, "xxx")


# -- the runner dies or is signalled at the worst moment ----------------------------------------
def test_a_sigkilled_runner_leaves_what_prune_reaps(tmp_path, isolated_registry, own_tmp):
    """The direct child dies with the runner; the entry turns stale; prune removes the entry,
    the socket directory and the run's (now empty) cgroup. The run's directory is in the test's
    own /tmp: another worker's run, sweeping on its way in, would hold this dead run's lock for a
    moment (its grace), which a prune waits for, up to its bound (tests/test_prune_held_lock.py)."""
    jsonl = tmp_path / "run.jsonl"
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "doomed", "--", "sleep", "30")
    wait_for_event(jsonl, "members_snapshot")
    started = one(read_events_tolerant(jsonl), "run_started")
    child = started["root_pid"]
    group = cgroup_v2_dir(child) if started["mechanism"] == "cgroup_v2" else None
    endpoint = json.loads(run_cli("list", "--json").stdout)["endpoint"]
    runner.kill()
    runner.communicate(timeout=SAFETY_NET)
    try:
        wait_until(lambda: not pid_alive(child), what="the child's end after its runner was SIGKILLed")
        assert json.loads(run_cli("list", "--json").stdout)["health"] == "stale"
        tally = run_cli("prune", "--json")
        assert (tally.returncode, json.loads(tally.stdout)["pruned"]) == (0, 1)
        assert registry_entries(isolated_registry) == []
        assert not os.path.exists(own_tmp.outside(os.path.dirname(endpoint)))
        assert group is None or not os.path.exists(group), "prune left the dead runner's empty cgroup"
    finally:
        if group is not None and os.path.isdir(group):
            os.rmdir(group)


# A runner whose container creation is followed at once by a stop signal: the moment between
# the cgroup existing and the child starting, which no outside timing can hit reliably.
SIGNAL_DURING_SETUP = """
import os, signal, sys
from processkit import containment

created = containment.create

def create(*args, **kwargs):
    container = created(*args, **kwargs)
    os.kill(os.getpid(), signal.Signals[sys.argv[1]])
    return container

containment.create = create
from processkit.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stop_signal_during_setup_ends_the_run_before_its_child(tmp_path, isolated_registry, name):
    """The run is cancelled (107) before anything is spawned; the stream is its runner_exit;
    the cgroup, the registry entry and the socket directory are gone."""
    jsonl, marker = tmp_path / "run.jsonl", tmp_path / "started"
    runner = subprocess.Popen(
        [PY, "-c", SIGNAL_DURING_SETUP, name, "run", "--jsonl", str(jsonl), "--", "touch", str(marker)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = runner.communicate(timeout=SAFETY_NET)
    named = {"SIGTERM": "SIGTERM", "SIGINT": "Ctrl-C", "SIGHUP": "SIGHUP"}[name]
    assert runner.returncode == 107, stderr
    # The reference's headline, as when the child had started: a script greps for it.
    assert stderr.decode().splitlines() == [f"processkit-cli: run cancelled ({named}): the child was not started"]
    assert [e["event"] for e in check_stream(jsonl, 107)] == ["runner_exit"]
    assert not marker.exists()
    assert registry_entries(isolated_registry) == []
    assert not [name for name in os.listdir("/tmp") if name.startswith(f"pkc-{runner.pid}-")]
    parent = cgroup_v2_dir(os.getpid())
    if parent is not None:
        assert groups_of(runner.pid, None, parent) == []


def test_a_stop_signal_ends_a_run_whose_stdin_fifo_has_no_writer_through_its_release(tmp_path, isolated_registry):
    """``--stdin-file`` names a FIFO nobody writes. The runner does not wait in open() for a
    writer (no timer would end that): the child runs, waiting for its input, so a stop signal
    ends the run as it ends any run, with its cancellation and nothing left behind."""
    fifo, jsonl = tmp_path / "input.fifo", tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    runner = start_cli("run", "--jsonl", jsonl, "--stdin-file", fifo, "--", "cat")
    try:
        wait_for_event(jsonl, "run_started")
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=SAFETY_NET) == 107
    finally:
        runner.kill()
        runner.wait()
    assert one(check_stream(jsonl, 107), "cancelled")["source"] == "sigterm"
    assert registry_entries(isolated_registry) == []


def test_a_stop_signal_during_a_control_cancels_grace_is_absorbed(tmp_path):
    """A control-plane cancel decided the ending; SIGTERMs to the runner during the grace change
    nothing: one cancelled event, 108, the grace served, a complete stream."""
    jsonl, ready = tmp_path / "run.jsonl", tmp_path / "ready"
    child = f"trap '' TERM; touch {ready}; while :; do sleep 0.05; done"
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "stubborn", "--grace", "1s", "--", "sh", "-c", child)
    wait_for_file(ready)
    assert run_cli("cancel", "--run-id", "stubborn").returncode == 0
    wait_for_event(jsonl, "cleanup_started")
    for _ in range(3):
        runner.send_signal(signal.SIGTERM)
    runner.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, 108)
    cancelled = one(events, "cancelled")
    assert (cancelled["source"], cancelled["grace_ms"]) == ("control_cancel", 1000)
    shutdown = one(events, "cleanup_finished")["shutdown"]
    assert shutdown["escalated"] is True and shutdown["elapsed_ms"] >= 1000
    finished = one(events, "cleanup_finished")
    assert (finished["remaining"], finished["kill_error"], finished["read_error"]) == (0, False, False)


# -- a client whose reader goes away ----------------------------------------------------------
def _stream_file(tmp_path):
    path = tmp_path / "events.jsonl"
    run_checked(tmp_path, command=["true"], returncode=0)
    source = next(tmp_path.glob("run-*.jsonl"))
    path.write_bytes(source.read_bytes() * 200)  # well past a pipe's buffer
    return path


CLIENT_OUTPUTS = {
    "events": ["events", "--file", "{stream}"],
    "events-json": ["events", "--json", "--file", "{stream}"],
    "list": ["list"],
    "prune-dry-run": ["prune", "--dry-run"],
    "probe": ["probe", "--json"],
}


@pytest.mark.parametrize("args", list(CLIENT_OUTPUTS.values()), ids=list(CLIENT_OUTPUTS))
def test_a_closed_stdout_ends_a_client_quietly(tmp_path, args):
    """``| head -1`` made deterministic: the reader is gone before the first write. The client
    ends with 141 (a filter killed by SIGPIPE) and says nothing: no traceback, no 104."""
    argv = [str(_stream_file(tmp_path)) if arg == "{stream}" else arg for arg in args]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            cli_command() + argv, stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, timeout=SAFETY_NET
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, b"")


def test_a_full_stdout_is_a_setup_failure_with_a_reason(tmp_path):
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            cli_command() + ["list"], stdin=subprocess.DEVNULL, stdout=full, stderr=subprocess.PIPE, timeout=SAFETY_NET
        )
    assert proc.returncode == 111
    assert proc.stderr == b"processkit-cli: cannot write to standard output: No space left on device\n"


# -- cgroups left by runners that died ----------------------------------------------------------
def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[19]


def _free_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("entry", ["prune", "run"])
def test_the_sweep_removes_only_empty_groups_whose_runner_is_gone(tmp_path, monkeypatch, entry):
    """A plain directory stands in for the cgroup parent (rmdir behaves alike: a group that
    still holds a process is refused, as a non-empty directory is). Both ways in sweep it:
    prune, and every run on its way to creating its own group."""
    parent, victim = tmp_path / "cgroups", tmp_path / "victim"
    parent.mkdir()
    victim.mkdir()
    monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", str(parent))
    me, gone, born = os.getpid(), _free_pid(), _start_time(os.getpid())
    planted = {
        f"processkit-{gone}-{born}-1a": False,  # its runner is gone
        f"processkit-{me}-{born}-1b": True,  # its runner is alive
        f"processkit-{me}-{int(born) + 1}-1c": False,  # the pid now belongs to another process
        f"processkit-{gone}-1d": False,  # the older name form, its pid free
        f"processkit-{me}-1e": True,  # the older name form, its pid taken: kept, to be safe
        f"processkit-{gone}-{born}-1f": True,  # not empty: stands for a group holding an escapee
        "processkit-25077-18ec9c145e16422c-0": True,  # another program's name shape
        "unrelated": True,
    }
    for name in planted:
        (parent / name).mkdir()
    (parent / f"processkit-{gone}-{born}-1f" / "member").write_text("")
    (parent / f"processkit-{gone}-{born}-20").symlink_to(victim, target_is_directory=True)
    if entry == "prune":
        for careful in (["--dry-run"], ["--label", "k=v"]):
            assert run_cli("prune", *careful).returncode == 0
        assert sorted(os.listdir(parent)) == sorted([*planted, f"processkit-{gone}-{born}-20"])
        assert run_cli("prune").returncode == 0
    else:
        _, events = run_checked(tmp_path, command=["true"], returncode=0)
        assert one(events, "run_started")["mechanism"] == "process_group"  # the stand-in is no cgroup
    kept = sorted(name for name, stays in planted.items() if stays)
    assert sorted(os.listdir(parent)) == sorted([*kept, f"processkit-{gone}-{born}-20"])
    assert victim.is_dir(), "the sweep followed a symlink"
