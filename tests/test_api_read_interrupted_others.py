"""A signal handler that raises in the main thread (Ctrl-C's KeyboardInterrupt, a SIGTERM handler
that raises) as that thread's read of the shared socket returned dropped the bytes it read: the
connection was given up and its service ended every run it carried, another thread's ``start()``ed
run (its child killed, its handle's ``wait`` raising ``ServiceGone``) with the interrupted call.
While other calls are open, the main thread's read is now a thread's of its own (``api.relay``):
the interruption ends the main thread's call alone."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

# The signal is sent to the main thread as a read of the large reply returns, in whichever thread
# made it: before, that was the main thread itself.
CALLER = r"""
import json, signal, socket, subprocess, threading, processkit

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
handles = []
other = threading.Thread(target=lambda: handles.append(processkit.start(
    ["sh", "-c", "echo up; read line; echo got $line"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)))
other.start()
other.join()
handle = handles[0]
seen = {"up": handle.stdout.readline().decode()}
armed = [True]
plain = socket.socket.recvmsg

def recvmsg(self, *args):
    got = plain(self, *args)
    if armed[0] and len(got[0]) >= 1 << 16:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as soon as the main thread runs
    return got

socket.socket.recvmsg = recvmsg
try:
    processkit.run(["head", "-c", "900000", "/dev/zero"], capture_output=True)
    seen["main"] = "completed"
except Interrupted:
    seen["main"] = "interrupted"
try:
    handle.stdin.write(b"on\n")
    handle.stdin.close()
    seen["other"] = [handle.stdout.read().decode(), handle.wait()]
except Exception as exc:
    seen["other"] = repr(exc)
seen["next"] = processkit.run(["sh", "-c", "echo next"], capture_output=True).stdout.decode()
print(json.dumps(seen), flush=True)
"""


def test_the_main_threads_interrupted_read_ends_no_run_of_another_thread():
    try:
        done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("a call hung after the interruption") from None
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["up"] == "up\n"
    assert seen["main"] == "interrupted", "the interruption reached the main thread's call"
    assert seen["other"] == ["got on\n", 0], "the other thread's run went on to its end"
    assert seen["next"] == "next\n"
