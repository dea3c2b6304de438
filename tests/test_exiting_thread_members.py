"""A grandchild whose leader thread ended alone (``pthread_exit``) while a thread of it ran on,
the run's pipes held meanwhile by a sibling that lets them go as that last thread begins its
exit, a large memory to free: the runner read the members as the thread was freeing it. Its
group's ``cgroup.procs`` leaves such a process out once its last thread's exit has begun, while
that thread keeps the group populated until the exit is done, so the lists read empty three
times and the read was taken as failed: `resource_summary` and `cleanup_started` said
`read_error: true` (every figure null, the members not counted) of a tree that was only
finishing its exit, on most runs, under either pump. A subtree whose every listed thread has
begun its exit now holds their processes, members until their exit is done, which the
teardown waits out; nor is such a process (or one whose last thread exits) said to be left
running by the child."""

from __future__ import annotations

from conftest import read_events, run_cli
from streams import PY, one, require_mechanism

# The sibling polls the thread's stat for PF_EXITING (0x4, its flags the 9th field), then exits.
TREE = r"""
import ctypes, mmap, os, threading, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    def work():
        m = mmap.mmap(-1, 1 << 29)
        for at in range(0, 1 << 29, 4096):
            m[at] = 1
        os.write(w, b"%d\n" % threading.get_native_id())
        time.sleep(0.2)
        os._exit(0)
    threading.Thread(target=work).start()
    ctypes.CDLL(None).pthread_exit(None)
os.close(w)
if os.fork() == 0:
    tid = int(os.read(r, 64))
    while True:
        try:
            with open(f"/proc/{tid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[7]) & 0x4:
                    break
        except (OSError, ValueError):
            break
    os._exit(0)
"""


def test_a_tree_finishing_its_exit_is_no_read_error_nor_left_running(tmp_path, pump_backend):
    for attempt in range(3):  # the window is the last thread's exit: most runs fell in it before
        stream = tmp_path / f"run-{attempt}.jsonl"
        ran = run_cli("run", "--jsonl", stream, "--", PY, "-c", TREE, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        events = read_events(stream)
        require_mechanism(events, "cgroup_v2")
        assert one(events, "resource_summary")["read_error"] is False, (attempt, events)
        started = one(events, "cleanup_started")
        assert started["read_error"] is False, (attempt, started)
        finished = one(events, "cleanup_finished")
        assert finished["read_error"] is False and finished["remaining"] == 0, (attempt, finished)
        assert b"still running" not in ran.stderr, ran.stderr  # it was on its way out, not left running
