"""A call interrupted while its request is being written (Ctrl-C during a large ``input=``: a
signal handler's exception raised out of ``sendall``) left part of a frame on the service's
socket: the service read every later frame from the wrong byte, and every later call of the
process, of every thread, hung. The frame is now written whole, the run stopped and its reply
awaited as on an interruption while the reply is awaited, then the interruption raised."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

# The service is stopped so the socket fills and the call's send blocks part-way through its
# frame; the main thread is then signalled there (its handler raises), and the service continued
# once the handler ran. Then a call from another thread, bounded so a hang is reported.
CALLER = r"""
import json, os, select, signal, threading, processkit
from processkit.api import service

class Interrupted(Exception):
    pass

fired = threading.Event()
def handler(number, frame):
    fired.set()
    raise Interrupted()
signal.signal(signal.SIGUSR1, handler)
processkit.run(["true"])
connection = service.connection()
main = threading.get_ident()

def interrupt():
    while select.select([], [connection.sock], [], 0)[1]:  # until the send blocks: the socket is full
        select.select([], [], [], 0.01)
    signal.pthread_kill(main, signal.SIGUSR1)
    fired.wait()
    os.kill(connection.process.pid, signal.SIGCONT)

os.kill(connection.process.pid, signal.SIGSTOP)
helper = threading.Thread(target=interrupt)
helper.start()
seen = {}
try:
    processkit.run(["sh", "-c", "echo started >&2; exec sleep 3737.5"], input=b"x" * (32 << 20))
    seen["interrupted"] = False
except Interrupted:
    seen["interrupted"] = True
helper.join()
after = {}
def later():
    result = processkit.run(["sh", "-c", "echo after"], capture_output=True)
    after["result"] = [result.returncode, result.stdout.decode()]
thread = threading.Thread(target=later, daemon=True)
thread.start()
thread.join(60)
seen["after"] = after.get("result", "hung")
seen["same_service"] = service.connection() is connection
print(json.dumps(seen), flush=True)
os._exit(0)
"""


def test_a_call_interrupted_while_its_request_is_written_leaves_the_service_serving():
    done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["interrupted"] is True, "the interruption reached the caller"
    assert seen["after"] == [0, "after\n"], "the next call ran (it hung on a frame read from the wrong byte)"
    assert seen["same_service"], "the service went on"
    leftover = subprocess.run(["pgrep", "-f", "sleep 3737.5"], capture_output=True, text=True).stdout
    assert leftover == "", "the interrupted call's run was stopped"
