"""A second user cannot hide a dead batch of root's from ``prune`` by a decoy run directory.

A batch's directory is in ``/dev/shm`` (or ``$XDG_RUNTIME_DIR``), and its token is in every job's
``/proc/<pid>/cgroup``, which anyone can read. The second user makes ``/tmp/pkc-<token>`` (0700,
with a ``live.lock`` of theirs): ``/tmp`` is looked in first, and the sweep took their directory
as the one speaking for the batch's groups, whose owner is not theirs, so it left every group,
and the killed batch's job ran on (``left ...: its owner is not the run directory's``). The
sweep now takes the directory of this user's wherever it is (``rundir.locate``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli
from streams import wait_until
from test_other_users import as_other, other_user  # noqa: F401  (fixture)

RUN_GROUP = "processkit-run-"


def _token(pid: int) -> str | None:
    """The batch's token from its job's cgroups (``processkit-run-<token>.j<seq>``), if any names one."""
    with open(f"/proc/{pid}/cgroup") as handle:
        for line in handle:
            name = line.rstrip("\n").rsplit("/", 1)[-1]
            if name.startswith(RUN_GROUP):
                return name[len(RUN_GROUP) :].partition(".j")[0]
    return None


# The job's grandchild is what outlives the killed batch (its child dies with it: PR_SET_PDEATHSIG).
def test_a_decoy_run_directory_does_not_keep_prune_from_a_dead_batch(tmp_path, isolated_registry, other_user):  # noqa: F811
    pidfile = tmp_path / "job.pid"
    batch = start_cli(
        "batch",
        "--out",
        tmp_path / "out",
        "--",
        "sh",
        "-c",
        'sleep 300 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait',
        ":::",
        pidfile,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    job = decoy = None
    try:
        wait_until(lambda: pidfile.exists() or batch.poll() is not None, SAFETY_NET, "the job's start")
        assert pidfile.exists(), f"the batch ended ({batch.poll()}) before its job wrote its pid"
        job = int(pidfile.read_text())
        token = _token(job)
        if token is None:
            pytest.skip("the job is in no group of a run (no cgroup on this host)")
        decoy = f"/tmp/pkc-{token}"
        if os.path.lexists(decoy):
            decoy = None
            pytest.skip("the batch's directory is in /tmp itself: no base before it to plant a decoy in")
        as_other(other_user, 'mkdir -m 0700 "$1"; touch "$1/live.lock"', decoy)
        batch.send_signal(signal.SIGKILL)
        batch.wait(timeout=SAFETY_NET)
        pruned = run_cli("prune", cwd=tmp_path)
        assert pruned.returncode == 0, pruned.stderr.decode()
        said = (pruned.stdout + pruned.stderr).decode()
        assert "its owner is not the run directory's" not in said, said  # the decoy taken for the batch's
        wait_until(lambda: not pid_alive(job), 30, "the dead batch's job to be ended")
        assert os.path.isdir(decoy), "the other user's directory is theirs: left"
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
        if job is not None and pid_alive(job):
            os.kill(job, signal.SIGKILL)
        if decoy is not None:
            shutil.rmtree(decoy, ignore_errors=True)
