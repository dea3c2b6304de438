"""The native spawn does not hold its host while a child execs (issue 49, csrc/spawn.c): the API's
runner service carries another call's run to its end while one child is between its clone and
its exec, and that exec's outcome, success or failure, is still reported exactly once it comes.

A child is held inside its execve deterministically by a write lease on the program file: the
exec's open of the file breaks the lease, and waits until this process (the lease holder, told
by SIGIO, which it ignores) lets it go. The test sees the break begin (``F_GETLEASE`` no longer
says ``F_WRLCK``), so it knows the child is in its exec before it asks for the other run.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import threading

import pytest

import processkit

pytest.importorskip("processkit._native")
pytestmark = pytest.mark.skipif(
    os.environ.get("PROCESSKIT_SPAWN") == "python", reason="Popen's spawn waits for the exec by design"
)

F_SETLEASE, F_GETLEASE = 1024, 1025  # fcntl(2): Linux's, which the fcntl module names only from 3.12 on


class HeldExec:
    """``path`` under a write lease: a process that execs it waits in its execve until ``release``."""

    def __init__(self, path):
        self._previous = signal.signal(signal.SIGIO, signal.SIG_IGN)  # the break's notice to the holder
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        fcntl.fcntl(self.fd, F_SETLEASE, fcntl.F_WRLCK)

    def wait_for_the_exec(self, seconds: float = 30) -> None:
        """Until an exec's open has begun breaking the lease."""
        event = threading.Event()
        for _ in range(int(seconds * 100)):
            if fcntl.fcntl(self.fd, F_GETLEASE) != fcntl.F_WRLCK:
                return
            event.wait(0.01)
        raise AssertionError("no exec of the leased program began")

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the lease goes with the file: the exec goes on
            self.fd = None
            signal.signal(signal.SIGIO, self._previous)


def _in_thread(call) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = call()
        except Exception as exc:  # noqa: BLE001 - handed to the test, which checks it
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def _held_run_and_another(program, tmp_path):
    """Run ``program`` held in its exec, and ``true`` meanwhile: the other run's outcome (it must
    end while the first is still held), then the held run's once released."""
    held = HeldExec(program)
    try:
        slow, slow_outcome = _in_thread(lambda: processkit.run([str(program)]))
        held.wait_for_the_exec()
        other, other_outcome = _in_thread(lambda: processkit.run(["sh", "-c", "echo other > other"], cwd=tmp_path))
        # A bound on a failure, not a timing: the old spawn held the service until the lease's
        # break time (45 s by default) ran out.
        other.join(20)
        assert not other.is_alive(), "the other run waited for the held child's exec"
        assert slow.is_alive(), "the held run ended before its exec was let go"
    finally:
        held.release()
    slow.join(60)
    assert not slow.is_alive()
    assert other_outcome["result"].returncode == 0
    assert (tmp_path / "other").read_text() == "other\n"
    return slow_outcome


def test_another_run_ends_while_a_child_is_held_in_its_exec(tmp_path):
    program = tmp_path / "held-true"
    shutil.copy("/bin/true", program)
    os.chmod(program, 0o755)
    outcome = _held_run_and_another(program, tmp_path)
    assert "error" not in outcome, outcome
    assert outcome["result"].returncode == 0
    assert outcome["result"].source == "child_exit"


def test_an_exec_that_fails_after_a_wait_is_reported_exactly(tmp_path):
    """The held exec fails (no format the kernel runs): the caller gets Popen's error for it,
    errno and path, as for an exec that fails at once."""
    program = tmp_path / "held-garbage"
    program.write_text("not a program\n")
    os.chmod(program, 0o755)
    outcome = _held_run_and_another(program, tmp_path)
    error = outcome.get("error")
    assert isinstance(error, OSError) and error.errno == 8, outcome  # ENOEXEC
    assert error.filename == str(program)
    assert "Exec format error" in str(error)


def test_a_child_abandoned_in_its_exec_is_killed_without_waiting_for_the_exec(tmp_path):
    """A run closed while its child is held in its execve (a lease, a hung mount) ends the child
    at once: the host is not held until the exec ends (the lease here lasts until released, up
    to the kernel's lease-break time, 45 s by default)."""
    from processkit.containment.base import ChildJoins
    from processkit.engine import spawn_native
    from processkit.engine.spawn import Starting
    from processkit.spawn_words import Asked

    program = tmp_path / "held-true"
    shutil.copy("/bin/true", program)
    os.chmod(program, 0o755)
    held = HeldExec(program)
    try:
        pending = spawn_native.Pending(
            [str(program)], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(), [-1, -1, -1], False, 0, False, passed=()
        )
        held.wait_for_the_exec()
        asked = Asked([str(program)], {"PATH": "/usr/bin:/bin"}, None, "process_group")
        starting = Starting((None, None, None), asked, pending=pending)
        thread, outcome = _in_thread(lambda: starting.abandon())
        thread.join(10)
        assert not thread.is_alive(), "abandon waited for the held exec"
        assert "error" not in outcome, outcome
    finally:
        held.release()
