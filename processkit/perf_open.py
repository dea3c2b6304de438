"""``perf_event_open`` through libc's ``syscall`` (``ctypes``), and ``bench``'s perf helper forked with it.

Shared, below ``benchmark``: the launcher's ``bench`` step (``cli/bench_start.py``) forks the helper
(``benchmark/perf_switch.py`` says why it exists) as soon as the bench bundle is read, before the
``benchmark`` package (``plan``'s ``re``, ``enum``, ``shlex``) and ``ctypes`` are imported: ~7 ms earlier,
so the kernel's grace period it waits out ends before the session is set up more often
(bench/README.md, "bench (issue 49, bench58)"). The helper makes its one call through the C module
the launcher has already loaded (``ctypes`` where it was not built). ``benchmark/counters.py`` opens
the session's counters with ``perf_event_open`` here.
"""

from __future__ import annotations

import errno
import os

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
SYSCALL = {"x86_64": 298, "aarch64": 241, "riscv64": 241, "loongarch64": 241, "ppc64le": 319, "s390x": 331}
ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: type, size, config, period, sample type, read format, flags, ...
DISABLED, INHERIT, EXCLUDE_KERNEL, EXCLUDE_HV, ENABLE_ON_EXEC = 1 << 0, 1 << 1, 1 << 5, 1 << 6, 1 << 12
PERF_FLAG_FD_CLOEXEC = 1 << 3
TASK_CLOCK = 1  # PERF_COUNT_SW_TASK_CLOCK

_SYSCALL: list = []  # (the call, its number, ctypes' errno reader): libc's syscall(), prepared once
HELPER: list[int] = []  # the perf helper's pid until ``benchmark.perf_switch.settle`` collects it


def attr(kind: int, config: int, flags: int = DISABLED | INHERIT | ENABLE_ON_EXEC) -> bytes:
    """A ``perf_event_attr`` (its first version's 64 bytes, native byte order)."""
    import struct

    if kind == PERF_TYPE_HARDWARE:
        flags |= EXCLUDE_KERNEL | EXCLUDE_HV  # the command's own instructions, as hyperfine counts them
    # type, size, config, sample period, sample type, read format, flags, wakeup, bp type, bp addr
    return struct.pack("=IIQQQQQIIQ", kind, ATTR_SIZE, config, 0, 0, 0, flags, 0, 0, 0)


def prepare() -> bool:
    """The call made ready (the syscall's number for this machine, and ``syscall``'s argument
    types, so a call converts nothing by hand); False where this machine's number is unknown. A
    session opens three to eight counters a run: the machine's name and six ctypes values made
    for each open were a tenth of their cost."""
    if not _SYSCALL:
        number = SYSCALL.get(os.uname().machine)  # platform.machine()'s answer, without its 1 ms import
        if number is None:
            return False
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).syscall
        call.restype = ctypes.c_long
        call.argtypes = (ctypes.c_long, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ulong)
        _SYSCALL.append((call, number, ctypes.get_errno))
    return True


def perf_event_open(attr: bytes, cpu: int = -1) -> int:
    """``perf_event_open(attr, pid=0 (this thread), cpu, group=-1, FD_CLOEXEC)``: the new
    descriptor, or minus the errno."""
    if not _SYSCALL and not prepare():
        return -errno.ENOSYS
    call, number, get_errno = _SYSCALL[0]
    fd = call(number, attr, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    return fd if fd >= 0 else -get_errno()


def fork_helper() -> None:
    """Fork the helper (once; not where the caller already has it, nor where this machine's
    system call number is unknown): one disabled task clock opened on its own thread, closed by
    its exit."""
    if HELPER:
        return
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        code = 1
        try:
            code = 0 if _helper_open(attr(PERF_TYPE_SOFTWARE, TASK_CLOCK, DISABLED)) >= 0 else 1
        finally:
            os._exit(code)
    HELPER.append(pid)


def _helper_open(event: bytes) -> int:
    """The helper's one open: through the C module, which the launcher has loaded to map the bundle
    (importing ``ctypes`` in the helper cost ~1.5 ms of CPU beside the start-up); else ``ctypes``."""
    try:
        from . import _native
    except ImportError:
        return perf_event_open(event)
    ffi, lib = _native.ffi, _native.lib
    number, cast = lib.SYS_perf_event_open, ffi.cast
    fd = lib.syscall(
        cast("long", number),
        ffi.new("char[]", event),
        cast("int", 0),
        cast("int", -1),
        cast("int", -1),
        cast("unsigned long", PERF_FLAG_FD_CLOEXEC),
    )
    return fd if fd >= 0 else -ffi.errno
