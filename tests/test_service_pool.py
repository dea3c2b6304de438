"""The runner service's pool of lent groups between two calls (issue 49): the groups a call's run
gave back are checked and started again once its reply is sent, not on the next call's way to
its spawn, and its idle memory groups keep their files open (a share of the open-file limit),
so a call neither reopens nor closes a dozen cgroup files. Cgroup v1 hosts only (where the
service lends memory and cpuacct groups); skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from processkit.containment import cgroup_v1

PY = sys.executable
TESTS = os.path.dirname(os.path.abspath(__file__))  # run_groups, for the caller
V1 = cgroup_v1.own_groups()

needs_v1 = pytest.mark.skipif(
    not {"memory", "cpuacct"} <= V1.keys() or not all(os.access(V1[c], os.W_OK) for c in ("memory", "cpuacct")),
    reason="no writable cgroup v1 memory and cpuacct hierarchies",
)

# The service's groups of one hierarchy, found under the caller's own group there (the service
# is the caller's child, in its groups), by the service's pid and their tokens' time since the
# caller began (tests/run_groups.py).
GROUPS = r"""
import os, time
from run_groups import groups_of
began = time.time_ns()
def groups(parent, pid):
    return groups_of(pid, began, parent)
"""


def _caller(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([PY, "-c", GROUPS + script, *args], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@needs_v1
def test_a_calls_cpuacct_group_is_started_again_once_the_reply_is_sent():
    """The cpuacct group a call's run used reads 0 again soon after the call returns, with no
    other call made (before: it held the run's usage until the next call's take zeroed it)."""
    script = r"""
import json, sys, time, processkit
parent = sys.argv[1]
pid = processkit.run(["true"]).runner_pid
found = groups(parent, pid)
usage = []
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    usage = [int(open(os.path.join(g, "cpuacct.usage")).read()) for g in found]
    if usage and not any(usage):
        break
    time.sleep(0.01)
after = processkit.run(["true"])
print(json.dumps({"groups": len(found), "usage": usage, "after": after.returncode, "cpu": after.usage.cpu_ns is not None}))
"""
    found = _caller(script, V1["cpuacct"])
    assert found["groups"] >= 1
    assert found["usage"] == [0] * found["groups"], found
    assert found["after"] == 0 and found["cpu"]


@needs_v1
def test_idle_memory_groups_keep_their_files_in_the_service(tmp_path):
    """Two runs at once make two memory groups; once both have ended, each of them has its files
    held open by the service (the pool's room), not only the one started again ahead."""
    script = r"""
import json, sys, processkit
parent, gate = sys.argv[1], sys.argv[2]
wait = f"while [ ! -e {gate} ]; do sleep 0.01; done"  # both runs in flight until the gate is made
handles = [processkit.start(["sh", "-c", wait]) for _ in range(2)]
open(gate, "w").close()
pid = handles[0].runner_pid
codes = [h.wait() for h in handles]
processkit.run(["true"])  # a call after both: the service is between calls again
found = groups(parent, pid)
held = {}
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    for group in found:
        if target.startswith(group + "/"):
            held[group] = held.get(group, 0) + 1
print(json.dumps({"codes": codes, "groups": len(found), "held": sorted(held.values()), "holding": len(held)}))
"""
    found = _caller(script, V1["memory"], str(tmp_path / "gate"))
    assert found["codes"] == [0, 0]
    assert found["groups"] >= 2, found
    assert found["holding"] == found["groups"], found
