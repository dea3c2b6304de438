"""``batch --show-output`` whose stdout's writes fail (``> /dev/full``): the blocks were lost
without a word and the batch exited 0. Now one warning on stderr says so, as ``run`` says its
broken echo, and the batch goes on: every job runs, and the exit stays the jobs' verdict (0 or
117). A reader that went away (a closed pipe) is still said by no one: its choice, as for ``run``.
Process-level: the real CLI, real children."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command
from test_batch import summary, write_manifest
from test_batch_stalled_reader import recorded

CANCELLED = 107
BATCH_FAILED = 117
FULL = (
    "processkit-cli: warning: batch: a write to its stdout failed (No space left on device): "
    "nothing more of its stdout is shown"
)


def _batch(tmp_path, stdout, jobs: list[dict], *options: str) -> subprocess.CompletedProcess:
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    command = cli_command() + [*options, "batch", "--jobs", "1", "--show-output", "--out", str(tmp_path / "out")]
    return subprocess.run(
        [*command, manifest], stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, timeout=SAFETY_NET
    )


@pytest.mark.parametrize("failing", [False, True], ids=["passed", "one-failed"])
def test_a_full_stdout_is_said_once_and_the_exit_stays_the_jobs(tmp_path, failing):
    jobs = [
        {"id": "first", "args": ["sh", "-c", "echo out"]},
        {"id": "second", "args": ["sh", "-c", f"echo more; exit {3 if failing else 0}"]},
        {"id": "third", "args": ["sh", "-c", "echo last"]},
    ]
    with open("/dev/full", "wb") as full:
        proc = _batch(tmp_path, full, jobs)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == (BATCH_FAILED if failing else 0), lines
    assert [line for line in lines if "failed (" in line] == [FULL]
    verdict = "batch: 2 of 3 jobs exited 0, 1 failed" if failing else "batch: 3 of 3 jobs exited 0"
    assert verdict in lines
    assert {job: line["source"] for job, line in summary(tmp_path / "out").items()} == dict.fromkeys(
        ("first", "second", "third"), "child_exit"
    )
    assert (tmp_path / "out" / "third" / "capture" / "stdout.log").read_bytes() == b"last\n", "the captures keep it"


def test_a_full_stdout_under_error_format_json_writes_no_prose(tmp_path):
    """Under ``--error-format json`` no warning goes to stderr (docs/differences.md)."""
    with open("/dev/full", "wb") as full:
        proc = _batch(tmp_path, full, [{"id": "only", "args": ["echo", "out"]}], "--error-format", "json")
    assert proc.returncode == 0
    assert b"warning" not in proc.stderr


def test_a_closed_pipe_is_not_said(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _batch(tmp_path, write_end, [{"id": "only", "args": ["echo", "out"]}])
    finally:
        os.close(write_end)
    assert proc.returncode == 0
    assert b"warning" not in proc.stderr, proc.stderr


def _filled(write_end: int) -> int:
    """The empty pipe filled to its room, so not a byte more goes in: a write its room takes
    whole, never waiting; the bytes written."""
    return os.write(write_end, b"x" * fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ))


@pytest.mark.parametrize("stdout", ["full", "same-pipe"])
def test_a_stop_with_stdout_failing_and_stderr_stalled_ends(tmp_path, stdout):
    """stderr a pipe whose reader stalled (full, never read: a paused pager), stdout ``/dev/full``
    or that same pipe (``2>&1 | less``); the job done, then SIGTERM. Once the loop closed, the
    lost stdout was said straight to stderr, a write with no bound: the stop hung on the stalled
    reader. Now a stop ends; a stdout whose reader merely stopped reading (its write timed out)
    is not said as a failed write, nor is anything said on a stderr that is gone."""
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "only", "args": ["sh", "-c", "echo out; echo err >&2"]}])
    read_end, write_end = os.pipe()
    filled = _filled(write_end)
    with open("/dev/full", "wb") as full:
        proc = subprocess.Popen(
            cli_command() + ["batch", "--show-output", "--out", str(out), manifest],
            stdin=subprocess.DEVNULL,
            stdout=full if stdout == "full" else write_end,
            stderr=write_end,
        )
    os.close(write_end)
    try:
        recorded(out, "only", proc)  # its blocks queued behind the stalled stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SAFETY_NET) == CANCELLED
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with os.fdopen(read_end, "rb") as reader:
            said = reader.read()
    assert len(said) >= filled
    assert b"failed (" not in said[filled:], said[filled:]
