"""``/proc/<pid>/stat`` has one parser (``containment.members.split_stat``), read by a run's
member facts, its live usage and the API's look at a stopped service (``api.stopped``). The
process's name sits between parentheses and is the process's own to choose: a name that holds
spaces, parentheses and what looks like the fields after it must not shift them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from processkit.api import stopped
from processkit.containment.accounting import Usage, stream_summary
from processkit.containment.members import read_member, split_stat, usage_of

# 13 bytes (a name is cut at 15): read up to its first ')', it would say state Z, parent 1.
NAME = "a) Z 1 1 1 (b"


# The child: burns this much CPU (its own clock), says so on stdout, then waits to be killed.
BURN_SECONDS = 0.2
CHILD = (
    "import sys, time\n"
    f"while time.process_time() < {BURN_SECONDS}: pass\n"
    "sys.stdout.write('burnt\\n'); sys.stdout.flush()\n"
    "time.sleep(600)\n"
)


def test_a_name_with_spaces_and_parentheses_leaves_the_fields_in_place(tmp_path):
    """A real process named so (its program's file name: a link to this interpreter, so no
    multi-call ``sleep`` that dispatches on its name), in a session of its own: its name, parent,
    group, session and state read as the kernel has them, its CPU time lies between what it burnt
    and the time it has lived (a parse shifted past the false ')' would read its flags and page
    faults there), and a stop and a continue are seen through the same parser."""
    program = tmp_path / NAME
    program.symlink_to(sys.executable)
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    began = time.monotonic_ns()
    child = subprocess.Popen([str(program), "-I", "-S", "-c", CHILD], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"burnt\n"
        member = read_member(child.pid)
        assert member is not None
        assert (member.name, member.ppid, member.pgid, member.session) == (NAME, os.getpid(), child.pid, child.pid)
        assert member.zombie is False and member.start_time is not None and member.start_time.isdigit()
        used = usage_of([child.pid])
        lived = time.monotonic_ns() - began
        # /proc's utime and stime are each cut to a whole tick; one thread uses no more CPU than time
        assert BURN_SECONDS * 1e9 - 2 * tick_ns <= used.user_ns + used.system_ns <= lived + tick_ns, (used, lived)
        assert used.user_ns > 0
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)  # stopped now
        assert stopped.state(child.pid) == b"T"
        assert stopped.resume(child.pid) is True
        os.waitpid(child.pid, os.WCONTINUED)
        assert stopped.state(child.pid) != b"T"
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert read_member(child.pid) is None and stopped.state(child.pid) is None


def test_the_hard_lines():
    """The name runs from the first '(' to the last ')'; a line without one has no fields."""
    tail = b" R 7 8 9" + b" 0" * 15 + b" 4242 rest\n"
    assert split_stat(b"12 (" + NAME.encode() + b")" + tail) == (NAME.encode(), tail.split())
    assert split_stat(b"12 ()) ((())" + tail)[0] == b")) ((()"
    name, fields = split_stat(b"12 (x)" + tail)
    assert (name, fields[0], fields[1], fields[3], fields[19]) == (b"x", b"R", b"7", b"9", b"4242")
    assert split_stat(b"") == (b"", [])
    assert split_stat(b"12 (cut") == (b"", [])


def test_the_streams_cpu_is_read_from_a_member_without_an_address_space():
    """A zombie member (exited, not yet reaped) has a stat but no VmHWM: the stream's summary,
    like the reference's, reports its CPU, and its memory apart (null)."""
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", CHILD.replace("time.sleep(600)", "")])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
        summary = stream_summary(Usage(), usage_of([child.pid]), accounts=True, pids_capped=False)
    finally:
        child.wait()
    assert summary["peak_memory_bytes"] is None and summary["total_cpu_ms"] >= BURN_SECONDS * 1000 * 0.75, summary
