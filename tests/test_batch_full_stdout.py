"""``batch --show-output`` whose stdout's writes fail (``> /dev/full``): the blocks were lost
without a word and the batch exited 0. Now one warning on stderr says so, as ``run`` says its
broken echo, and the batch goes on: every job runs, and the exit stays the jobs' verdict (0 or
117). A reader that went away (a closed pipe) is still said by no one: its choice, as for ``run``.
Process-level: the real CLI, real children."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command
from test_batch import summary, write_manifest

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
