"""``stops_raise`` swaps the three stop signals' handlers on the way in and back on the way out.
It swapped them one at a time: a stop signal that came between two swaps back found its own
still raising ``Stopped``, raised from the ``with``'s end, and the swaps after it were never
made (SIGHUP left raising ``Stopped`` for good, outside any wait). The swaps are made with the
stop signals blocked: one that comes meanwhile reaches the handler it finds once all are back.

A process of its own, with real signals: the test's SIGTERM is sent right after the first swap
back (SIGINT's), as a signal sent at that instant would come."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

BETWEEN_SWAPS = r"""
import json, os, signal
from processkit import signum
from processkit.engine import stop_raise

seen = []
def kept(number, frame):
    seen.append(number)
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, kept)
real = signum.signal
restores = []
def swap(number, handler):
    found = real(number, handler)
    if handler is kept:  # a swap back: a SIGTERM right after the first
        restores.append(number)
        if len(restores) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
    return found
signum.signal = swap  # the module stop_raise swaps through
raised = None
try:
    with stop_raise.stops_raise():
        pass
except stop_raise.Stopped as stop:
    raised = stop.source
for _ in range(3):  # a pending signal's handler runs at the next bytecodes
    pass
print(json.dumps({
    "raised": raised,
    "back": [signal.getsignal(number) is kept for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)],
    "seen": seen,
}))
"""


def test_a_stop_signal_between_two_swaps_back_leaves_every_handler_back():
    done = subprocess.run([sys.executable, "-c", BETWEEN_SWAPS], capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said == {"raised": None, "back": [True, True, True], "seen": [15]}, said
