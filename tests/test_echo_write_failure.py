"""A live echo that a write error ends (a full disk under a redirected stdout) is said on stderr."""

from __future__ import annotations

import os
import select
import socket
import subprocess

import pytest
from conftest import SAFETY_NET, cli_command, read_events, start_cli, wait_for_event

FULL_DISK_WARNING = (
    "processkit-cli: warning: a write to the runner's stdout failed (No space left on device); live echo abandoned"
)


def _run_into(
    target: str, tmp_path, *child: str, options: tuple[str, ...] | None = None
) -> subprocess.CompletedProcess:
    if options is None:
        options = ("--capture-dir", str(tmp_path / "cap"))
    with open(target, "wb") as out:
        return subprocess.run(
            cli_command() + ["run", "--jsonl", str(tmp_path / "run.jsonl"), *options, "--", *child],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=SAFETY_NET,
        )


@pytest.mark.parametrize("captured", [True, False], ids=["capture", "no-capture"])
def test_an_echo_a_full_disk_ends_is_warned_of_once_and_the_code_stays_the_childs(tmp_path, pump_backend, captured):
    """stdout on /dev/full (ENOSPC): the child's output never reaches it; the run says so once,
    names the reason, and exits with the child's own code. Without --capture-dir the native pump
    splices into the echo: the same words."""
    options = None if captured else ()
    proc = _run_into("/dev/full", tmp_path, "sh", "-c", "echo out; echo err >&2; exit 3", options=options)
    assert proc.returncode == 3
    lines = proc.stderr.decode().splitlines()
    assert [line for line in lines if "live echo" in line] == [FULL_DISK_WARNING]
    assert "err" in lines
    if captured:
        assert (tmp_path / "cap" / "stdout.log").read_bytes() == b"out\n"
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 3


def test_no_echo_into_a_full_disk_says_nothing(tmp_path, pump_backend):
    """--no-echo writes nothing to the runner's stdout: nothing fails, nothing is said."""
    proc = _run_into("/dev/full", tmp_path, "sh", "-c", "echo out; echo err >&2", options=("--no-echo",))
    assert proc.returncode == 0
    assert proc.stderr == b""


def test_the_warning_follows_the_childs_whole_stderr(tmp_path, pump_backend):
    """The warning is said once every echo backlog is flushed: never inside the child's stderr.

    The runner's stderr is not read until the teardown is over (``cleanup_finished``), so the
    child's stderr waits in the pipe and the echo backlog while the stdout echo has failed."""
    size = 2_000_000
    jsonl = tmp_path / "run.jsonl"
    child = f"echo out; head -c {size} /dev/zero | tr '\\0' e >&2; echo END >&2"
    with open("/dev/full", "wb") as full:
        proc = start_cli("run", "--jsonl", jsonl, "--", "sh", "-c", child, stdout=full)
    try:
        wait_for_event(jsonl, "cleanup_finished")
        _, err = proc.communicate(timeout=SAFETY_NET)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    if b"consumer of the runner's stderr" in err:  # held past the echo stall or ceiling by a busy machine
        pytest.skip("this test's read came after the runner gave up its stderr echo: the order is not judged")
    assert err[: size + 4] == b"e" * size + b"END\n"
    assert err[size + 4 :].decode().splitlines() == [FULL_DISK_WARNING]


def test_a_reader_that_goes_away_is_not_warned_of(tmp_path, pump_backend):
    """EPIPE is the reader's choice (``| head -1``): the echo stops quietly, as before."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            cli_command() + ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "sh", "-c", "echo out"],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=SAFETY_NET,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0
    assert proc.stderr == b""


def test_a_benchmarks_runs_into_a_full_stdout_say_it_once(tmp_path):
    """Every run of ``bench --show-output`` echoes into the one stdout: one warning, not one a run."""
    with open("/dev/full", "wb") as out:
        proc = subprocess.run(
            cli_command() + ["bench", "--runs", "3", "-N", "--show-output", "echo hi"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=SAFETY_NET,
        )
    assert proc.stderr.decode().count("live echo abandoned") == 1, proc.stderr


def test_a_peer_that_resets_the_connection_is_not_warned_of(tmp_path, pump_backend):
    """stdout a TCP socket whose peer closed with bytes unread (ECONNRESET): the reader went away,
    as with EPIPE; the echo stops quietly."""
    go = tmp_path / "go"
    os.mkfifo(go)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
    child = f"echo first; read line < {go}; echo second; echo third"
    proc = start_cli("run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", child, stdout=client.fileno())
    try:
        assert select.select([peer], [], [], SAFETY_NET)[0], "the first echo never arrived"
        peer.close()  # unread bytes: a reset
        watch = select.poll()
        watch.register(client, select.POLLERR | select.POLLHUP)
        assert watch.poll(SAFETY_NET * 1000), "the reset never arrived"
        with open(go, "w") as fifo:
            fifo.write("go\n")
        _, err = proc.communicate(timeout=SAFETY_NET)
    finally:
        peer.close()
        client.close()
        if proc.poll() is None:  # the runner this test started, by its handle
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert err == b""
