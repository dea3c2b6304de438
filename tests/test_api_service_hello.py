"""A runner service that never says hello (its start blocked: an import on a hung file system, a
tracer's stop its caller leaves alone) held its caller's ``processkit.run`` for ever: the hello
was waited for with no timeout. The caller now waits ``service.HELLO_SECONDS``, then kills the
service, waits a bounded while to collect it (one in uninterruptible sleep outlives its kill) and
raises ``ServiceUnstartable``, whose message says what happened. Threads queued behind that start
raise its failure with it instead of each starting, and waiting out, one of their own."""

from __future__ import annotations

import subprocess
import sys

TIMEOUT = 120  # the caller's own bound, far past what a right call takes (one HELLO_SECONDS and a collect)

# The caller, its service's command replaced by one that keeps the socket open and never speaks
# (it ends when its caller's end closes: no orphan where the caller was killed by the timeout).
SILENT = r"""
import os, sys, time
import processkit
from processkit.api import service, shared

service.HELLO_SECONDS = 1.0
service.service_command = lambda fd, caller: [sys.executable, "-c", "import os, sys; os.read(int(sys.argv[1]), 1)", str(fd), str(caller)]
"""

# One call, timed: what it raised, how long it took, and the service's pid in ``pid``.
CALL = r"""
started = time.monotonic()
try:
    processkit.run(["true"])
    print("ran")
except service.ServiceUnstartable as exc:
    print("raised", exc)
    said = str(exc)
print(time.monotonic() - started)
pid = int(said.split("(pid ")[1].split(")")[0])
"""
STATE = r"""
try:
    with open(f"/proc/{pid}/stat") as stat:
        print("service zombie" if stat.read().rsplit(")", 1)[1].split()[0] == "Z" else "service alive")
except FileNotFoundError:
    print("service gone")  # killed and collected
"""


def _called(script: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=TIMEOUT, text=True)
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0].startswith("raised the runner service (pid ") and "did not say hello within 1 s" in said[0], said
    return said


def test_a_service_that_never_says_hello_is_killed_and_the_call_raises():
    said = _called(SILENT + CALL + STATE)
    assert 1.0 <= float(said[1]) < TIMEOUT / 4, said  # it waited its hello time, and not much more
    assert said[2] in ("service gone", "service zombie"), said  # killed (a zombie: not yet ended when collected)


# The service lives on past its kill, as one in uninterruptible sleep does (the kill a no-op here):
# the call still returns. The service ends with its caller (PR_SET_PDEATHSIG), or is ended at the end.
UNKILLABLE = r"""
import signal, subprocess
SERVICE = "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, 9); os.getppid() == int(sys.argv[1]) or sys.exit(); signal.pause()"
service.service_command = lambda fd, caller: [sys.executable, "-c", SERVICE, str(caller)]
subprocess.Popen.kill = lambda self: None
"""
ENDED = r"""
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)  # still this process's child: the call left it uncollected, not waited on for ever
"""


def test_a_service_that_outlives_its_kill_does_not_hold_the_call():
    said = _called(SILENT + UNKILLABLE + CALL + ENDED)
    assert float(said[1]) < TIMEOUT / 4, said


# Four threads call at once; the first start is held until the three others wait on the start
# lock (their frames at its ``with``), so all three are queued behind it when it fails.
QUEUED = r"""
import inspect, threading
THREADS = 4
line = next(n for n, text in enumerate(inspect.getsourcelines(shared.connection)[0], shared.connection.__code__.co_firstlineno) if "_starting:" in text)
starts = []
silent = service.service_command

def queued(ident):
    frame = sys._current_frames().get(ident)  # None for a thread not started yet
    return frame is not None and frame.f_code is shared.connection.__code__ and frame.f_lineno == line

def held(fd, caller):
    starts.append(threading.get_ident())
    if len(starts) == 1:
        while not all(queued(t.ident) for t in workers if t.ident != threading.get_ident()):
            time.sleep(0.01)
    return silent(fd, caller)

service.service_command = held
failures = []

def call():
    try:
        processkit.run(["true"])
    except service.ServiceUnstartable as exc:
        failures.append(str(exc))

workers = [threading.Thread(target=call) for _ in range(THREADS)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(len(starts), len(failures), len(set(failures)))
"""


def test_threads_queued_behind_a_failed_start_fail_with_it():
    done = subprocess.run([sys.executable, "-c", SILENT + QUEUED], capture_output=True, timeout=TIMEOUT, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "4", "1"], done.stdout  # one start, four failures, one message


# The caller interrupted (Ctrl-C) as it awaits the hello of a service that never says it: the
# service was left to end at its socket's close, a zombie until a later ``Popen`` collected it.
INTERRUPTED = r"""
import os, signal, sys, tempfile, threading
import processkit
from processkit.api import service

mark = os.path.join(tempfile.mkdtemp(), "started")
service.service_command = lambda fd, caller: [sys.executable, "-c",
    "import os, sys; open(sys.argv[3], 'w').write(str(os.getpid())); os.read(int(sys.argv[1]), 1)",
    str(fd), str(caller), mark]
main = threading.get_ident()

def interrupt():
    while not (os.path.exists(mark) and os.path.getsize(mark)):  # the service has started
        os.sched_yield()
    signal.pthread_kill(main, signal.SIGINT)

threading.Thread(target=interrupt).start()
try:
    processkit.run(["true"])
    print("ran")
except KeyboardInterrupt:
    print("interrupted")
with open(mark) as written:
    pid = int(written.read())
"""


def test_a_service_whose_start_was_interrupted_is_collected_not_left_a_zombie():
    done = subprocess.run([sys.executable, "-c", INTERRUPTED + STATE], capture_output=True, timeout=TIMEOUT, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["interrupted", "service gone"]
