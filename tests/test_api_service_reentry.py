"""A caller that re-enters the API on the thread already in a call (a signal handler), or that
closed every descriptor between calls: each call still completes, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SAFETY_NET

HANDLER = """
import os, signal, processkit
processkit.run(["true"])
got = []
# the child signals the caller while the caller waits in run(), then waits for the handler's run
# to have ended (its mark file) before it ends itself: the handler runs inside the outer call
mark = os.path.join(os.environ["SCRATCH"], "handled")
script = f"kill -USR1 {os.getpid()}; n=0; while [ ! -e {mark} ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done; echo outer"
def handler(*_):
    got.append(processkit.run(["sh", "-c", f"echo handler; touch {mark}"], capture_output=True).stdout)
signal.signal(signal.SIGUSR1, handler)
outer = processkit.run(["sh", "-c", script], capture_output=True)
after = processkit.run(["echo", "after"], capture_output=True)
print(outer.stdout, got, after.stdout)
"""

CLOSED = """
import os, socket, processkit
processkit.run(["true"])
os.closerange(3, 65536)  # the service's socket too: its number is free for the caller's next open
spare = socket.socketpair()  # holds the freed numbers, so the old number now names this socket
first = processkit.run(["echo", "first"], capture_output=True)
second = processkit.run(["echo", "second"], capture_output=True)
spare[1].setblocking(False)
try:
    stray = spare[1].recv(1 << 16)
except BlockingIOError:
    stray = b""
print(first.stdout, second.stdout, len(stray))
"""

# The caller closed every descriptor and a socketpair took the service socket's number: a forked
# child must not close it (its own socket), a waiting handle must not read it (the peer's bytes).
FORKED = """
import os, socket, processkit
processkit.run(["true"])
os.closerange(3, 65536)
mine, peer = socket.socketpair()
pid = os.fork()
if pid == 0:
    os._exit(0 if os.path.exists(f"/proc/self/fd/{mine.fileno()}") else 1)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""

WAITING = """
import os, socket, processkit
handle = processkit.start(["sleep", "600"])
os.closerange(3, 65536)
mine, peer = socket.socketpair()
peer.sendall(b"123456789")
try:
    handle.wait()
except Exception as exc:
    print(type(exc).__name__, exc)
print(mine.recv(100))
"""

# A batch from a signal handler inside a call: sent as every call is, on a spare service (the
# shared connection's locks may be the interrupted call's), so a second service is started.
BATCH = """
import os, signal, processkit
from processkit.api import service
started, command = [], service.service_command
service.service_command = lambda *given: started.append(1) or command(*given)
processkit.run(["true"])
mark = os.path.join(os.environ["SCRATCH"], "handled")
script = f"kill -USR1 {os.getpid()}; n=0; while [ ! -e {mark} ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done"
got = []
def handler(*_):
    out = os.path.join(os.environ["SCRATCH"], "out")
    got.extend(line["exit_code"] for line in processkit.batch([{"args": ["touch", mark]}], out=out))
signal.signal(signal.SIGUSR1, handler)
processkit.run(["sh", "-c", script])
print(got, len(started))
"""

# A thread's spare (made here as a re-entered call makes one) is collected when the thread ends,
# not left a zombie until a later Popen: the test waits for its state to leave "Z" (or its entry).
ENDED = """
import os, threading, time, processkit
from processkit.api import reentry, service
made = []
def call():
    with reentry.busy:
        processkit.run(["true"])
        made.append(reentry.spare(service.Connection).process.pid)
worker = threading.Thread(target=call)
worker.start()
worker.join()
def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
deadline = time.monotonic() + 60
while state(made[0]) != "gone" and time.monotonic() < deadline:
    time.sleep(0.05)
print(state(made[0]))
"""

# A run started on a spare (inside a call, as a signal handler's) that is replaced while the run
# goes on (a PROCESSKIT_ variable changed): the spare's socket stays open for the handle holding it.
HELD = """
import os, processkit
from processkit.api import reentry
mark = os.path.join(os.environ["SCRATCH"], "go")
with reentry.busy:
    held = processkit.start(["sh", "-c", f"n=0; while [ ! -e {mark} ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done"])
    os.environ["PROCESSKIT_TEST_REPLACES_THE_SPARE"] = "1"
    processkit.run(["true"])  # on a new spare: the old one is replaced
    open(mark, "w").close()
    result = held.result()
print("held run:", result.returncode, result.source)
"""


