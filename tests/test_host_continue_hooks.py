"""A host's SIGCONT hooks (``Host.watch_continue``): one watch of the signal, calling the hook of
every run that registered one. The signal watch keeps the first handler of a signal, so the
runner service (one host for its life) kept only its first ``--pty`` run's keyboard hook: every
later run's keys stayed cooked after ``bg`` then ``fg``, and that first keyboard was kept alive."""

from __future__ import annotations

import subprocess
import sys

# Two runs' hooks registered, a SIGCONT, the first released, a SIGCONT: what each hook saw.
CARRIER = r"""
import os, signal
from processkit.engine.host import Host

host = Host()
host.watch_signals()
seen = []
host.watch_continue("first", lambda: seen.append("first"))
host.watch_continue("second", lambda: seen.append("second"))
os.kill(os.getpid(), signal.SIGCONT)
host.dispatch_signal_pipe()
print(" ".join(sorted(seen)))
seen.clear()
host.unwatch("first")
os.kill(os.getpid(), signal.SIGCONT)
host.dispatch_signal_pipe()
print(" ".join(sorted(seen)))
host.close()
"""


def test_every_registered_run_hook_is_called_at_sigcont_until_released():
    done = subprocess.run([sys.executable, "-c", CARRIER], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["first second", "second"]
