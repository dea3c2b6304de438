"""The runner service's sweep of scratch directories left by services that died: a pid alone
names no process across pid namespaces (a container sharing /dev/shm), so a directory is
removed only once its lock can be taken, which a live service holds from its directory's
making to its removal. The batch base is the test's own (``XDG_RUNTIME_DIR`` under tmp_path):
nothing outside it is looked at or removed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from streams import wait_until

PY = sys.executable

CALLER = r"""
import os, sys, processkit
assert processkit.run(["true"]).returncode == 0
names = [n for n in os.listdir(os.environ["XDG_RUNTIME_DIR"]) if n.startswith("processkit-api-")]
print(" ".join(sorted(names)), flush=True)
sys.stdin.read()  # the service lives until this process ends
"""


# A pid no process can have: above PID_MAX_LIMIT (2**22, the most ``kernel.pid_max`` can be). A
# finished process's pid, as this test used, can be given to a new process at once under load.
NEVER_A_PID = 2**22 + 1


def _dead_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as limit:
        assert int(limit.read()) < NEVER_A_PID
    return NEVER_A_PID


def test_a_locked_directory_of_a_pid_not_alive_here_is_kept_an_unlocked_one_swept(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    pid = _dead_pid()
    held = runtime / f"processkit-api-{pid}-elsewhere"  # a live service's, in another pid namespace
    left = runtime / f"processkit-api-{pid}-left"  # a killed service's
    for made in (held, left):
        made.mkdir(mode=0o700)
        (made / "r1.jsonl").write_text("{}\n")
    lock = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    caller = subprocess.Popen(
        [PY, "-c", CALLER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert caller.stdout is not None
        listed = caller.stdout.readline().decode().split()
        assert (held / "r1.jsonl").exists(), "a directory whose lock a live service holds was swept"
        assert not left.exists(), "a dead service's unlocked directory is swept as before"
        own = [name for name in listed if name not in (held.name, left.name)]
        assert len(own) == 1, listed
        # The live service holds its own directory's lock: another's sweep would leave it alone.
        probe = os.open(runtime / own[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken = True
            except BlockingIOError:
                taken = False
        finally:
            os.close(probe)
        assert not taken, "a live service's scratch directory is not locked"
    finally:
        os.close(lock)
        _, err = caller.communicate(b"", timeout=60)
    assert caller.returncode == 0, err.decode()
    # The service removes it once it has seen its caller's end, after the caller has exited.
    wait_until(lambda: not (runtime / own[0]).exists(), timeout=60, what="the service's removal of its own directory")
