"""What a host's signal watch leaves once it is closed (``signals.SignalWatch.close``): the stop
signals stay absorbed (a late one is not fatal), but Ctrl-Z stops the process again, as it did
before the watch: the carrier may go on for a while (a batch's page, its JUnit file, a run's
sweep and ``--usage-file``) with nothing left to suspend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from conftest import SAFETY_NET

# A host watches the process's signals, is closed, says so on stdout, then waits for its stdin.
CARRIER = r"""
import sys
from processkit.engine.host import Host

host = Host()
host.watch_signals()
host.close()
sys.stdout.write("closed\n")
sys.stdout.flush()
sys.stdin.read()
"""


def test_a_process_whose_host_closed_is_stopped_by_sigtstp_and_absorbs_sigint():
    """Closed, the host's SIGTSTP handler is gone (the process stops), its SIGINT's is not."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CARRIER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0
    )  # a group of its own in this session, not orphaned: the kernel would drop its SIGTSTP
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"closed\n"
        os.kill(proc.pid, signal.SIGINT)  # absorbed: the process goes on
        os.kill(proc.pid, signal.SIGTSTP)
        deadline = time.monotonic() + SAFETY_NET
        _, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
        while status == 0 and time.monotonic() < deadline:  # 0: still running (absorbed)
            time.sleep(0.01)
            _, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
        assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGTSTP, status
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=SAFETY_NET) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
