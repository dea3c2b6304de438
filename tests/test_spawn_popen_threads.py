"""The Popen spawn path (``PROCESSKIT_SPAWN=python``) forks and runs a ``preexec_fn`` in the
child: Python code after fork, which deadlocks when another thread held a lock (the allocator's,
the GIL's internals) at that instant. The runner's only other thread is the native pump's hash
thread, so with that spawn path the pump hashes inline and the runner stays single-threaded."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, start_cli

try:
    from processkit import _native
except ImportError:
    _native = None

pytestmark = pytest.mark.skipif(_native is None, reason="the native pump (processkit._native) is not built")

# Writes well over one pump chunk (the first bytes start the hash thread where it is used),
# then tells the test its runner's pid and waits to be released.
CHILD = """
import os, sys, time
sys.stdout.buffer.write(b"x" * (4 << 20)); sys.stdout.flush()
ready, release = sys.argv[1], sys.argv[2]
with open(ready + ".tmp", "w") as handle:
    handle.write(str(os.getppid()))
os.rename(ready + ".tmp", ready)
while not os.path.exists(release):
    time.sleep(0.01)
"""


def wait_for(path, timeout: float = SAFETY_NET) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


# Native: a hashing thread per captured stream (stdout's and stderr's), each from the stream's
# start, as the CLI's run waits for its captured pipes on them (csrc/hasher.c, "watched").
@pytest.mark.parametrize("spawn, threads", [("python", 1), ("native", 3)])
def test_the_popen_path_runs_with_no_hash_thread(tmp_path, spawn, threads):
    ready, release = tmp_path / "ready", tmp_path / "release"
    env = dict(os.environ, PROCESSKIT_SPAWN=spawn, PROCESSKIT_PUMP="native", PROCESSKIT_HASH_THREAD="1")
    runner = start_cli(
        "run",
        "--jsonl",
        tmp_path / "run.jsonl",
        "--capture-dir",
        tmp_path / "capture",
        "--",
        sys.executable,
        "-c",
        CHILD,
        ready,
        release,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for(ready)
        runner_pid = int(ready.read_text())
        # The native path is the control: the same run there does hash on a thread.
        assert len(os.listdir(f"/proc/{runner_pid}/task")) == threads
    finally:
        release.touch()
        runner.communicate(timeout=60)
    assert runner.returncode == 0
