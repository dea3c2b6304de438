"""The guard on the fault signals (``engine.signals.guard_faults``: the runner service's and the
CLI runner's) drops one sent by ``kill`` and never one a real fault raises: a process that faults with the guard on
still dies of its signal, at once (a handler that returned to the faulting instruction would
loop for ever), in C (csrc/faults.c) and in the pure-Python fallback alike, and faulthandler,
where it was on first, still reports the fault natively. Each case checks which guard is on: a C
guard that failed falls back to blocking, and a native case would have passed on that too."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from processkit import native

PY = sys.executable

# The start of each script below that reads a signal's action back.
ACTION = r"""
import ctypes

class Action(ctypes.Structure):  # glibc's struct sigaction
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]
"""

# The guard on, which guard it is told (of the four signals: how many are caught, how many
# blocked, how many caught by a handler with SA_SIGINFO, the C guard's), each fault signal sent
# to itself (dropped), then a real fault of ``kind``.
FAULTER = r"""
import mmap, os, signal, sys, tempfile
from processkit.containment import prctl
from processkit.engine import signals as faults

prctl.set_not_dumpable()  # no core file
faults.guard_faults()
numbers = [getattr(signal, name) for name in faults.FAULTS]
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
caught, blocked = (int(status[field], 16) for field in ("SigCgt", "SigBlk"))
siginfo = 0
for number in numbers:
    action = Action()
    assert ctypes.CDLL(None).sigaction(number, None, ctypes.byref(action)) == 0
    siginfo += bool(action.flags & 4)  # SA_SIGINFO
print(sum(caught >> (n - 1) & 1 for n in numbers), sum(blocked >> (n - 1) & 1 for n in numbers), siginfo)
for name in faults.FAULTS:
    os.kill(os.getpid(), getattr(signal, name))
print("survived", flush=True)
kind = sys.argv[1]
if kind == "SIGSEGV":
    ctypes.string_at(0)
elif kind == "SIGBUS":
    with tempfile.TemporaryFile() as backing:
        backing.truncate(mmap.PAGESIZE)
        mapped = mmap.mmap(backing.fileno(), mmap.PAGESIZE)
        backing.truncate(0)
        mapped[0]
elif kind == "SIGFPE":
    ctypes.CDLL(None).div(1, 0)
print("went on", flush=True)
"""


@pytest.mark.parametrize("pump", ["native", "python"])
@pytest.mark.parametrize("kind", ["SIGSEGV", "SIGBUS", "SIGFPE"])
def test_a_real_fault_still_ends_a_guarded_process(pump, kind):
    env = {**os.environ, "PROCESSKIT_PUMP": pump}
    done = subprocess.run([PY, "-c", ACTION + FAULTER, kind], capture_output=True, timeout=60, env=env)
    guard = "4 0 4" if pump == "native" else "0 4 0"  # caught by the C guard, or blocked
    assert done.stdout.decode() == f"{guard}\nsurvived\n", done.stderr.decode()
    assert done.returncode == -getattr(signal, kind)


def test_faulthandler_on_before_the_guard_still_reports_a_real_fault():
    env = {**os.environ, "PROCESSKIT_PUMP": "native"}
    done = subprocess.run(
        [PY, "-X", "faulthandler", "-c", ACTION + FAULTER, "SIGSEGV"], capture_output=True, timeout=60, env=env
    )
    assert done.stdout.decode() == "4 0 4\nsurvived\n", done.stderr.decode()
    assert done.returncode == -signal.SIGSEGV
    assert b"Fatal Python error: Segmentation fault" in done.stderr


def test_a_demanded_native_guard_not_built_blocks_and_leaves_the_service_up():
    """``PROCESSKIT_PUMP=native`` on a build without the C module: the choice is the pump's own
    (``native.select_backend``), whose setup failure each run meets at its launch; the guard
    itself blocks the fault signals and raises nothing, so the service still answers."""
    script = (
        "import signal; from processkit import native; native._module = None\n"
        "from processkit.engine import signals as faults; faults.guard_faults()\n"
        "print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])) == sorted(getattr(signal, n) for n in faults.FAULTS))"
    )
    env = dict(os.environ, PROCESSKIT_PUMP="native")
    done = subprocess.run([PY, "-c", script], capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"True\n"), done.stderr


# The C guard alone, in a process that ignores SIGBUS (inherited) and then guards twice: what
# each of the four signals' actions is after (a handler with SA_SIGINFO, or ignored), and a
# SIGSEGV it then raises for real.
TWICE = r"""
import signal, sys
from processkit import native
from processkit.containment import prctl

prctl.set_not_dumpable()  # no core file
built = native.module()
assert built.lib.pk_guard_faults() == 0 and built.lib.pk_guard_faults() == 0
shown = []
for number in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL):
    action = Action()
    assert ctypes.CDLL(None).sigaction(number, None, ctypes.byref(action)) == 0
    shown.append("ignored" if action.handler == 1 else "guarded" if action.flags & 4 else "other")
print(" ".join(shown), flush=True)
ctypes.string_at(0)
"""


@pytest.mark.skipif(native.module() is None, reason="the C guard needs the C module")
def test_the_c_guard_leaves_an_ignored_signal_ignored_and_a_second_guard_keeps_the_first(tmp_path):
    script = ACTION + "import signal; signal.signal(signal.SIGBUS, signal.SIG_IGN)\n" + TWICE
    done = subprocess.run([PY, "-c", script], capture_output=True, timeout=60, cwd=tmp_path)
    assert done.stdout.decode() == "guarded ignored guarded guarded\n", done.stderr.decode()
    assert done.returncode == -signal.SIGSEGV  # the action before the first guard put back, not the guard


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to count the guard's calls")
@pytest.mark.skipif(native.module() is None, reason="the C guard needs the C module")
def test_the_c_guard_sets_each_signal_by_one_sigaction(tmp_path):
    """Each guarded signal's action set and its action before read by one ``sigaction``: four
    system calls a runner's start, where a query and a set each made eight."""
    trace = tmp_path / "trace"
    script = (
        "import os; from processkit import native; built = native.module()\n"
        "os.write(1, b'<'); assert built.lib.pk_guard_faults() == 0; os.write(1, b'>')"
    )
    command = ["strace", "-qq", "-e", "trace=rt_sigaction,write", "-o", str(trace), PY, "-c", script]
    done = subprocess.run(command, capture_output=True, timeout=60, cwd=tmp_path)
    assert done.stdout == b"<>", done.stderr
    lines = trace.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('write(1, "<"'))
    end = next(i for i, line in enumerate(lines) if line.startswith('write(1, ">"'))
    calls = [line.split("(", 1)[1].split(",", 1)[0] for line in lines[start + 1 : end]]
    assert calls == ["SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"], lines[start:end]
