"""A process that runs for long (the API's runner service, a batch of a million jobs) keeps no
record in ``containment`` that grows with its runs: each run of its own cgroups (a capped run's,
a batch job's) made and released leaves the module's tables as they were after the first. The
parents to look at again (``_REVISIT``) are the host's other runs' doing, bounded by those swept."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys, tempfile
from processkit import containment, rundir
from processkit.spec import Limits

def recorded():
    # _REVISIT holds a swept parent while another runner's dead run there waits out its grace, so
    # it fills and empties with the host's other runs (another test's killed runner): each of its
    # keys must be one of _SWEPT's, which is counted, so it cannot grow with the runs either.
    assert set(containment._REVISIT) <= containment._SWEPT, (containment._REVISIT, containment._SWEPT)
    tables = [v for v in vars(containment).values() if isinstance(v, (set, list, dict)) and v is not containment._REVISIT]
    return sum(len(table) for table in tables)

sizes, mechanisms = [], set()
for _ in range(20):
    home = rundir.RunDir(tempfile.mkdtemp())
    container = containment.create(Limits(max_processes=50), home, adopt_orphans=False)
    mechanisms.add(container.mechanism)
    container.release()
    home.close()
    sizes.append(recorded())
print(json.dumps({"sizes": sizes, "mechanisms": sorted(mechanisms)}))
"""


def test_runs_with_their_own_groups_leave_no_growing_record_behind(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    if found["mechanisms"] != ["cgroup_v2"]:
        pytest.skip(f"runs here are {found['mechanisms']}, not cgroup v2 groups of their own")
    sizes = found["sizes"]
    assert sizes[1:] == sizes[:1] * (len(sizes) - 1), f"containment's records grew with the runs: {sizes}"
