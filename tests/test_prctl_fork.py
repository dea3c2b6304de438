"""``prctl.set_child_subreaper`` remembers that it made this process a subreaper; the kernel does
not pass that flag to a forked child, so neither does the memory (``os.register_at_fork``)."""

from __future__ import annotations

import subprocess
import sys

# The flag set, then a fork: the child says what ``made_subreaper`` answers, then what the kernel
# says (PR_GET_CHILD_SUBREAPER) before and after its own ``set_child_subreaper``.
FORKER = r"""
import ctypes, os
from processkit.containment import prctl

def kernel_says():
    flag = ctypes.c_int(-1)
    assert ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0
    return flag.value

assert prctl.set_child_subreaper() and kernel_says() == 1
reader, writer = os.pipe()
pid = os.fork()
if pid == 0:
    before = (int(prctl.made_subreaper()), kernel_says())
    prctl.set_child_subreaper()
    os.write(writer, ("%d %d %d" % (*before, kernel_says())).encode())
    os._exit(0)
os.close(writer)
print(os.read(reader, 64).decode())
assert os.waitpid(pid, 0)[1] == 0
"""


def test_a_forked_child_is_made_a_subreaper_by_its_own_call():
    done = subprocess.run([sys.executable, "-c", FORKER], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # made_subreaper agrees with the kernel (0) in the child; its own call makes it one (1).
    assert done.stdout.split() == [b"0", b"0", b"1"], done.stdout