# A handler calling ``run`` while its thread, in no call, looks at the shared connection's mailbox
# (``usable`` -> ``intact``, which takes the mailbox's lock while another thread's read is marked
# under way): the handler's run goes to a spare, never refused as a wait on the held mailbox.
MAILBOX = """
import signal, threading, processkit
from processkit.api import shared

processkit.run(["true"])
conn = shared.connection()
real = conn._mail
armed = [False]

class Tripped:
    def __enter__(self):
        real.acquire()
        if armed[0]:
            armed[0] = False
            signal.raise_signal(signal.SIGUSR1)  # the handler runs with the mailbox held
        return self

    def __exit__(self, *exc):
        real.release()

    def _is_owned(self):
        return real._is_owned()

said = []
signal.signal(signal.SIGUSR1, lambda *_: said.append(processkit.run(["echo", "handler"], capture_output=True).stdout))
conn._mail, conn._frames.broken, conn._reading = Tripped(), True, threading.get_ident() + 1
armed[0] = True
usable = conn.usable()
conn._mail, conn._frames.broken, conn._reading = real, False, 0
print(usable, said, processkit.run(["echo", "after"], capture_output=True).stdout)
"""


def _said(code: str, tmp_path, *, quiet: bool = False) -> str:
    """What ``code`` printed, run in a process of its own that must end 0 (``quiet``: saying nothing on stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=2 * SAFETY_NET,
        env={**os.environ, "SCRATCH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert not quiet or done.stderr == "", done.stderr
    return done.stdout.strip()


def test_a_signal_handler_that_calls_run_inside_a_run_completes_both(tmp_path):
    assert _said(HANDLER, tmp_path) == "b'outer\\n' [b'handler\\n'] b'after\\n'"


def test_a_caller_that_closed_every_descriptor_gets_a_new_service_and_its_reused_number_untouched(tmp_path):
    assert _said(CLOSED, tmp_path) == "b'first\\n' b'second\\n' 0"


def test_a_forked_child_leaves_a_reused_service_number_open(tmp_path):
    assert _said(FORKED, tmp_path) == "child 0"


def test_a_handle_waiting_after_its_number_was_reused_neither_reads_nor_closes_it(tmp_path):
    assert _said(WAITING, tmp_path).splitlines() == [
        "ServiceGone the runner service of this process has ended",
        "b'123456789'",
    ]


def test_a_batch_from_a_signal_handler_inside_a_run_goes_to_a_spare_service(tmp_path):
    assert _said(BATCH, tmp_path) == "[0] 2"


def test_a_spare_service_of_an_ended_thread_is_collected(tmp_path):
    assert _said(ENDED, tmp_path) == "gone"


def test_a_replaced_spare_is_left_open_for_a_handle_that_holds_a_run_on_it(tmp_path):
    assert _said(HELD, tmp_path) == "held run: 0 child_exit"


def test_a_caller_that_re_entered_a_call_exits_without_noise(tmp_path):
    """The spares and connections let go at the interpreter's exit, when the module globals the
    closing calls are None: ``Exception ignored in ... __del__`` was printed at every such exit."""
    assert _said(HANDLER, tmp_path, quiet=True) == "b'outer\\n' [b'handler\\n'] b'after\\n'"


def test_a_handler_calling_run_while_its_thread_looks_at_the_mailbox_goes_to_a_spare(tmp_path):
    assert _said(MAILBOX, tmp_path) == "True [b'handler\\n'] b'after\\n'"


def test_a_suspended_look_leaves_a_kept_reply_filed_and_finds_none_once_forgotten():
    """A wait on the thread marked as reading the socket (a signal handler's, interrupting it) left
    a kept reply filed for the handle's other waiters, and found None once the request was let go:
    it popped the reply, and raised KeyError for the request gone."""
    import threading

    import processkit

    handle = processkit.start(["true"])
    connection, rid = handle._connection, handle._rid
    reply = connection.take(rid, SAFETY_NET, keep=True)
    connection._reading = threading.get_ident()  # as under a handler that interrupted this thread's read
    try:
        looks = [connection.take(rid, 0, keep=True) for _ in range(2)]
        connection.forget(rid)
        gone = connection.take(rid, 0, keep=True)
    finally:
        connection._reading = 0
    assert reply is not None
    assert looks == [reply, reply]
    assert gone is None
