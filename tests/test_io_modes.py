"""The I/O mode matrix without a terminal: stdin sources, parse-time conflicts, --no-echo and
--snapshot-interval in every mode (the terminal cases are in test_io_modes_terminal.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import SAFETY_NET, event_names, read_events, run_cli, start_cli, wait_for_event
from fifo_ends import opened_for_writing
from streams import check_stream, event_time, wait_until

PY = sys.executable

# Reads all of stdin, then reports its digest and the runner's (its parent's) peak RSS.
DIGEST_CHILD = textwrap.dedent(
    """
    import hashlib, os, sys
    digest = hashlib.sha256()
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        digest.update(chunk)
    with open(f"/proc/{os.getppid()}/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(digest.hexdigest(), peak_kib)
    """
)


def touch_child(marker) -> list[str]:
    """A child whose only effect is creating ``marker``: proof that something was spawned."""
    return [PY, "-c", f"open({str(marker)!r}, 'w').close()"]


def digest_run(tmp_path, source, *flags, **kwargs) -> tuple[str, int]:
    result = run_cli(
        "run", *flags, "--stdin-file", source, "--jsonl", tmp_path / "run.jsonl", "--", PY, "-c", DIGEST_CHILD, **kwargs
    )
    assert result.returncode == 0, result.stderr
    digest, peak_kib = result.stdout.decode().split()
    return digest, int(peak_kib)


# -- --stdin-file ------------------------------------------------------------------------------


def test_stdin_file_far_beyond_pipe_capacity_arrives_byte_exact_in_bounded_memory(tmp_path):
    small = tmp_path / "small.bin"
    small.write_bytes(b"x")
    big = tmp_path / "big.bin"
    payload = os.urandom(20 * 1024 * 1024)
    big.write_bytes(payload)
    digest, big_peak = digest_run(tmp_path, big)
    assert digest == hashlib.sha256(payload).hexdigest()
    _, small_peak = digest_run(tmp_path, small)
    # Streamed a chunk at a time: the runner's peak memory does not grow with the file.
    assert big_peak - small_peak < 8 * 1024, (big_peak, small_peak)


def test_stdin_file_from_a_slow_pipe_is_streamed_without_stalling_the_loop(tmp_path):
    """A FIFO source that pauses: all bytes arrive, and the loop keeps its timers meanwhile. The
    test is the writer, and its pause lasts until three more samples of the 100 ms cadence are
    written: a loop stuck in a read of the FIFO writes none, and the wait fails."""
    fifo, jsonl = tmp_path / "fifo", tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    runner = start_cli(
        "run", "--snapshot-interval", "100ms", "--stdin-file", fifo, "--jsonl", jsonl, "--", PY, "-c", DIGEST_CHILD
    )
    try:
        with open(opened_for_writing(fifo, what="the runner's open of the FIFO"), "wb") as writer:
            writer.write(b"a" * 100000)
            writer.flush()
            before = event_names(jsonl).count("members_snapshot")
            wait_until(lambda: event_names(jsonl).count("members_snapshot") >= before + 3, what="the cadence")
            writer.write(b"b" * 100000)
        out, err = runner.communicate(timeout=SAFETY_NET)
    finally:
        runner.kill()
    assert runner.returncode == 0, err
    assert out.split()[0].decode() == hashlib.sha256(b"a" * 100000 + b"b" * 100000).hexdigest()


def test_stdin_file_fifo_that_no_writer_opens_ends_at_the_timeout(tmp_path):
    """Opening a FIFO waits for a writer: the run must not wait there, before its timer."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    jsonl = tmp_path / "run.jsonl"
    result = run_cli("run", "--timeout", "1s", "--stdin-file", fifo, "--jsonl", jsonl, "--", "cat")
    assert result.returncode == 106, result.stderr
    assert check_stream(jsonl, 106)[-1]["source"] == "timeout"


@pytest.mark.parametrize("payload", [b"late but whole\n", b""], ids=["writes", "opens-and-closes"])
def test_stdin_file_fifo_whose_writer_comes_after_the_start_gives_the_child_its_bytes(tmp_path, payload):
    """The writer opens the FIFO only once the child runs: what it writes (or its close, an
    empty input) reaches the child, not an end of input taken from the FIFO's writerless read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    jsonl = tmp_path / "run.jsonl"
    # No --timeout: however long the set-up takes on a loaded host, the run waits for its writer
    # (the bound is the test's own, in its waits).
    runner = start_cli("run", "--stdin-file", fifo, "--jsonl", jsonl, "--", "cat")
    try:
        wait_for_event(jsonl, "run_started", timeout=60)
        with open(opened_for_writing(fifo, what="the runner's open of the FIFO"), "wb") as writer:
            writer.write(payload)
        out, err = runner.communicate(timeout=60)
    finally:
        runner.kill()
        runner.wait()
    assert (runner.returncode, out) == (0, payload), err


@pytest.mark.parametrize(
    "child",
    [
        pytest.param("import os, sys; sys.stdout.write(repr(os.read(0, 10)))", id="reads-a-little"),
        pytest.param("import os, time; os.close(0); time.sleep(0.3); print('done')", id="closes-stdin"),
    ],
)
def test_stdin_file_child_that_stops_reading_early_is_not_a_runner_error(tmp_path, child):
    source = tmp_path / "input.bin"
    source.write_bytes(b"0123456789" * 200000)  # 2 MB: the feed is mid-stream when the child stops
    jsonl = tmp_path / "run.jsonl"
    result = run_cli("run", "--stdin-file", source, "--jsonl", jsonl, "--", PY, "-c", child)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert result.stdout in (b"b'0123456789'", b"done\n")
    assert check_stream(jsonl, 0)[-1]["source"] == "child_exit"


def test_stdin_file_bytes_stay_out_of_argv_and_events(tmp_path):
    secret = b"s3cr3t-token-value\n"
    source = tmp_path / "input.txt"
    source.write_bytes(secret)
    jsonl = tmp_path / "run.jsonl"
    result = run_cli("run", "--argv-raw", "--stdin-file", source, "--jsonl", jsonl, "--", "cat")
    assert result.returncode == 0 and result.stdout == secret
    started = read_events(jsonl)[0]
    assert started["command"]["argv"] == ["cat"]
    assert b"s3cr3t" not in jsonl.read_bytes()


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_stdin_file_that_cannot_be_read_is_setup_111_before_spawn(tmp_path, kind):
    source = tmp_path / "absent" if kind == "missing" else tmp_path
    marker = tmp_path / "spawned"
    jsonl = tmp_path / "run.jsonl"
    result = run_cli("run", "--stdin-file", source, "--jsonl", jsonl, "--", *touch_child(marker))
    assert result.returncode == 111
    assert b"could not open stdin file" in result.stderr
    assert [e["event"] for e in check_stream(jsonl, 111)] == ["runner_exit"]
    assert not marker.exists()


# -- --inherit-stdin -----------------------------------------------------------------------------


def test_inherit_stdin_waits_for_a_late_producer(tmp_path):
    """The runner never reads stdin: a producer silent until the child runs (its run_started
    written), then pausing, loses nothing."""
    payload = os.urandom(300_000)
    producer_code = textwrap.dedent(
        f"""
        import os, sys, time
        data = open({str(tmp_path / "payload")!r}, 'rb').read()
        jsonl = {str(tmp_path / "run.jsonl")!r}
        deadline = time.monotonic() + 60  # never a process left polling if the run fails to start
        while (not os.path.exists(jsonl) or b'"run_started"' not in open(jsonl, 'rb').read()) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.write(1, data[:1000])
        time.sleep(0.4)
        sys.stdout.buffer.write(data[1000:])
        """
    )
    (tmp_path / "payload").write_bytes(payload)
    producer = subprocess.Popen([PY, "-c", producer_code], stdout=subprocess.PIPE)
    try:
        result = run_cli(
            "run",
            "--inherit-stdin",
            "--jsonl",
            tmp_path / "run.jsonl",
            "--",
            PY,
            "-c",
            DIGEST_CHILD,
            stdin=producer.stdout,
        )
    finally:
        producer.stdout.close()
        producer.wait(60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0].decode() == hashlib.sha256(payload).hexdigest()


# -- parse-time conflicts --------------------------------------------------------------------------

REJECTED = [
    ("--inherit-stdio", "--capture-dir", "{dir}"),
    ("--inherit-stdio", "--capture-dir", "{dir}", "--capture-max-bytes", "1m"),
    ("--inherit-stdio", "--capture-dir", "{dir}", "--capture-overflow", "cancel"),
    ("--inherit-stdio", "--capture-max-bytes", "1m"),
    ("--inherit-stdio", "--capture-overflow", "truncate"),
    ("--inherit-stdio", "--no-echo"),
    ("--inherit-stdio", "--idle-timeout", "5s"),
    ("--inherit-stdio", "--create-no-window"),
    ("--inherit-stdio", "--inherit-stdin"),
    ("--inherit-stdio", "--stdin-file", "{file}"),
    ("--stdin-file", "{file}", "--inherit-stdio"),
    ("--inherit-stdio", "--detach"),
    ("--inherit-stdin", "--stdin-file", "{file}"),
    ("--detach", "--inherit-stdin"),
    ("--windows-graceful-ctrl-break", "--create-no-window"),
    ("--windows-graceful-ctrl-break", "--detach"),
    ("--capture-max-bytes", "1m"),
    ("--capture-overflow", "cancel"),
]


def test_every_rejected_combination_exits_100_and_spawns_nothing(tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("input\n")
    marker = tmp_path / "spawned"
    jsonl = tmp_path / "run.jsonl"
    failures = []
    for combination in REJECTED:
        flags = [flag.format(dir=tmp_path / "capture", file=source) for flag in combination]
        result = run_cli("run", *flags, "--jsonl", jsonl, "--", *touch_child(marker))
        if result.returncode != 100 or marker.exists() or jsonl.exists() or b"processkit-cli:" not in result.stderr:
            failures.append((combination, result.returncode, result.stderr))
    assert failures == []
    assert not (tmp_path / "capture").exists()


@pytest.mark.parametrize("flag", ["--create-no-window", "--windows-graceful-ctrl-break"])
def test_windows_only_flags_are_accepted_and_change_nothing_here(tmp_path, flag):
    marker = tmp_path / "spawned"
    result = run_cli("run", flag, "--jsonl", tmp_path / "run.jsonl", "--", *touch_child(marker))
    assert result.returncode == 0, result.stderr
    assert marker.exists()


# -- --no-echo -----------------------------------------------------------------------------------

# Eight lines 250 ms apart: 1.75 s of output under the tests' 1 s idle window. The window is 4
# gaps wide (a loaded host may stretch a gap that much before a line is late), and the output
# outlasts it by 0.75 s (a window never re-armed ends the run before the last lines, however
# fast the host). A shell, whose first line comes at once: the window runs from the spawn, and
# an interpreter's start-up on a loaded machine is silent time it counts.
TICKER = "for i in 0 1 2 3 4 5 6 7; do echo out $i; echo err $i >&2; sleep 0.25; done"


def test_no_echo_silences_the_runner_while_capture_and_idle_rearming_continue(tmp_path, pump_backend):
    capture = tmp_path / "capture"
    jsonl = tmp_path / "run.jsonl"
    # Only re-arming the 1 s idle window on each line keeps the ticker alive (see TICKER).
    result = run_cli(
        "run", "--no-echo", "--idle-timeout", "1s", "--capture-dir", capture, "--jsonl", jsonl, "--", "sh", "-c", TICKER
    )
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == (b"", b"")
    assert (capture / "stdout.log").read_bytes() == b"".join(b"out %d\n" % i for i in range(8))
    assert (capture / "stderr.log").read_bytes() == b"".join(b"err %d\n" % i for i in range(8))
    captured = check_stream(jsonl, 0)[-2]
    assert captured["event"] == "output_captured"
    assert captured["stdout"]["bytes"] == 48 and captured["stderr"]["bytes"] == 48


def test_no_echo_keeps_the_pipe_drained_and_the_idle_clock_running(tmp_path):
    """Output far beyond pipe capacity still flows (the child is not blocked), then silence
    ends the run by the idle window, with nothing echoed."""
    jsonl = tmp_path / "run.jsonl"
    child = "import os, time; os.write(1, b'x' * (4 << 20)); open('flushed', 'w').close(); time.sleep(30)"
    # The interpreter's start-up and 4 MiB through a drained pipe take tens of ms on a quiet
    # host: a 1 s idle window leaves a loaded one ten times that before the first byte, while
    # an undrained pipe blocks the write for good (the window ends the run, 'flushed' unmade).
    result = run_cli("run", "--no-echo", "--idle-timeout", "1s", "--jsonl", jsonl, "--", PY, "-c", child, cwd=tmp_path)
    assert result.returncode == 106
    assert result.stdout == b""
    assert (tmp_path / "flushed").exists()
    ending = check_stream(jsonl, 106)[2]
    assert (ending["event"], ending["reason"]) == ("timeout", "idle")


# -- --snapshot-interval -----------------------------------------------------------------------------


def until_sampled(jsonl, samples: int) -> list[str]:
    """A child that exits once the run's stream holds ``samples`` member snapshots (every one
    taken while it lived), whatever the host's speed; after 45 s without them, it exits 3."""
    code = textwrap.dedent(
        f"""
        import sys, time
        deadline = time.monotonic() + 45
        while open({str(jsonl)!r}, "rb").read().count(b'"members_snapshot"') < {samples}:
            if time.monotonic() > deadline:
                sys.exit(3)
            time.sleep(0.01)
        """
    )
    return [PY, "-c", code]


