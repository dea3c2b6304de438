"""A group below the run's that cannot be read (the child makes it, and owns it: a runner of
its user is refused when the child closes it): its members went uncounted, without a word.
`cleanup_started` gave the count of the members it could read as the tree's, `read_error:
false` (a snapshot listed them as the whole tree so too). Now a group below that cannot be read
is a failed read: `read_error: true`, the count 0 (the reference's only shape for it: no
partial count), with the warning on stderr. The teardown's last read is no such claim: the
run's group says `populated 0` of its whole subtree once the kill is done."""

from __future__ import annotations

import signal

from conftest import read_events, reaped, start_cli
from streams import PY, one, read_until, require_mechanism

# The child makes a group below its own and moves a sleeper into it, then says so.
TREE = r"""
import os, time
own = next(line[3:] for line in open("/proc/self/cgroup").read().splitlines() if line.startswith("0::"))
top = next(fields[1] for fields in map(str.split, open("/proc/mounts")) if fields[2] == "cgroup2")
hidden = top + own + "/hidden"
os.mkdir(hidden)
if os.fork() == 0:
    with open(hidden + "/cgroup.procs", "w") as procs:
        procs.write("0")
    time.sleep(120)
    os._exit(0)
while not open(hidden + "/cgroup.procs").read().strip():
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(120)
"""

# The runner's read of that group refused, as a runner not the child's owner would be.
REFUSED = (
    "processkit.containment.cgroupfs",
    "member_pids",
    "(lambda read: lambda path, name='cgroup.procs': (_ for _ in ()).throw(PermissionError(13, 'Permission denied'))"
    " if path.endswith('/hidden') else read(path, name))(__import__('processkit.containment.cgroupfs',"
    " fromlist=['member_pids']).member_pids)",
)


def test_an_unreadable_group_below_is_a_read_error_not_a_clean_teardown(tmp_path, pump_backend):
    stream = tmp_path / "run.jsonl"
    runner = start_cli("run", "--jsonl", stream, "--", PY, "-c", TREE, cwd=tmp_path, patched=REFUSED)
    with reaped(runner):
        read_until(runner.stdout, b"ready", "the child's hidden member")
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=60)
    events = read_events(stream)
    require_mechanism(events, "cgroup_v2")
    started = one(events, "cleanup_started")
    assert started["read_error"] is True and started["members_before"] == 0, started
    assert b"warning" in err and b"members" in err, err
    # After the kill the run's group says ``populated 0`` of its whole subtree: that one is known.
    finished = one(events, "cleanup_finished")
    assert finished["read_error"] is False and finished["remaining"] == 0, finished


# A threaded group below, a thread of the child's moved into it: its ``cgroup.procs`` refuses to
# be read (EOPNOTSUPP), its processes being listed by the group above it.
THREADED = r"""
import os, threading, time
own = next(line[3:] for line in open("/proc/self/cgroup").read().splitlines() if line.startswith("0::"))
top = next(fields[1] for fields in map(str.split, open("/proc/mounts")) if fields[2] == "cgroup2")
below = top + own + "/threads"
os.mkdir(below)
with open(below + "/cgroup.type", "w") as kind:
    kind.write("threaded")
moved = threading.Event()
def work():
    with open(below + "/cgroup.threads", "w") as threads:
        threads.write(str(threading.get_native_id()))
    moved.set()
    time.sleep(120)
threading.Thread(target=work, daemon=True).start()
moved.wait()
print("ready", flush=True)
time.sleep(120)
"""


def test_a_threaded_group_below_is_read_through_the_group_above(tmp_path):
    stream = tmp_path / "run.jsonl"
    runner = start_cli("run", "--jsonl", stream, "--", PY, "-c", THREADED, cwd=tmp_path)
    with reaped(runner):
        read_until(runner.stdout, b"ready", "the child's thread in a threaded group")
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=60)
    events = read_events(stream)
    require_mechanism(events, "cgroup_v2")
    started = one(events, "cleanup_started")
    assert started["read_error"] is False and started["members_before"] == 1, (started, err)
    assert b"could not count" not in err, err
