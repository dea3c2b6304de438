"""A capped run's ``limit_evidence`` on a pure cgroup v2 host, whose caps are the run's own v2
group's: a root that wrote itself out of that group (root may) ran uncapped, so a capped axis
whose counter says ``not_tripped`` is ``unknown`` (``CgroupV2Controllers.left``), as on a hybrid
host for a member outside a run's v1 cap group (tests/test_v1_cap_escapees.py). This host's caps
are v1 groups, so the v2 cap layer is fed here: its group (what ``CgroupV2.member_pids`` lists
and ``holds`` says) and real processes, one of them outside it, one exited."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from processkit.containment.base import Container
from processkit.containment.caps_v2 import CgroupV2Controllers
from processkit.containment.members import read_stat


class Group:
    """The run's v2 group as the cap layer asks it: ``inside`` its members; any other live pid
    outside it; a gone one raises as ``CgroupV2.holds`` does."""

    def __init__(self, inside: set[int]):
        self.inside = inside

    def member_pids(self) -> list[int]:
        return sorted(self.inside)

    def holds(self, pid: int) -> bool:
        read_stat(pid)  # FileNotFoundError for one gone
        return pid in self.inside


def caps(group: Group, capped: list[str]) -> CgroupV2Controllers:
    layer = CgroupV2Controllers.__new__(CgroupV2Controllers)  # no group of the host's written
    layer.capped, layer._group = capped, group
    return layer


@pytest.fixture
def processes():
    """Two live processes of this test's (a member, a root that left) and one exited, not
    yet collected (a zombie: on its way out)."""
    started = [subprocess.Popen(["sleep", "600"]) for _ in range(2)]
    ended = subprocess.Popen(["true"])
    while read_stat(ended.pid)[1][0] != b"Z":
        pass  # its exit, as the kernel's state says
    yield [p.pid for p in started], ended.pid
    for process in started:
        process.kill()
    for process in (*started, ended):
        process.wait()


def test_a_root_outside_the_runs_v2_group_leaves_every_capped_axis_unknown(processes):
    (member, root), zombie = processes
    layer = caps(Group({member}), ["memory", "processes"])
    assert layer.left([member]) == []
    assert layer.left([member, root]) == ["memory", "processes"]
    assert layer.left([member, zombie]) == []  # on its way out: its group says nothing of the cap
    assert layer.left(None) == ["memory", "processes"]
    layer.evidence = lambda: {"memory": "not_tripped", "processes": "tripped", "cpu": "not_tripped"}
    run = SimpleNamespace(controllers=layer)  # the run's container, as limit_evidence reads it
    verdicts = Container.limit_evidence(run, [member, root])
    assert verdicts == {"memory": "unknown", "processes": "tripped", "cpu": "not_tripped"}
    assert Container.limit_evidence(run, [member]) == layer.evidence()
