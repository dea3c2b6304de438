"""Process-group containment asks the kernel whether anyone is left in the group before reading
every ``/proc`` entry: the question a batch asks several times a job once a root has gone."""

from __future__ import annotations

import subprocess

from processkit.containment import members, process_group


def _group_of(pgid: int) -> process_group.ProcessGroup:
    group = process_group.ProcessGroup.__new__(process_group.ProcessGroup)  # no subreaper for pytest
    group._pgid = pgid
    return group


def test_an_empty_group_has_no_members_without_a_scan_of_proc(monkeypatch):
    child = subprocess.Popen(["sleep", "30"], process_group=0)
    scans = []
    real_all_pids = members.all_pids
    monkeypatch.setattr(members, "all_pids", lambda: scans.append(1) or real_all_pids())
    group = _group_of(child.pid)
    try:
        assert group.member_pids() == [child.pid]
        assert scans, "a live group is found by reading /proc"
    finally:
        child.kill()
        child.wait()
    scans.clear()
    assert group.member_pids() == []
    assert scans == [], "an empty group is answered by one kill(-pgid, 0)"
