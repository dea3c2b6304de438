"""The kernel's usage figures a run reads: ``wait4``'s for its root and ``getrusage``'s for the
reaped children. Through the native module where it was built (a run has it loaded to spawn);
the standard library's ``os.wait4`` and ``resource.getrusage`` only as fallback, because both
load ``resource``, an extension module of its own (~0.5 M instructions and its pages a run).
"""

from __future__ import annotations

import errno
import os

from . import native


def wait4(pid: int, options: int) -> tuple[int, int, int, int, int]:
    """``(pid, status, ru_maxrss in KiB, user ns, system ns)`` as ``os.wait4`` gives them (pid
    0: not yet ended under ``WNOHANG``): the CPU times are the reaped child's and those of the
    descendants it waited for (us precision), what hyperfine's ``RUSAGE_CHILDREN`` delta across
    a run holds (it reaps the root alone). Raises ``OSError`` as it does (``ChildProcessError``: not
    a child)."""
    built = native.module()
    if built is None:
        found, status, usage = os.wait4(pid, options)
        return found, status, usage.ru_maxrss, _ns(usage.ru_utime), _ns(usage.ru_stime)
    status = built.ffi.new("int *")
    usage = built.ffi.new("struct rusage *")
    while True:
        found = built.lib.wait4(pid, status, options, usage)
        if found >= 0:
            return found, status[0], usage.ru_maxrss, _timeval_ns(usage.ru_utime), _timeval_ns(usage.ru_stime)
        code = built.ffi.errno
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code))


def _ns(seconds: float) -> int:
    """The standard library's float seconds of a ``timeval``, back in whole microseconds."""
    return round(seconds * 1e6) * 1000


def _timeval_ns(value) -> int:
    """A C ``struct timeval`` (the native module's) in nanoseconds."""
    return (value.tv_sec * 1_000_000 + value.tv_usec) * 1000


def children() -> tuple[int, int, int, int]:
    """(user ns, system ns, 512-byte blocks in, blocks out) of the reaped children (us precision)."""
    built = native.module()
    if built is None:
        import resource

        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return _ns(used.ru_utime), _ns(used.ru_stime), used.ru_inblock, used.ru_oublock
    usage = built.ffi.new("struct rusage *")
    built.lib.getrusage(built.lib.RUSAGE_CHILDREN, usage)
    return _timeval_ns(usage.ru_utime), _timeval_ns(usage.ru_stime), usage.ru_inblock, usage.ru_oublock
