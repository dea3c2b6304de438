"""What the API's service lists as a run's escapees (``service/escapees.py``): an orphan comes to
the service with nothing that says which run, batch or leftover it came from, so a run lists
what it ends only where nothing else could have left it one. Each case runs in a Python process
of its own, so its service is fresh (nothing an earlier test's runs left is below it)."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import SAFETY_NET
from streams import PY
from test_cgroup_escapees import cgroup_root  # noqa: F401 - the fixture

# Run X, overlapped by run Y (so X does not look), leaves a daemon D in the group at argv[2]; a
# later run C, alone, tells D to fork W and ends once W is there. W is D's, never C's.
AN_EARLIER_RUNS_LEFTOVER_FORKS = r"""
import json, os, select, sys, time
import processkit
d, group = sys.argv[1], sys.argv[2]
PY = sys.executable

def until(name):
    while not os.path.exists(os.path.join(d, name)): time.sleep(0.01)

DAEMON = r'''
import os, sys, time
d, group = sys.argv[1], sys.argv[2]

def say(name):  # whole once it is there
    open(os.path.join(d, name + ".part"), "w").write(str(os.getpid()))
    os.rename(os.path.join(d, name + ".part"), os.path.join(d, name))

if os.fork() == 0:
    open(os.path.join(group, "cgroup.procs"), "w").write(str(os.getpid()))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2): os.dup2(null, fd)
    say("D")
    while not os.path.exists(os.path.join(d, "go")): time.sleep(0.01)
    if os.fork() == 0:
        say("W")
        while True: time.sleep(60)
    while True: time.sleep(60)
while not os.path.exists(os.path.join(d, "D")): time.sleep(0.01)
'''
WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"
y = processkit.start([PY, "-c", WAIT, os.path.join(d, "ydone")])
x = processkit.run([PY, "-c", DAEMON, d, group], jsonl=os.path.join(d, "x.jsonl"))
open(os.path.join(d, "ydone"), "w").close()
y.wait(timeout=60)
daemon = int(open(os.path.join(d, "D")).read())
daemon_fd = os.pidfd_open(daemon)
C = r'''
import os, sys, time
d = sys.argv[1]
open(os.path.join(d, "go"), "w").close()
while not os.path.exists(os.path.join(d, "opened")): time.sleep(0.01)
'''
c = processkit.start([PY, "-c", C, d], jsonl=os.path.join(d, "c.jsonl"))
until("W")
child = int(open(os.path.join(d, "W")).read())
child_fd = os.pidfd_open(child)
open(os.path.join(d, "opened"), "w").close()
c.wait(timeout=60)

def stream(name):
    return [json.loads(line) for line in open(os.path.join(d, name))]

def finished(name):
    return next(e for e in stream(name) if e["event"] == "cleanup_finished")

print(json.dumps({
    "mechanism": next(e for e in stream("c.jsonl") if e["event"] == "run_started")["mechanism"],
    "x": finished("x.jsonl")["remaining_pids"],
    "c": finished("c.jsonl")["remaining_pids"],
    "daemon": daemon,
    "child": child,
    "ended": [bool(select.select([fd], [], [], 30)[0]) for fd in (daemon_fd, child_fd)],
}))
"""


def _scenario(tmp_path, script: str, *args) -> dict:
    done = subprocess.run(
        [PY, "-c", script, str(tmp_path), *map(str, args)], capture_output=True, timeout=2 * SAFETY_NET
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_a_sole_run_lists_nothing_an_earlier_runs_leftover_forked_meanwhile(tmp_path, cgroup_root):  # noqa: F811
    """Run X overlapped run Y, so its daemon D (outside X's group) lived on as the service's
    child, unlisted. A later run C, the only one live, makes D fork W: W comes to the service
    beside anything of C's, and a start time after C began does not make it C's. C's teardown
    ends D and W and lists neither (it listed W as its own)."""
    found = _scenario(tmp_path, AN_EARLIER_RUNS_LEFTOVER_FORKS, cgroup_root)
    if found["mechanism"] != "cgroup_v2":
        pytest.skip(f"this host gives runs {found['mechanism']}, not cgroup_v2")
    assert found["x"] == [], found  # X overlapped Y: it did not look
    assert found["child"] not in found["c"] and found["c"] == [], found
    assert found["ended"] == [True, True], f"C's teardown left the leftover or its child running: {found}"
