"""A group below the run's that cannot be read (the child makes it, and owns it: a runner of
its user is refused when the child closes it): its members went uncounted, without a word.
`cleanup_started` gave the count of the members it could read as the tree's, `read_error:
false` (a snapshot listed them as the whole tree so too). Now a group below that cannot be read
is a failed read: `read_error: true`, the count 0 (the reference's only shape for it: no
partial count), with the warning on stderr. Only the count fails: the SIGTERM still reaches
every member it can (`soft_signal: "sent"`), the tree's counters are still reported, and the
teardown's last read is no such claim: the run's group says `populated 0` of its whole subtree
once the kill is done.

The refusal is simulated: the runner's ``member_pids`` is patched to raise EACCES for the
child's group (a root runner, as CI's is, is never refused a read)."""

from __future__ import annotations

import json
import signal

from conftest import read_events, reaped, run_cli, start_cli
from streams import PY, one, read_until, require_mechanism

# The child makes a group below its own and moves a sleeper into it, then says so; a SIGTERM it
# takes, it says in a file.
TREE = r"""
import os, signal, time
own = next(line[3:] for line in open("/proc/self/cgroup").read().splitlines() if line.startswith("0::"))
top = next(fields[1] for fields in map(str.split, open("/proc/mounts")) if fields[2] == "cgroup2")
hidden = top + own + "/hidden"
os.mkdir(hidden)
if os.fork() == 0:
    with open(hidden + "/cgroup.procs", "w") as procs:
        procs.write("0")
    time.sleep(120)
    os._exit(0)
signal.signal(signal.SIGTERM, lambda *_: (open("termed", "w").close(), os._exit(0)))
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


# The run's subtree always said to be populated, as while a member the kill cannot end yet is
# in it: the read after the kill goes on to the refused group, and fails.
POPULATED = ("processkit.containment.cgroupfs", "populated", "lambda where: True")

BEFORE = (
    b"processkit-cli: warning: could not count the container's members before its teardown: "
    b"Permission denied (os error 13); cleanup_started's members_before is no count\n"
)
AFTER = (  # the kill's last read's own error named, as the first read's is
    b"processkit-cli: warning: could not count the container's members after the kill: "
    b"Permission denied (os error 13); the teardown is not confirmed clean\n"
)


def _ran(tmp_path, tree: str, patched: tuple[str, ...] | None = None) -> tuple[list[dict], bytes]:
    """The events and the stderr of a run of ``tree`` stopped by a SIGTERM once it says ``ready``."""
    stream = tmp_path / "run.jsonl"
    given = ("--grace", "1s", "--usage-file", "usage.json", "--jsonl", stream)  # the grace: the root's SIGTERM seen
    runner = start_cli("run", *given, "--", PY, "-c", tree, cwd=tmp_path, patched=patched)
    with reaped(runner):
        read_until(runner.stdout, b"ready", "the child's tree")
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=60)
    events = read_events(stream)
    require_mechanism(events, "cgroup_v2")
    return events, err


def test_an_unreadable_group_below_is_a_read_error_not_a_clean_teardown(tmp_path, pump_backend):
    events, err = _ran(tmp_path, TREE, REFUSED)
    started = one(events, "cleanup_started")
    assert started["read_error"] is True and started["members_before"] == 0, started
    assert BEFORE in err and AFTER not in err, err
    finished = one(events, "cleanup_finished")
    # The members it can reach still get the SIGTERM and the grace: the root took it.
    shutdown = finished["shutdown"]
    assert shutdown["soft_signal"] == "sent" and shutdown["members_before"] is None, shutdown
    assert (tmp_path / "termed").exists(), err
    # After the kill the run's group says ``populated 0`` of its whole subtree: that one is known.
    assert finished["read_error"] is False and finished["remaining"] == 0, finished
    # Only a sum over the members fails (null: not accounted for); the group's counters are read.
    summary = one(events, "resource_summary")
    assert summary["read_error"] is False, summary
    assert summary["peak_memory_bytes"] is None and summary["total_cpu_ms"] is None, summary
    assert json.loads((tmp_path / "usage.json").read_text())["total_cpu_ms"] is not None


def test_a_failed_read_after_the_kill_says_the_teardown_is_not_confirmed_clean(tmp_path):
    events, err = _ran(tmp_path, TREE, REFUSED + POPULATED)
    finished = one(events, "cleanup_finished")
    assert finished["read_error"] is True and finished["remaining"] == 0, finished
    assert BEFORE in err and AFTER in err, err


# The root leaves the sleeper (its output closed) in the hidden group, and exits.
LEFT = TREE.replace(
    "    time.sleep(120)\n    os._exit(0)",
    "    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n    os.dup2(1, 2)\n    time.sleep(120)\n    os._exit(0)",
).replace('print("ready", flush=True)\ntime.sleep(120)', 'print("ready", flush=True)')


def test_a_tree_left_uncounted_is_no_count_of_those_that_outlived_the_root(tmp_path):
    stream = tmp_path / "run.jsonl"
    ran = run_cli("run", "--jsonl", stream, "--", PY, "-c", LEFT, cwd=tmp_path, patched=REFUSED)
    events = read_events(stream)
    require_mechanism(events, "cgroup_v2")
    assert ran.returncode == 0 and one(events, "cleanup_started")["read_error"] is True, ran.stderr
    page = run_cli("report", stream, "-o", tmp_path / "page.html", cwd=tmp_path)
    html = (tmp_path / "page.html").read_text()
    assert page.returncode == 0 and "how many processes outlived it is not known" in html, page.stderr
    assert "How many members outlived the root is not known" in html
    shown = run_cli("events", "--file", stream, cwd=tmp_path)
    assert b"teardown began with its members not counted (the member read failed)" in shown.stdout, shown


# A threaded group below, a thread of the child's moved into it: its ``cgroup.procs`` refuses to
# be read (EOPNOTSUPP), its processes being listed by its thread root (the nearest domain above).
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
    events, err = _ran(tmp_path, THREADED)
    started = one(events, "cleanup_started")
    assert started["read_error"] is False and started["members_before"] == 1, (started, err)
    assert b"could not count" not in err, err
