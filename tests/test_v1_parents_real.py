"""A run's cgroup v1 parents are the real paths ``/proc/self/mountinfo`` names, taken as they are:
a run on a v1 host no longer ``lstat``s each component of each parent (``realpath``: 18 system
calls and ~45 us a run on a host of four hierarchies). Co-mounted controllers still share one
group: ``PROCESSKIT_CGROUP_V1_ROOT``'s directories, which may be links to one, are resolved once
a process."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command
from processkit.containment import cgroup_v1


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to see the runner's stats")
def test_a_run_on_a_v1_host_does_not_walk_its_parents(tmp_path, monkeypatch):
    monkeypatch.delenv("PROCESSKIT_CGROUP_V1_ROOT", raising=False)
    monkeypatch.delenv("PROCESSKIT_ACCOUNTING", raising=False)
    parents = set(cgroup_v1.own_groups().values())
    if not parents:
        pytest.skip("no cgroup v1 hierarchy is mounted here")
    trace = tmp_path / "trace"
    command = ["strace", "-f", "-qq", "-e", "trace=lstat,newfstatat,readlink", "-o", str(trace)]
    done = subprocess.run(
        [*command, *cli_command(), "run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    walked = re.compile(r'newfstatat\(AT_FDCWD, "([^"]*)", .*AT_SYMLINK_NOFOLLOW\)|lstat\("([^"]*)"')
    seen = {found.group(1) or found.group(2) for found in map(walked.search, trace.read_text().splitlines()) if found}
    assert not seen & parents, sorted(seen & parents)


def test_co_mounted_controllers_under_a_given_root_share_one_group(tmp_path, monkeypatch):
    (tmp_path / "cpu,cpuacct").mkdir()
    for name in ("memory", "pids"):
        (tmp_path / name).mkdir()
    for name in ("cpu", "cpuacct"):
        (tmp_path / name).symlink_to("cpu,cpuacct")
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(tmp_path))
    parents = cgroup_v1.own_groups()
    assert parents["cpu"] == parents["cpuacct"] == str((tmp_path / "cpu,cpuacct").resolve())
    plan = cgroup_v1._hierarchies(parents, ("cpu",))
    assert (str((tmp_path / "cpu,cpuacct").resolve()), ("cpu", "cpuacct")) in plan
    assert len(plan) == 3  # memory, pids and the one co-mounted hierarchy


def test_discovery_names_one_directory_for_co_mounted_controllers(tmp_path, monkeypatch):
    """Without a given root, co-mounted controllers share one group because discovery gives them
    one directory (their one mount point), not because a path is resolved: the mount point is
    decoded as the kernel escapes it, and a hierarchy mounted outside ``/sys/fs/cgroup`` is taken
    where it is."""
    from processkit import mountinfo
    from processkit.containment import cgroupfs

    table = tmp_path / "mountinfo"
    table.write_text(
        "30 25 0:26 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "31 25 0:27 /docker/abc /sys/fs/cgroup/my\\040memory rw,nosuid shared:9 - cgroup cgroup rw,memory\n"
        "32 25 0:28 / /run/pk/pids rw,nosuid - cgroup cgroup rw,pids\n"
        "33 25 0:29 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"
    )
    monkeypatch.setitem(mountinfo._MOUNTS, mountinfo.MOUNTINFO, mountinfo._read_mounts(str(table)))
    own = "4:cpu,cpuacct:/docker/abc/sub\n5:memory:/docker/abc/sub\n6:pids:/docker/abc/sub\n0::/docker/abc/sub\n"
    read_text = cgroupfs.read_text
    monkeypatch.setattr(cgroupfs, "read_text", lambda path: own if path == "/proc/self/cgroup" else read_text(path))
    monkeypatch.setattr(cgroup_v1, "_PLANS", {})
    found = cgroup_v1._discovered()
    assert found == {
        "cpu": "/sys/fs/cgroup/cpu,cpuacct/sub",
        "cpuacct": "/sys/fs/cgroup/cpu,cpuacct/sub",
        "memory": "/sys/fs/cgroup/my memory/sub",
        "pids": "/run/pk/pids/docker/abc/sub",
    }
    plan = cgroup_v1._hierarchies(found, ("cpu",))
    assert ("/sys/fs/cgroup/cpu,cpuacct/sub", ("cpu", "cpuacct")) in plan and len(plan) == 3
