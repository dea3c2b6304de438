"""A live echo that a write error ends (a full disk under a redirected stdout) is said on stderr."""

from __future__ import annotations

import os
import subprocess

from conftest import SAFETY_NET, cli_command, read_events


def _run_into(target: str, tmp_path, *child: str) -> subprocess.CompletedProcess:
    with open(target, "wb") as out:
        return subprocess.run(
            cli_command()
            + ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--capture-dir", str(tmp_path / "cap"), "--", *child],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=SAFETY_NET,
        )


def test_an_echo_a_full_disk_ends_is_warned_of_once_and_the_code_stays_the_childs(tmp_path, pump_backend):
    """stdout on /dev/full (ENOSPC): the child's output never reaches it; the run says so once,
    names the reason, and exits with the child's own code."""
    proc = _run_into("/dev/full", tmp_path, "sh", "-c", "echo out; echo err >&2; exit 3")
    assert proc.returncode == 3
    lines = proc.stderr.decode().splitlines()
    warned = [line for line in lines if "live echo" in line]
    assert warned == [
        "processkit-cli: warning: a write to the runner's stdout failed (No space left on device); live echo abandoned"
    ]
    assert "err" in lines
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == b"out\n"
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 3


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
