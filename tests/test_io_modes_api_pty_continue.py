"""The API's runner service carries one ``pty=True`` run after another on one host, and each
run's keyboard takes raw mode back when a shell's ``bg`` then ``fg`` continues it. The host's
SIGCONT watch kept only the first run's hook (the signal watch keeps a signal's first handler):
the second run's keys stayed cooked after ``fg``, and Ctrl-C cancelled it instead of reaching
its child."""

from __future__ import annotations

import os
import signal
import sys
import textwrap

from conftest import wait_for_file
from test_io_modes_job_control import BgThenFg, _raw_becomes
from test_io_modes_terminal import _state_becomes

PY = sys.executable

# argv[1]: the child's report path; argv[2]: the child's script. A first pty run that ends at
# once, then a second that waits for its cue: both in the caller's one runner service.
CALLER = textwrap.dedent(
    """
    import sys, processkit
    report, child = sys.argv[1], sys.argv[2]
    processkit.run([sys.executable, "-c", "pass"], pty=True, timeout=60)
    processkit.run([sys.executable, "-c", child, report, "wait"], pty=True, timeout=60)
    """
)


def test_a_second_api_pty_run_brought_back_with_bg_then_fg_relays_keys_in_raw_mode_again(tmp_path):
    shell = BgThenFg(tmp_path)
    try:
        shell.start_host("bg", [PY, "-c", CALLER, str(shell.report), shell.CHILD])
        wait_for_file(f"{shell.report}.ready")
        assert _raw_becomes(shell.master, True), "the service relays the second run's keys in raw mode"
        caller = os.tcgetpgrp(shell.master)  # the job's group: the caller and its service
        os.killpg(caller, signal.SIGTSTP)  # Ctrl-Z
        wait_for_file(f"{shell.result}.stopped")
        assert _raw_becomes(shell.master, False), "the shell's own modes at the stop"
        shell.cue("bg")
        assert _state_becomes(caller, "S")
        shell.cue("fg")
        assert _raw_becomes(shell.master, True), "raw mode again once continued in the foreground"
        shell.go()
        assert shell.finish()["rc"] == 0
    finally:
        shell.close()
