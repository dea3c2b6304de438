"""A flood of signals holds no turn of the runner's loop (mend59f): ``SignalWatch.dispatch_caught``
dispatched again for as long as a signal came while its handlers ran, so a handler that is
always followed by another signal (a flood) never let the turn end. It now makes at most
``DISPATCH_PASSES`` passes; what comes after them wakes the loop as any signal does. Run in a
process of its own, bounded: the unbounded dispatch never returned."""

from __future__ import annotations

import subprocess
import sys

FLOOD = r"""
import signal
from processkit.engine.signals import DISPATCH_PASSES, SignalWatch

class Loop:
    def add_reader(self, fd, callback):
        pass

passes = []
def handler(signum):
    passes.append(signum)
    signal.raise_signal(signal.SIGUSR2)  # another comes while the handlers run, for ever
watch = SignalWatch(Loop(), {signal.SIGUSR2: handler})
signal.raise_signal(signal.SIGUSR2)
watch.dispatch_caught()
print(len(passes), DISPATCH_PASSES)
"""


def test_a_flood_of_signals_holds_no_turn():
    try:
        done = subprocess.run([sys.executable, "-c", FLOOD], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("dispatch_caught never returned while signals kept coming") from None
    passes, most = done.stdout.split()
    assert done.returncode == 0 and passes == most, done.stderr[-2000:]
