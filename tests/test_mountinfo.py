"""The one mountinfo reader the cgroup code finds its hierarchies with."""

from __future__ import annotations

import os

from processkit import mountinfo

SAMPLE = (
    "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
    "31 25 0:27 /build\\040farm /mnt/cg\\040v1\\011tab\\134slash rw master:3 shared:4 - cgroup cgroup rw,memory,pids\n"
    "40 1 8:1 / /data rw - ext4 /dev/sda1 rw\n"
)


def test_paths_with_a_space_tab_or_backslash_are_decoded(tmp_path):
    path = tmp_path / "mountinfo"
    path.write_text(SAMPLE)
    found = mountinfo.mounts(str(path))
    assert found[0] == mountinfo.Mount("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate")
    # Two optional fields before the "-": the fields after it are still found.
    assert found[1] == mountinfo.Mount("/build farm", "/mnt/cg v1\ttab\\slash", "cgroup", "rw,memory,pids")
    assert [mount.fstype for mount in found] == ["cgroup2", "cgroup", "ext4"]


def test_this_hosts_mount_points_all_exist():
    """Read for real: every mount point the reader returns names a directory that exists."""
    found = mountinfo.mounts()
    assert found and all(
        os.path.exists(mount.mount_point) for mount in found if mount.fstype in ("cgroup", "cgroup2", "proc")
    )
