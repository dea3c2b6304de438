"""A ``--stdin-file`` that is a regular file whose read waits for data: tracefs's ``trace_pipe``
(root's) says so with ``fstat``, and a blocking read of it sleeps until the kernel traces
something. The feed set every regular file blocking (a disk file never waits for long), so the
runner's loop slept in that read: its ``--timeout`` never came, a SIGTERM was taken and the read
begun again (the run ended only by SIGKILL), and under the API the service with every call of
the process stayed there (a call's ``timeout=`` too), its caller's end not seen either. The
source now stays non-blocking: an empty ``trace_pipe`` says EAGAIN and is watched by the loop.

Each test reads the ``trace_pipe`` of a tracing instance of its own (``instances/NAME``, a ring
buffer nothing else writes to), removed after it: the host's own trace is never read."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from conftest import SAFETY_NET, run_cli

INSTANCES = "/sys/kernel/tracing/instances"


@pytest.fixture
def trace_pipe():
    if os.geteuid() != 0 or not os.path.isdir(INSTANCES):
        pytest.skip("needs root and tracefs's instances (a trace_pipe of the test's own)")
    instance = os.path.join(INSTANCES, f"processkit-test-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(instance)
    except OSError as exc:
        pytest.skip(f"cannot make a tracing instance: {exc}")
    try:
        yield os.path.join(instance, "trace_pipe")
    finally:
        os.rmdir(instance)


def test_a_stdin_file_that_waits_for_data_holds_no_timeout(tmp_path, trace_pipe):
    ran = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--timeout", "1s", "--stdin-file", trace_pipe, "--", "cat")
    assert ran.returncode == 106, ran.stderr


CALLER = """
import sys, processkit
held = processkit.start(["cat"], stdin_file=sys.argv[1])
after = processkit.run(["echo", "next"], capture_output=True)
held.kill()
print(after.returncode, after.stdout.decode().strip(), held.wait())
"""


def test_a_stdin_file_that_waits_for_data_leaves_the_service_serving(tmp_path, trace_pipe):
    caller = subprocess.run(
        [sys.executable, "-c", CALLER, trace_pipe],
        capture_output=True,
        cwd=tmp_path,
        timeout=SAFETY_NET,
        stdin=subprocess.DEVNULL,
    )
    assert (caller.returncode, caller.stdout) == (0, b"0 next -9\n"), caller.stderr


def test_an_env_file_that_waits_for_data_is_a_setup_failure(tmp_path, trace_pipe):
    """Read non-blocking, such a file gave the reader nothing (``None``), and ``run`` ended 104
    (``internal error: TypeError: object of type 'NoneType' has no len()``), a batch's job too."""
    ran = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--env-file", trace_pipe, "--", "true")
    assert ran.returncode == 111, ran.stderr
    assert f"could not read environment file `{trace_pipe}`: it has nothing to read yet".encode() in ran.stderr
