"""A runner whose children are born into a pid namespace it is not in (``unshare --pid``
without ``--fork``): there the child's ``getppid()`` reads 0 whether the runner lives or not,
and a check of it against the runner's pid made every run exit 127 (native spawn) or 1 (Popen)
without a word, and the API's service end at once. The child now asks the runner's report pipe
(native) or a pidfd of it (Popen), the service its caller's socket. Once the namespace's first
process has ended, no process can start in it: that is said in one line, with the command's
failure code. ``--fork`` (the runner is the namespace's init) runs as before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from processkit.errors import BENCH_FAILED

from conftest import cli_command

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="unshare --pid needs root"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)"),
]


def unshared(*args: str, fork: bool = False) -> subprocess.CompletedProcess:
    """``args`` run as ``unshare --pid [--fork] ARGS``: the command itself, no shell between."""
    flags = ["--pid", "--fork"] if fork else ["--pid"]
    return subprocess.run(
        ["unshare", *flags, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("fork", [False, True], ids=["runner-outside", "runner-init"])
def test_a_run_starts_when_its_child_is_in_another_pid_namespace(spawn_backend, fork, tmp_path):
    events = tmp_path / "events.jsonl"
    done = unshared(*cli_command(), "run", "--jsonl", str(events), "--", "sh", "-c", "echo $$", fork=fork)
    assert done.returncode == 0, done.stderr
    # Outside, the child is its namespace's first process; as init, the runner is pid 1.
    assert done.stdout == ("2\n" if fork else "1\n")


def test_a_run_that_cannot_start_in_an_ended_namespace_says_why(spawn_backend):
    # bench's first run is the namespace's init: once it has ended, the second cannot start.
    done = unshared(*cli_command(), "bench", "--runs", "2", "--warmup", "0", "--", "true")
    assert done.returncode == BENCH_FAILED, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "pid namespace new processes are born into has no init any more" in lines[0]


def test_the_api_service_runs_in_a_pid_namespace_its_caller_is_not_in(spawn_backend):
    # The service is the caller's first child there: its parent reads as 0 from inside.
    script = "import processkit; r = processkit.run(['sh', '-c', 'echo $$'], capture_output=True); print(r.stdout)"
    done = unshared(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "b'2\\n'\n"
