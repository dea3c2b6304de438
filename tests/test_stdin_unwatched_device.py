"""A ``--stdin-file`` the loop cannot watch: ``/dev/hwrng`` (root's, 0600) says EAGAIN to a
non-blocking read while it has nothing, and ``epoll_ctl`` refuses it (EPERM: the driver has no
poll). The feed asked the loop to watch it, and the refusal raised out of the loop: ``run`` ended
104 (internal error: PermissionError) with a release left half done, and under the API the
runner service died with it, so the call and every other run of the process got ``ServiceGone``.
The feed now looks at such a source again every ``stdin_feed.UNWATCHED_RETRY`` seconds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, run_cli

DEVICE = "/dev/hwrng"
NEEDS_DEVICE = pytest.mark.skipif(
    not os.access(DEVICE, os.R_OK), reason=f"needs a readable {DEVICE} (a hardware RNG, root's)"
)
CALLER = f"""
import processkit
fed = processkit.run(["head", "-c", "64"], stdin_file={DEVICE!r}, capture_output=True)
after = processkit.run(["echo", "next"], capture_output=True)
print(fed.returncode, len(fed.stdout), after.returncode, after.stdout.decode().strip())
"""


@NEEDS_DEVICE
def test_a_device_the_loop_cannot_watch_is_fed(tmp_path):
    ran = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--stdin-file", DEVICE, "--", "head", "-c", "64")
    assert (ran.returncode, len(ran.stdout)) == (0, 64), ran.stderr
    assert ran.stderr == b""


@NEEDS_DEVICE
def test_a_device_the_loop_cannot_watch_leaves_the_service_running(tmp_path):
    caller = subprocess.run(
        [sys.executable, "-c", CALLER], capture_output=True, cwd=tmp_path, timeout=SAFETY_NET, stdin=subprocess.DEVNULL
    )
    assert (caller.returncode, caller.stdout) == (0, b"0 64 0 next\n"), caller.stderr
