"""What a batch job repeats that it need not (issue 49, batch52), counted from outside: the
reads of a lent v2 group's controllers."""

from __future__ import annotations

import os

import pytest


def test_a_lent_v2_groups_controllers_are_read_once_a_lend():
    """Whether a v2 group's controllers let it be kept idle is read once when it is made; given
    back, only its link count is looked at, and its controllers are read again when it is lent
    (``lent.restarted``): one read a lend, not one more at each give."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent()
    if parent is None or os.geteuid() != 0:
        pytest.skip("no cgroup v2 parent group here")
    reads: list[str] = []
    real_content = cgroupfs.HeldFiles.content
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    rounds = 4
    try:
        cgroupfs.HeldFiles.content = lambda files, name: reads.append(name) or real_content(files, name)  # type: ignore[method-assign]
        groups = []
        for _ in range(rounds):
            group = lender.take(parent, pool.V2)
            groups.append(group)
            lender.give(group)
        assert all(group is groups[0] for group in groups), "the one idle group is lent again"
        assert reads.count("cgroup.controllers") <= rounds, reads
    finally:
        cgroupfs.HeldFiles.content = real_content  # type: ignore[method-assign]
        lender.close()
        home.close()
