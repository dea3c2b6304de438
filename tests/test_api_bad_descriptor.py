"""A call that hands the runner service a descriptor that is not open (``stdout=987``) fails
alone, with subprocess's ``OSError`` (EBADF): the kernel refuses that frame whole, and the live
service, carrying other threads' runs, is not taken for gone. Before, the failed send marked the
connection gone, so the replies of the runs in flight were lost to ``ServiceGone`` though their
runs ended well.

The runs in flight are gated by files, not timed: both are started, the bad call is made, then
each is let go in turn, so the second's thread is still waiting for its reply once the first's
has come.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import errno, os, sys, threading, time, processkit
here = sys.argv[1]
results = {}
def in_flight(name):
    gate = os.path.join(here, name)
    command = ["sh", "-c", 'touch "$1.started"; until [ -e "$1" ]; do sleep 0.01; done', "sh", gate]
    try:
        results[name] = processkit.run(command).returncode
    except BaseException as exc:
        results[name] = type(exc).__name__
def reach(path):
    while not os.path.exists(path):
        time.sleep(0.01)
threads = {name: threading.Thread(target=in_flight, args=(name,)) for name in ("one", "two")}
for name, thread in threads.items():
    thread.start()
    reach(os.path.join(here, name + ".started"))
closed = max(os.listdir("/proc/self/fd"), key=int)  # above every open one: none reuses it meanwhile
closed = int(closed) + 100
try:
    processkit.run(["true"], stdout=closed)
    print("bad call: no error")
except OSError as exc:
    print("bad call:", exc.errno == errno.EBADF and "EBADF" or exc)
except BaseException as exc:
    print("bad call:", type(exc).__name__)
for name, thread in threads.items():
    open(os.path.join(here, name), "w").close()
    thread.join(60)
print("in flight:", results["one"], results["two"])
print("after:", processkit.run(["true"]).returncode)
from processkit.api.shared import connection
waiting = len(connection()._boxes)
for _ in range(20):  # each bad call's reply box goes with it: none left waiting for a reply
    try:
        processkit.run(["true"], stdout=closed)
    except OSError:
        pass
print("boxes kept:", len(connection()._boxes) - waiting)
"""


def test_a_closed_descriptor_fails_its_call_alone(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["bad call: EBADF", "in flight: 0 0", "after: 0", "boxes kept: 0"], done.stdout
