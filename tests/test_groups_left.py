"""A group its runner could not remove is never left without the run directory that speaks for it
(``rundir.RunDir.close``): the runner keeps the directory and lets its lock go, so ``prune`` (or
the next run's sweep) proves the runner dead and removes the group. Before, the directory went
anyway, and with it the only evidence a sweep may act on: such a group stayed on the host for
good, each one costing every later run's sweep a look-up.

The group is made unremovable the way nothing in the runner can undo: the job bind-mounts a
directory of the test's over its own cgroup v1 ``pids`` group (``rmdir`` of a mount point is
``EBUSY``), in a mount namespace of the runner's own, which goes with the runner; the group is
then an ordinary empty group again, as the leaked ones found on the host were.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

from conftest import cli_command, run_cli
from own_tmp import PRIVATE_MOUNTS
from run_groups import groups_of
from test_batch import write_manifest

PIDS = "/sys/fs/cgroup/pids"
# The job's own pids group (``/proc/self/cgroup``'s path is from the hierarchy's root), covered.
COVER = 'g=$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup); mount --bind "$0" "/sys/fs/cgroup/pids$g"'


def _usable() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    with open("/proc/self/cgroup") as handle:
        mounted = any(line.split(":")[1] == "pids" for line in handle)
    return mounted and os.access(PIDS, os.W_OK) and os.environ.get("PROCESSKIT_ACCOUNTING") != "0"


pytestmark = pytest.mark.skipif(
    not _usable(), reason="needs root, unshare, mount and a writable cgroup v1 pids hierarchy"
)


def _groups_of(runner: int) -> list[str]:
    return groups_of(runner, None, PIDS)


def _run_covered(tmp_path, *command: str) -> tuple[int, list[str]]:
    """Start the runner (``command`` after ``processkit-cli``) in a mount namespace of its own;
    its pid, and the pids groups it left (that is the scenario: none means it shows nothing)."""
    (tmp_path / "cover").mkdir()
    runner = subprocess.Popen(
        [*PRIVATE_MOUNTS, *cli_command(), *command], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 0, stderr
    left = _groups_of(runner.pid)
    assert left, "the covered group was removed anyway: this test shows nothing here"
    return runner.pid, left


def _prune_removes(runner: int, left: list[str]) -> None:
    try:
        proc = run_cli("prune", "--json", "--report-reaped")
        assert proc.returncode == 0, proc.stderr
        remaining = _groups_of(runner)
        said = [left for left in json.loads(proc.stdout)["reaped"]["left"] if left["what"] in remaining]
        assert remaining == [], f"prune could not remove what the runner left ({said}): its directory went first"
        assert glob.glob(f"/tmp/pkc-{runner}-*") + glob.glob(f"/dev/shm/pkc-{runner}-*") == []
    finally:
        for group in _groups_of(runner):  # the unfixed runner's leftover: empty, ours, removed here
            os.rmdir(group)


def test_a_run_whose_group_cannot_be_removed_keeps_its_directory_until_prune(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    runner, left = _run_covered(
        tmp_path, "run", "--jsonl", str(jsonl), "--", "sh", "-c", COVER, str(tmp_path / "cover")
    )
    _prune_removes(runner, left)


def test_a_batch_whose_lent_group_cannot_be_removed_keeps_its_directory_until_prune(tmp_path):
    jobs = [{"args": ["sh", "-c", COVER, str(tmp_path / "cover")], "id": "covers"}]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    runner, left = _run_covered(tmp_path, "batch", str(manifest), "--out", str(tmp_path / "out"))
    assert all(".j" in os.path.basename(group) for group in left), "a lent group of the batch's pool"
    _prune_removes(runner, left)
