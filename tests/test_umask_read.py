"""Reading the caller's umask leaves it as it was (mend59a). ``api.caller_env.umask_now`` read it
by setting a placeholder and putting the old one back, two Python calls: a second thread's read
between them (``processkit.batch`` and ``bench`` read it outside the connection's lock), or a
signal handler raising between them, left the whole process at umask 077 for good. Each way of
reading (the C call, and ``/proc/self/status`` without the C module) under both, in a process of
its own (the umask is the whole process's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from processkit import native

SCRIPT = r"""
import json, os, signal, sys, threading
from processkit.api import caller_env

read = caller_env.umask_now if sys.argv[1] == "native" else caller_env._status_umask
calls = int(sys.argv[2])
os.umask(0o027)
found = {"read": oct(read())}

# Two threads reading at once, released together.
gate = threading.Barrier(2)
def reader():
    gate.wait()
    for _ in range(calls):
        read()
threads = [threading.Thread(target=reader) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
found["threads"] = oct(os.umask(0o027))

# A handler that raises, run by the signals another thread sends while this one reads; armed only
# inside the try (it disarms itself), so it raises nowhere else.
class Raised(Exception):
    pass
armed, raised, count = [False], 0, 0
def handler(signum, frame):
    if armed[0]:
        armed[0] = False
        raise Raised
signal.signal(signal.SIGUSR1, handler)
main, done = threading.get_ident(), threading.Event()
def sender():
    while not done.is_set():
        signal.pthread_kill(main, signal.SIGUSR1)
        os.sched_yield()
threading.Thread(target=sender, daemon=True).start()
while count < calls:
    try:
        armed[0] = True
        while count < calls:
            count += 1
            read()
        armed[0] = False
    except Raised:
        raised += 1
done.set()
found["signals"] = oct(os.umask(0o027))
found["raised"] = raised > 0
print(json.dumps(found))
"""


@pytest.mark.parametrize(
    "way,calls",
    [
        pytest.param(
            "native",
            50_000,
            marks=pytest.mark.skipif(native.module() is None, reason="the C module was not built"),
        ),
        ("status", 3_000),
    ],
)
def test_reading_the_umask_never_leaves_it_changed(way, calls):
    for _ in range(4):  # the unsplit read never fails; the split one did in most trials
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, way, str(calls)], capture_output=True, text=True, timeout=300, check=True
        )
        found = json.loads(done.stdout.splitlines()[-1])
        assert found == {"read": "0o27", "threads": "0o27", "signals": "0o27", "raised": True}


FORKS = r"""
import json, os, signal, sys, threading
from processkit.api import caller_env

os.umask(0o027)
caller_env.umask_now()  # its module loaded here: a fork during that import would hold the import lock
stop = threading.Event()
def reader():
    while not stop.is_set():
        caller_env.umask_now()
threading.Thread(target=reader, daemon=True).start()
statuses = set()
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:  # the umask the child began with, then its own first read (the mutex held: never)
        signal.alarm(60)  # a child that hangs is ended, not left behind: its status says so
        os._exit(0 if os.umask(0o027) == 0o027 and caller_env.umask_now() == 0o027 else 1)
    statuses.add(os.waitpid(pid, 0)[1])
stop.set()
print(json.dumps(sorted(statuses)))
"""


@pytest.mark.skipif(native.module() is None, reason="the C module was not built")
def test_a_fork_while_another_thread_reads_the_umask_leaves_the_child_as_its_parent():
    """A fork by one thread while another was inside the C read (umask 077, its mutex held) gave
    the child umask 077 and the mutex held, so the child's first read waited for ever: the read
    now holds forks off (``pthread_atfork``). A child that hangs is ended by its alarm (SIGALRM
    in its status)."""
    done = subprocess.run([sys.executable, "-c", FORKS, "400"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[-1]) == [0], done.stderr[-2000:]


def test_a_status_file_with_no_umask_line_still_gives_the_umask(monkeypatch):
    """A kernel before 4.7 shows no ``Umask:`` in ``/proc/self/status``: without the C module
    every API call read it there and raised ValueError; the umask is read the one other way."""
    import os

    from processkit.api import caller_env

    monkeypatch.setattr(caller_env.os, "read", lambda fd, size: b"Name:\tpython3\nState:\tR (running)\n")
    mask = os.umask(0o027)
    try:
        assert caller_env._status_umask() == 0o027
        assert os.umask(0o027) == 0o027  # left as it was
    finally:
        os.umask(mask)
