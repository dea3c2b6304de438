"""What issue 49's named next step for a batch job would buy: a lent run's accounting read in one
native call (bench/README.md, "(issue 49, lent61)"). A C reader built here with cffi (a
compiler is needed; nothing of it is in ``csrc/``) ``pread``s the six counters of a job's lent
v1 groups (memory peak, ``oom_kill``, cpuacct usage and its split, pids peak) through the fds
the groups' held files keep, parses them, and hands back six numbers; ``--native`` puts it in
place of ``CgroupV1Controllers.account`` for a lent set (a group's fds are looked up once and
forgotten when its files close), then runs ``batch_cpu.py``'s batch in this process. Without
``--native`` the batch runs as the installed tree has it. Alternate the two and compare medians:

    python3 bench/lent_counters.py 1000 --keep failed 2>/dev/null
    python3 bench/lent_counters.py --native 1000 --keep failed 2>/dev/null

``--time-account`` (after ``--native`` where given) also prints the median CPU time of one
``account`` call, which the pool's fresh groups do not move as they move a whole batch's.
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile

READER = r"""
#include <stdint.h>
#include <string.h>
#include <unistd.h>
/* Each fd read from 0 and its number parsed (after "key " on its own line where a key is
   given); -1 where unreadable or not a number. */
void pk_bench_counters(const int *fds, const char *const *keys, int n, int64_t *out) {
    char buf[512];
    for (int i = 0; i < n; i++) {
        ssize_t got = pread(fds[i], buf, sizeof buf - 1, 0);
        const char *at = buf;
        out[i] = -1;
        if (got < 0) continue;
        buf[got] = 0;
        if (keys[i]) {
            size_t len = strlen(keys[i]);
            for (at = buf; at && (strncmp(at, keys[i], len) != 0 || at[len] != ' ');) {
                at = strchr(at, '\n');
                at = at ? at + 1 : 0;
            }
            if (!at) continue;
            at += len + 1;
        }
        if (*at < '0' || *at > '9') continue;
        for (out[i] = 0; *at >= '0' && *at <= '9'; at++) out[i] = out[i] * 10 + (*at - '0');
    }
}
"""
FILES = {  # each kind's counters, in the reader's order
    "memory": ("memory.max_usage_in_bytes", "memory.oom_control"),
    "cpuacct": ("cpuacct.usage", "cpuacct.usage_user", "cpuacct.usage_sys"),
    "pids": ("pids.peak",),
}


def build():
    import cffi

    ffi = cffi.FFI()
    ffi.cdef("void pk_bench_counters(const int *fds, const char *const *keys, int n, int64_t *out);")
    ffi.set_source("_pk_bench_counters", READER)
    where = tempfile.mkdtemp(prefix="pk-bench-counters-")
    sys.path.insert(0, os.path.dirname(ffi.compile(tmpdir=where)))
    import _pk_bench_counters

    return _pk_bench_counters


def patch() -> None:
    from processkit.containment import cgroup_v1, cgroupfs

    built = build()
    ffi, lib = built.ffi, built.lib
    held, plain = cgroupfs.HeldFiles, cgroup_v1.CgroupV1Controllers.account
    keys = [ffi.NULL, ffi.new("char[]", b"oom_kill"), ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL]
    key_array, out = ffi.new("char *[]", keys), ffi.new("int64_t[6]")
    cached: dict[int, list[int]] = {}  # a held-files object's counter fds, while its files are open
    closing = held.close

    def close(files) -> None:
        cached.pop(id(files), None)
        closing(files)

    def fds(files, kind: str) -> list[int]:
        found = cached.get(id(files))
        if found is None:
            found = cached[id(files)] = [files._fd(name) for name in FILES[kind]]
        return found

    def account(self, tally) -> None:
        where = [self._where(kind) for kind in FILES]
        if not all(isinstance(files, held) for files in where):
            return plain(self, tally)
        lib.pk_bench_counters(
            fds(where[0], "memory") + fds(where[1], "cpuacct") + fds(where[2], "pids"), key_array, 6, out
        )
        peak, oom, usage, user, system, processes = out
        if min(out) < 0:  # as the tree reads it, whatever failed
            return plain(self, tally)
        tally.offer("peak_memory_bytes", peak, "memory.max_usage_in_bytes (v1)")
        tally.offer("oom_kills", oom, "memory.oom_control oom_kill (v1)")
        tally.offer_ns("cpu_ns", usage, "cpuacct.usage (v1)")
        user = usage * user // (user + system) if user + system else 0
        source = "cpuacct.usage split as cpuacct.usage_user/usage_sys (v1)"
        tally.offer_ns("user_ns", user, source)
        tally.offer_ns("system_ns", usage - user, source)
        tally.offer("peak_process_count", processes, "pids.peak (v1)")

    held.close = close
    cgroup_v1.CgroupV1Controllers.account = account


def time_account() -> list[int]:
    """Each ``account`` call's CPU time (ns, this thread's clock), gathered as the batch runs."""
    import time

    from processkit.containment import cgroup_v1

    spent: list[int] = []
    inner = cgroup_v1.CgroupV1Controllers.account

    def account(self, tally) -> None:
        started = time.thread_time_ns()
        inner(self, tally)
        spent.append(time.thread_time_ns() - started)

    cgroup_v1.CgroupV1Controllers.account = account
    return spent


def main() -> None:
    arguments = sys.argv[1:]
    if arguments[:1] == ["--native"]:
        arguments = arguments[1:]
        patch()
    spent = None
    if arguments[:1] == ["--time-account"]:
        arguments = arguments[1:]
        spent = time_account()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_cpu.py")
    sys.argv = [script, *arguments]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        if spent:
            import statistics

            print(f"account {statistics.median(spent) / 1000:.2f} µs median of {len(spent)} calls")


if __name__ == "__main__":
    main()