@pytest.mark.parametrize("mode", [[], ["--inherit-stdio"]], ids=["default", "inherit-stdio"])
def test_snapshot_interval_cadence_stops_at_the_ending(tmp_path, mode):
    jsonl = tmp_path / "run.jsonl"
    result = run_cli("run", *mode, "--snapshot-interval", "200ms", "--jsonl", jsonl, "--", *until_sampled(jsonl, 5))
    assert result.returncode == 0, result.stderr
    events = check_stream(jsonl, 0)
    names = [e["event"] for e in events]
    ending = names.index("root_exited")
    intervals = [i for i, e in enumerate(events) if e["event"] == "members_snapshot" and e["reason"] == "interval"]
    assert names[:2] == ["run_started", "members_snapshot"] and events[1]["reason"] == "spawn"
    assert intervals == list(range(2, ending))
    # The last sample is taken as the root's exit is seen (docs/differences.md): the root is gone.
    *intervals, at_exit = intervals
    assert events[at_exit]["members"] == [] and events[at_exit]["read_error"] is False
    # Each sample of the cadence follows a full interval: at most one per 200 ms of the run,
    # however slow the host made the child's start-up (lower bounds a load only stretches). Two
    # stamps may still be closer than 200 ms: the timer's 200 ms run from its turn, a stamp comes
    # once the members are read and the line is made, and that took 15 ms longer for one sample
    # than the next (a gap of 0.185 s). No sample comes within half an interval of the last.
    times = [event_time(events[i]) for i in [0, *intervals, ending]]
    assert 4 <= len(intervals) <= (times[-1] - times[0]) / 0.2 + 1, names
    assert min(b - a for a, b in zip(times[1:-2], times[2:-1])) >= 0.1, times
    for index in intervals:
        assert events[index]["read_error"] is False
        assert [m["pid"] for m in events[index]["members"]] == [events[0]["root_pid"]]


def test_snapshot_read_failure_is_reported_and_the_cadence_goes_on(tmp_path):
    """The second and third member reads fail (injected at the OS boundary of the real CLI)."""
    inject = textwrap.dedent(
        """
        import errno, sys
        from processkit.containment import members
        real, calls = members.read_members, []
        def flaky(pids):
            calls.append(1)
            if len(calls) in (2, 3):
                raise OSError(errno.EIO, "injected")
            return real(pids)
        members.read_members = flaky
        from processkit.cli.main import main
        sys.exit(main())
        """
    )
    jsonl = tmp_path / "run.jsonl"
    argv = ["run", "--snapshot-interval", "150ms", "--jsonl", str(jsonl), "--", *until_sampled(jsonl, 4)]
    result = subprocess.run([PY, "-c", inject, *argv], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    snapshots = [e for e in check_stream(jsonl, 0) if e["event"] == "members_snapshot"]
    assert [(s["reason"], s["read_error"], s["members"] == []) for s in snapshots[:4]] == [
        ("spawn", False, False),
        ("interval", True, True),
        ("interval", True, True),
        ("interval", False, False),
    ]
    assert result.stderr.count(b"processkit-cli: warning: could not read the container's members") == 2
