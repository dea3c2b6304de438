"""A call that found no service to use and waited for the start lock took the service another
thread had started meanwhile without asking whether its socket was still its own: a caller that
had closed that socket's number, reused since for something else, had the request frame (its
whole environment, on a first request) written to whatever held the number, and the call raised
``ServiceGone``. The check under the lock now asks what the check before it asks
(``Connection.usable``): such a service is passed over and the call starts one of its own."""

from __future__ import annotations

import subprocess
import sys

TIMEOUT = 120

# The call stops once, at the start lock's ``with`` (a trace, as test_api_service_hello does):
# there "another thread" starts a service, and the caller's number for its socket is made an end
# of an unrelated socket pair. Nothing races: the stop is the call's own thread.
CALLER = r"""
import inspect, os, socket, sys
import processkit
from processkit.api import service, shared

code = shared.connection.__code__
line = next(n for n, text in enumerate(inspect.getsourcelines(shared.connection)[0], code.co_firstlineno) if "_starting:" in text)
unrelated, peer = socket.socketpair()
peer.setblocking(False)
meanwhile = []

def at_the_lock(frame, event, arg):
    if event == "line" and frame.f_lineno == line and not meanwhile:
        sys.settrace(None)
        other = shared._connection = service.Connection()
        os.dup2(unrelated.fileno(), other.sock.fileno())
        meanwhile.append(other)
    return at_the_lock

sys.settrace(lambda frame, event, arg: at_the_lock if frame.f_code is code else None)
try:
    print("returned", processkit.run(["true"]).returncode)
except service.ServiceGone as exc:
    print("raised", exc)
sys.settrace(None)
try:
    print(len(peer.recv(1 << 16)), "bytes reached the unrelated socket")
except BlockingIOError:
    print(0, "bytes reached the unrelated socket")
print("stopped", len(meanwhile), "passed over", shared._connection is not meanwhile[0])
"""


def test_a_service_whose_number_was_reused_while_the_call_waited_is_passed_over():
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, timeout=TIMEOUT, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "returned 0",
        "0 bytes reached the unrelated socket",
        "stopped 1 passed over True",
    ], done.stdout
