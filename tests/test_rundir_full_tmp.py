"""A run's directory when ``/tmp`` is full: another user can fill it (its space or its inodes),
and every other user's run then had no run directory, so no control endpoint (``inspect``,
``cancel`` could not reach it) and nothing to reap it by were its runner killed. The directory is
now made in the other base every reader and reaper looks in (``rundir.bases``: /dev/shm here).

The full /tmp, and a /dev/shm of the test's own, are mounted in a mount namespace of the
test's own (``unshare``), so nothing outside it sees them."""

from __future__ import annotations

import os
import subprocess

from conftest import cli_command
from test_service_scratch_full import FILL, pytestmark  # noqa: F401 - the same full tmpfs, the same needs

SHM = "mount -t tmpfs -o size=16m,mode=1777 tmpfs /dev/shm"


def test_a_run_under_a_full_tmp_still_has_its_control_endpoint():
    cli = " ".join(cli_command())
    run_id = f"full-tmp-{os.getpid()}"
    script = (
        f"{SHM}; sh -c '{FILL}' sh /tmp; "
        f"exec {cli} run --run-id {run_id} --jsonl /dev/null -- {cli} inspect --run-id {run_id} --json"
    )
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}  # the other base: /dev/shm
    env["PROCESSKIT_CLI_REGISTRY_DIR"] = "/dev/shm/registry"  # the test's own registry sits under the covered /tmp
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script],
        capture_output=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"no control endpoint" not in done.stderr, done.stderr
    assert f'"run_id":"{run_id}"'.encode() in done.stdout, done.stdout
