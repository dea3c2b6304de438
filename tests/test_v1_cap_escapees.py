"""A cap carried by a run's v1 group (a hybrid host's ``--max-memory``, ``--max-processes``,
``--cpu-quota``) holds the processes in that group alone: a root member that writes itself into
another group of the hierarchy runs without it, while its container (the run's v2 group) still
holds it. ``limit_evidence`` then says ``unknown`` for that axis, never ``not_tripped``: the
kernel's counter of the run's group cannot have seen what the cap did not hold."""

from __future__ import annotations

import os

import pytest

from conftest import read_events, start_cli
from processkit.containment.cgroup_v2 import own_group
from streams import PY, check_stream, one, require_mechanism
from test_cgroup_escapees import _remove_when_empty, cgroup_root, v1_group  # noqa: F401 - a fixture

# The run's command: a child moves itself into the v1 group at argv[1] (its v2 group stays the
# run's) and sleeps on; the command exits once it has moved.
LEAVES_ITS_MEMORY_GROUP = r"""
import os, sys, time
read, write = os.pipe()
if os.fork() == 0:
    with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))
    os.write(write, b".")
    time.sleep(60)
    os._exit(0)
os.read(read, 1)
"""


@pytest.fixture
def memory_group():
    """A v1 memory group of the test's own, removed at the end (its process is killed with the
    run's v2 group, where it stays)."""
    mount, _ = own_group()
    if mount is not None and "memory" in open(os.path.join(mount, "cgroup.controllers")).read().split():
        pytest.skip("cgroup v2 has the memory controller here: a run's memory cap is its v2 group's")
    group = v1_group("memory", "cap-escape-test")
    yield group
    _remove_when_empty(group)


def test_a_member_that_left_its_v1_memory_group_leaves_the_memory_verdict_unknown(tmp_path, memory_group):
    """The member outside the run's memory group is not held by ``--max-memory``: the stream's
    ``limit_evidence`` says ``memory: unknown`` (it said ``not_tripped``); the other axes, uncapped,
    stay ``not_tripped``, and the member, still in the run's v2 group, is killed with it."""
    events = tmp_path / "events.jsonl"
    proc = start_cli(
        "run", "--max-memory", "256M", "--jsonl", events, "--", PY, "-c", LEAVES_ITS_MEMORY_GROUP, memory_group
    )
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    check_stream(events, proc.returncode)
    assert proc.returncode == 0, err
    evidence = one(found, "limit_evidence")
    assert evidence == {**evidence, "memory": "unknown", "processes": "not_tripped", "cpu": "not_tripped"}, evidence
    assert one(found, "cleanup_finished")["remaining"] == 0, one(found, "cleanup_finished")


# The run's root moves itself into the v1 group at argv[1] and the v2 group at argv[2], says so
# at argv[3], and sleeps on until the timeout.
ROOT_LEAVES_BOTH = r"""
import os, sys, time
for group in sys.argv[1:3]:
    with open(os.path.join(group, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))
open(sys.argv[3], "w").close()
time.sleep(60)
"""


def test_a_root_that_left_its_v1_memory_group_and_its_container_leaves_the_memory_verdict_unknown(
    tmp_path, memory_group, cgroup_root
):
    """The root leaves the run's v2 group as well, so it is no member when the evidence is read:
    it is read as the root all the same (``memory: unknown``; it said ``not_tripped``), then
    killed by its pid and listed, as a root that left is."""
    events, moved = tmp_path / "events.jsonl", tmp_path / "moved"
    argv = [PY, "-c", ROOT_LEAVES_BOTH, memory_group, cgroup_root, str(moved)]
    proc = start_cli("run", "--max-memory", "256M", "--timeout", "1s", "--jsonl", events, "--", *argv)
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    assert moved.exists() and proc.returncode == 106, err
    assert one(found, "limit_evidence")["memory"] == "unknown", one(found, "limit_evidence")
    assert one(found, "cleanup_finished")["remaining_pids"] == [one(found, "run_started")["root_pid"]]
