"""A fork of the caller while another of its threads makes its first call (processkit's modules
loading): the child's own first call waited for ever on an import lock held by a thread the
child does not have; the fork now waits for processkit's imports under way, and the child's
call runs (``processkit/fork_imports.py``)."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET

FORKED = r"""
import os, signal, sys, threading, processkit

first = threading.Thread(target=lambda: processkit.run(["true"]))
first.start()
while True:  # the fork lands while the other thread loads the API
    api = sys.modules.get("processkit.api")
    if api is not None and getattr(api.__spec__, "_initializing", False):
        break
pid = os.fork()
if pid == 0:
    signal.alarm(int(sys.argv[1]))  # a child that waits for ever ends by SIGALRM
    result = processkit.run(["echo", "child"], capture_output=True)
    os._exit(0 if result.stdout == b"child\n" else 3)
_, status = os.waitpid(pid, 0)
first.join()
print(os.waitstatus_to_exitcode(status), processkit.run(["echo", "parent"], capture_output=True).stdout)
"""


def test_a_child_forked_while_another_thread_loads_the_api_runs_its_call(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FORKED, str(int(SAFETY_NET / 2))],
        capture_output=True,
        text=True,
        timeout=2 * SAFETY_NET,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 b'parent\\n'", done.stderr
