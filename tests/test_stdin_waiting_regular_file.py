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
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import SAFETY_NET, reaped, run_cli, start_cli
from streams import wait_until

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


def test_a_stdin_probe_on_a_file_that_waits_for_data_waits_only_its_window(tmp_path, trace_pipe):
    """``inspect < trace_pipe`` (stdin a regular file, so read to its end at once): the probe for a
    missing run id (ADR 0203) slept in that read until a signal. The seed says an idle source
    and a producer not started yet are told apart only by the window: the file is waited on as a
    pipe, and a silent one leaves the run id unset (the usage error, 100)."""
    with open(trace_pipe, "rb") as source:
        probed = run_cli("inspect", stdin=source, cwd=tmp_path)
    assert (probed.returncode, probed.stdout) == (100, b""), probed.stderr
    assert b"--run-id" in probed.stderr, probed.stderr


READ_SYSCALLS = ("0", "63")  # read(2): its number on x86_64, on aarch64


def _reads(pid: int, path: str) -> bool:
    """Whether ``pid`` waits in a ``read`` of its descriptor on ``path``."""
    call = Path(f"/proc/{pid}/syscall").read_text().split()
    if len(call) < 2 or call[0] not in READ_SYSCALLS:
        return False
    return os.readlink(f"/proc/{pid}/fd/{int(call[1], 16)}") == path


def test_a_batch_manifest_that_waits_for_data_waits_until_a_stop(tmp_path, trace_pipe):
    """A batch's manifest is its own streaming input (ADR 0203 leaves JSONL and batch input out of
    the window), read to its end of file as GNU parallel's ``::::`` reads: a file that waits for
    data is waited on, and a stop ends that wait as the batch's stop, in its one closing line."""
    batch = start_cli("batch", "--out", "out", trace_pipe, cwd=tmp_path)
    with reaped(batch):
        wait_until(lambda: _reads(batch.pid, trace_pipe), what="the batch reading its manifest")
        batch.send_signal(signal.SIGTERM)
        _, said = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == 107, said
    assert said.decode().splitlines() == ["batch: no job started, cancelled by SIGTERM (its input awaited)"], said
    assert not (tmp_path / "out").exists()
