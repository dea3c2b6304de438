"""A native spawn's pending child is never lost to an exception raised by a signal handler (an
embedding's: the CLI's handlers only note the signal). Such a handler runs as the C wait for
the exec returns, and the handle was once taken out of the ``Pending`` for the call and put back
only after it: the exception skipped that, so ``kill`` did nothing and ``wait`` returned the
clone's half of the result as a started child, still held in its exec.

The child is held in its execve by a write lease on its program (tests/test_spawn_no_wait.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from processkit.containment.base import ChildJoins
from test_spawn_no_wait import HeldExec

pytest.importorskip("processkit._native")
spawn_native = pytest.importorskip("processkit.engine.spawn_native")


class Interrupted(Exception):
    pass


def _raise(signum, frame):
    raise Interrupted


def _in_poll(tid: int) -> bool:
    """Whether thread ``tid`` of this process is in poll (x86-64's poll or ppoll)."""
    with open(f"/proc/self/task/{tid}/syscall") as status:
        return status.read().split()[0] in ("7", "271")


def test_a_raising_handler_during_the_wait_leaves_the_child_to_kill_and_wait_for(tmp_path):
    if os.uname().machine != "x86_64":
        pytest.skip("names x86-64's system call numbers")
    program = tmp_path / "held"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    held = HeldExec(program)
    previous = signal.signal(signal.SIGUSR1, _raise)
    main, native_id = threading.get_ident(), threading.get_native_id()
    try:

        def interrupt() -> None:  # once the child is in its exec and this thread waits in C for it
            held.wait_for_the_exec()
            for _ in range(3000):
                if _in_poll(native_id):
                    break
                time.sleep(0.01)
            signal.pthread_kill(main, signal.SIGUSR1)

        thread = threading.Thread(target=interrupt, daemon=True)
        thread.start()
        with pytest.raises(Interrupted):
            pending = spawn_native.Pending(
                [str(program)], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(), [-1] * 3, False, 0, False, passed=()
            )
            assert pending.begun
            while not pending.until_signal():
                pass
        thread.join()
        pending.kill()  # still the pending child's: it dies in its exec
        result = pending.wait()
        held.release()  # a child still held (not killed) would exec now, and exit 0
        if result.pidfd >= 0:
            os.close(result.pidfd)
        _, status = os.waitpid(result.pid, 0)
    finally:
        held.release()
        signal.signal(signal.SIGUSR1, previous)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
