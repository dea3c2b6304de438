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
from test_cgroup_escapees import GRANDCHILD_LEAVES, cgroup_root  # noqa: F401 - the fixture

# A run, the only one, whose background child leaves its group for the one at argv[2]
# (GRANDCHILD_LEAVES, argv[3]): its pid and whether it ended once the run was over.
A_SOLE_RUNS_ESCAPEE = r"""
import json, os, select, sys, time
import processkit
d, group, command = sys.argv[1], sys.argv[2], sys.argv[3]
where, events = os.path.join(d, "escapee"), os.path.join(d, "events.jsonl")
handle = processkit.start([sys.executable, "-c", command, where, group], jsonl=events)
while not os.path.exists(where) and not os.path.exists(where + ".failed"): time.sleep(0.01)
if os.path.exists(where + ".failed"):
    handle.wait(timeout=60)
    print(json.dumps({"failed": open(where + ".failed").read()}))
    sys.exit(0)
pid = int(open(where).read())
pidfd = os.pidfd_open(pid)
open(where + ".opened", "w").close()
code = handle.wait(timeout=60)
stream = [json.loads(line) for line in open(events)]
print(json.dumps({
    "mechanism": next(e for e in stream if e["event"] == "run_started")["mechanism"],
    "code": code,
    "finished": next(e for e in stream if e["event"] == "cleanup_finished"),
    "pid": pid,
    "ended": bool(select.select([pidfd], [], [], 30)[0]),
}))
"""

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


def _cgroup_v2(found: dict) -> None:
    if "failed" in found:
        pytest.skip(f"the move to the root cgroup was refused here: {found['failed']}")
    if found["mechanism"] != "cgroup_v2":
        pytest.skip(f"this host gives runs {found['mechanism']}, not cgroup_v2")


def test_the_apis_run_lists_and_ends_a_grandchild_that_left_its_cgroup(tmp_path, cgroup_root):  # noqa: F811
    """A run of the API's service whose process left its group, the only run the service carried
    meanwhile: ended and listed in ``cleanup_finished``'s ``remaining_pids`` as ``run`` lists it
    (it lived on as the service's child while the stream said clean)."""
    found = _scenario(tmp_path, A_SOLE_RUNS_ESCAPEE, cgroup_root, GRANDCHILD_LEAVES)
    _cgroup_v2(found)
    assert found["code"] == 0, found
    assert found["finished"]["remaining_pids"] == [found["pid"]] and found["finished"]["remaining"] == 1, found
    assert found["ended"], "the process of the API's run outside its group outlived the run"


def test_a_sole_run_lists_nothing_an_earlier_runs_leftover_forked_meanwhile(tmp_path, cgroup_root):  # noqa: F811
    """Run X overlapped run Y, so its daemon D (outside X's group) lived on as the service's
    child, unlisted. A later run C, the only one live, makes D fork W: W comes to the service
    beside anything of C's, and a start time after C began does not make it C's. C's teardown
    ends D and W and lists neither (it listed W as its own)."""
    found = _scenario(tmp_path, AN_EARLIER_RUNS_LEFTOVER_FORKS, cgroup_root)
    _cgroup_v2(found)
    assert found["x"] == [], found  # X overlapped Y: it did not look
    assert found["child"] not in found["c"] and found["c"] == [], found
    assert found["ended"] == [True, True], f"C's teardown left the leftover or its child running: {found}"


# Run C, alone, is live while a batch of the service's begins, starts its job, whose child J
# lives on once the batch is killed (SIGKILL: the job's root dies with it) and comes to the service; once the service has let the batch go
# (its pidfd closed), C ends. J is the batch's, never C's.
A_BATCH_BEGUN_AND_GONE_DURING_A_RUN = r"""
import json, os, signal, sys, threading, time
import processkit
d = sys.argv[1]
PY = sys.executable

def until(done):
    while not done(): time.sleep(0.01)

def pidfds_on(service, pid):
    found = 0
    for fd in os.listdir(f"/proc/{service}/fdinfo"):
        try:
            found += f"Pid:\t{pid}\n" in open(f"/proc/{service}/fdinfo/{fd}").read()
        except OSError:
            continue
    return found

def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])

WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"
c = processkit.start([PY, "-c", WAIT, os.path.join(d, "cdone")], jsonl=os.path.join(d, "c.jsonl"))
JOB = r'''
import os, sys, time
d = sys.argv[1]
if os.fork() == 0:
    open(os.path.join(d, "J.part"), "w").write(f"{os.getpid()} {os.getppid()}")
    os.rename(os.path.join(d, "J.part"), os.path.join(d, "J"))
while not os.path.exists(os.path.join(d, "jdone")): time.sleep(0.01)
'''
jobs = [{"id": "j", "args": [PY, "-c", JOB, d]}]
batch = threading.Thread(target=lambda: processkit.batch(jobs, out=os.path.join(d, "out"), jobs=1), daemon=True)
batch.start()
until(lambda: os.path.exists(os.path.join(d, "J")))
job, root = map(int, open(os.path.join(d, "J")).read().split())
job_fd = os.pidfd_open(job)
batcher = parent(root)
service = parent(batcher)
until(lambda: pidfds_on(service, batcher))  # the service watches the batch's end
os.kill(batcher, signal.SIGKILL)
until(lambda: parent(job) == service)
until(lambda: not pidfds_on(service, batcher))  # the service has let the batch go
batch.join(timeout=60)
open(os.path.join(d, "cdone"), "w").close()
c.wait(timeout=60)
stream = [json.loads(line) for line in open(os.path.join(d, "c.jsonl"))]
open(os.path.join(d, "jdone"), "w").close()
print(json.dumps({
    "mechanism": next(e for e in stream if e["event"] == "run_started")["mechanism"],
    "c": next(e for e in stream if e["event"] == "cleanup_finished")["remaining_pids"],
    "job": job,
}))
import select
select.select([job_fd], [], [], 30)
"""


def test_a_run_lists_nothing_of_a_batch_that_began_and_ended_while_it_ran(tmp_path):
    """A batch of the service's that begins and ends while a run is the only run live (killed:
    its job comes to the service) leaves an orphan the run cannot tell from its own: the run's
    teardown lists none (it listed the batch's job as its own)."""
    found = _scenario(tmp_path, A_BATCH_BEGUN_AND_GONE_DURING_A_RUN)
    _cgroup_v2(found)
    assert found["c"] == [], found
