"""The resource limits a caller sets after its runner service started reach the run's child, as a
``subprocess`` child's do: the service was started with the caller's limits of that moment and
its children inherited the service's, so a caller that sandboxed its children with
``resource.setrlimit`` (a CPU, file-size or address-space cap before running untrusted code) had
them run with none of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PY = sys.executable

# The service started first, then the caller's limits lowered (soft and hard); each child says
# what it got, under subprocess and under processkit's run and start.
CALLER = r"""
import json, resource, subprocess, processkit
processkit.run(["true"])
for which, value in ((resource.RLIMIT_CPU, 50), (resource.RLIMIT_FSIZE, 1 << 20), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(which, (value, value))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 200), hard))
resource.setrlimit(resource.RLIMIT_AS, (1 << 34, resource.getrlimit(resource.RLIMIT_AS)[1]))
SAY = ["sh", "-c", "echo $(ulimit -t) $(ulimit -Ht) $(ulimit -f) $(ulimit -Hf) $(ulimit -c) $(ulimit -n) $(ulimit -v)"]
with processkit.start(SAY, stdout=subprocess.PIPE) as handle:
    started = handle.stdout.read().decode()
print(json.dumps({
    "subprocess": subprocess.run(SAY, capture_output=True).stdout.decode(),
    "run": processkit.run(SAY, capture_output=True).stdout.decode(),
    "start": started,
}))
"""


@pytest.mark.parametrize("spawn", ["native", "python"])
def test_the_callers_limits_at_the_call_reach_the_child(spawn):
    if spawn == "native":
        from processkit import native

        if native.module() is None:
            pytest.skip("the native spawn was not built")
    env = {**os.environ, "PROCESSKIT_SPAWN": spawn}
    done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["subprocess"].split() == ["50", "50", "2048", "2048", "0", "200", "16777216"], seen
    assert seen["run"] == seen["subprocess"], "run()'s child has the caller's limits at the call"
    assert seen["start"] == seen["subprocess"], "start()'s child has the caller's limits at the call"


# The same for the process the service starts for a batch and for a benchmark: its jobs and
# commands ran under the service's limits.
SPAWNED = r"""
import json, os, resource, sys, processkit
out = sys.argv[1]
processkit.run(["true"])
resource.setrlimit(resource.RLIMIT_CPU, (50, 50))
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
SAY = "echo $(ulimit -t) $(ulimit -Hf)"
processkit.batch([{"id": "a", "args": ["sh", "-c", SAY]}], out=os.path.join(out, "batch"))
processkit.bench([["sh", "-c", SAY + " > " + os.path.join(out, "bench.txt")]], runs=1, warmup=0)
with open(os.path.join(out, "batch", "a", "capture", "stdout.log")) as job, open(os.path.join(out, "bench.txt")) as command:
    print(json.dumps({"batch": job.read(), "bench": command.read()}))
"""


def test_the_callers_limits_reach_a_batchs_jobs_and_a_benchmarks_commands(tmp_path):
    done = subprocess.run([PY, "-c", SPAWNED, str(tmp_path)], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen == {"batch": "50 2048\n", "bench": "50 2048\n"}, seen


# The batch's own process is not the caller's child: it writes the jobs' captures and records.
# Under a 1 MiB file-size cap meant for the jobs it cut a job's 3,000,000 bytes of output at
# 1 MiB (a job's writes to its pipe are under no file-size cap, as a subprocess child's are),
# and a CPU cap ended the batch itself.
CAPPED = r"""
import json, os, resource, sys, processkit
out = sys.argv[1]
processkit.run(["true"])
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
jobs = [{"id": "big", "args": ["head", "-c", "3000000", "/dev/zero"]}, {"id": "says", "args": ["sh", "-c", "ulimit -f"]}]
lines = processkit.batch(jobs, out=out)
def captured(job):
    return os.path.getsize(os.path.join(out, job, "capture", "stdout.log"))
with open(os.path.join(out, "says", "capture", "stdout.log")) as says:
    print(json.dumps({"exits": sorted(line.get("exit_code") for line in lines), "big": captured("big"), "says": says.read()}))
"""


def test_a_batchs_own_process_is_not_held_to_the_limits_its_jobs_get(tmp_path):
    done = subprocess.run([PY, "-c", CAPPED, str(tmp_path / "out")], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen == {"exits": [0, 0], "big": 3_000_000, "says": "2048\n"}, seen
