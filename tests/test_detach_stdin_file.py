"""``run --detach --stdin-file /dev/stdin`` (or ``/dev/fd/N``, a process substitution; and
``--env-file`` so): the path names one of the launcher's own descriptors, and the detached copy,
started with null stdio, read ``/dev/null`` there (or failed 111 for a ``/dev/fd/N`` it did not
have): the caller's input, or its environment file, was lost without a word. The copy is now
handed that descriptor under the same number."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, wait_for_event
from streams import check_stream

PAYLOAD = b"the caller's input\n" * 100


def detached_stdout(tmp_path, named: str, data: bytes, flag: str, command: list[str]) -> bytes:
    """Run ``command`` detached, ``flag`` naming ``named`` (its ``{fd}`` a descriptor above 2) of
    a pipe that holds ``data`` and is the launcher's stdin; the child's stdout once the run ended."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # far below a pipe's capacity
    os.close(write_end)
    fd = os.dup(read_end) if "{fd}" in named else 0  # above 2: a process substitution's number
    launcher = [*cli_command(), "run", "--detach", flag, named.format(fd=fd), "--capture-dir", "cap"]
    try:
        proc = subprocess.run(
            [*launcher, "--jsonl", "run.jsonl", "--", *command],
            cwd=tmp_path,
            stdin=read_end,
            pass_fds=(fd,) if fd else (),
            capture_output=True,
            timeout=SAFETY_NET,
        )
    finally:
        os.close(read_end)
        if fd:
            os.close(fd)
    assert (proc.returncode, proc.stderr) == (0, b"")
    wait_for_event(tmp_path / "run.jsonl", "runner_exit")
    check_stream(tmp_path / "run.jsonl", 0)
    return (tmp_path / "cap" / "stdout.log").read_bytes()


@pytest.mark.parametrize("named", ["/dev/stdin", "/proc/self/fd/0", "/dev/fd/{fd}"])
def test_a_detached_run_reads_the_launchers_own_descriptor(tmp_path, named):
    assert detached_stdout(tmp_path, named, PAYLOAD, "--stdin-file", ["cat"]) == PAYLOAD


@pytest.mark.parametrize("named", ["/dev/stdin", "/dev/fd/{fd}"])
def test_a_detached_runs_env_file_can_be_the_launchers_own_descriptor(tmp_path, named):
    printed = detached_stdout(
        tmp_path, named, b"HANDED_TOKEN=from-the-caller\n", "--env-file", ["sh", "-c", 'printf %s "$HANDED_TOKEN"']
    )
    assert printed == b"from-the-caller"
