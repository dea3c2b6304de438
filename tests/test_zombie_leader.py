"""A run's root that ended its main thread alone (``pthread_exit`` from main, a worker thread
alive) reads as a zombie in ``/proc/<pid>/stat`` while it runs on: it is a live member, so the
soft stop counts it and gives it its grace, under either mechanism (it was counted as none,
``members_before: 0``, and killed at once)."""

from __future__ import annotations

import os
import signal
import time

from conftest import read_events, start_cli
from streams import PY, one, require_mechanism

# The root: SIGTERM blocked, a worker thread that waits for it (sigwait), says so (argv[1] +
# ".term") and finishes once argv[1] + ".go" appears; the main thread ends alone once its pid
# is written to argv[1].
WORKER_LIVES_ON = r"""
import ctypes, os, signal, sys, threading, time
where = sys.argv[1]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

def worker():
    signal.sigwait({signal.SIGTERM})
    open(where + ".term", "w").close()
    while not os.path.exists(where + ".go"):
        time.sleep(0.01)
    os._exit(0)

threading.Thread(target=worker).start()
with open(where + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace(where + ".tmp", where)
ctypes.CDLL(None).pthread_exit(None)
"""


def _main_thread_ended(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def test_a_root_whose_main_thread_ended_alone_gets_its_grace(tmp_path, containment):
    events, where = tmp_path / "events.jsonl", str(tmp_path / "root")
    proc = start_cli("run", "--grace", "120s", "--jsonl", events, "--", PY, "-c", WORKER_LIVES_ON, where)
    deadline = time.monotonic() + 60
    while not os.path.exists(where) or not _main_thread_ended(int(open(where).read())):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    while not os.path.exists(where + ".term") and proc.poll() is None:  # its grace, or its kill
        assert time.monotonic() < deadline + 60, "the runner neither signalled nor killed the root"
        time.sleep(0.01)
    open(where + ".go", "w").close()
    _, err = proc.communicate(timeout=120)
    found = read_events(events)
    require_mechanism(found, containment)
    assert proc.returncode == one(found, "runner_exit")["code"], err
    assert one(found, "cleanup_started")["members_before"] == 1, one(found, "cleanup_started")
    finished = one(found, "cleanup_finished")
    assert os.path.exists(where + ".term"), f"the root was killed without its grace: {finished}"
    assert finished["shutdown"]["drained_within_grace"] and finished["remaining_pids"] == [], finished
