"""A runner service short of descriptors (its open-file limit lowered under it, or its files
held by many runs) says so in one line naming the limit, a set-up failure (111), and serves the
calls after it once descriptors are back: the boundary's step that met ``EMFILE`` (a reused
cgroup's ``cpu.stat`` read, its group made) was a 102 ``container_error`` quoting
``cannot read .../cpu.stat: [Errno 24] Too many open files``, which blamed the container."""

from __future__ import annotations

import json
import subprocess
import sys

CALLER = r"""
import json, resource, sys, processkit
from processkit.api import shared

processkit.run(["true"])  # the service started, its pool's group lent once
pid = shared.connection().pid
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
seen = []
for limit in map(int, sys.argv[1:]):
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
    result = processkit.run(["echo", "short"], capture_output=True)
    seen.append([limit, result.returncode, result.source, result.message, type(result.events[-1]).__name__])
resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
after = processkit.run(["echo", "after"], capture_output=True)
print(json.dumps({"seen": seen, "after": [after.returncode, after.stdout.decode()]}))
"""


def test_a_service_out_of_descriptors_names_the_limit_and_serves_on(tmp_path):
    limits = [60, 30, 16]  # the first starts no child: its group, lent, is reused (and read) by the next
    done = subprocess.run(
        [sys.executable, "-c", CALLER, *map(str, limits)], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    for (limit, code, source, message, last), wanted in zip(report["seen"], limits):
        assert limit == wanted
        assert last == "RunnerExit", message  # its stream ended, as every run's
        assert (code, source) == (111, "setup"), message
        assert message.startswith("no descriptor left "), message
        assert f"the open-file limit (ulimit -n: {limit}) is reached" in message, message
        assert "Errno" not in message and "\n" not in message, message
    assert report["after"] == [0, "after\n"]
