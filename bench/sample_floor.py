"""The floor under a `bench` sample of `true`: the same kernel work a sample does for its
containment and figures, made by a small C loop with no Python, against hyperfine -N.

Each sample of the loop opens the three software counters `bench` opens (inherited, enabled on
exec; one disabled keeper of each kind held for the whole loop, as `benchmark/counters.py`
does), reads 29 group files and resets the memory group's peak (a `bench` sample's `pread`s and
`pwrite`, `strace -c`), clones the child into a cgroup v2 group (`CLONE_INTO_CGROUP`), whose
first step writes itself into the v1 `pids`, `cpuacct` and `memory` groups as `bench`'s child
does, execs `true` (a `PATH` search), then waits on its pidfd and `wait4`s it, reads and
closes the counters. The groups are made once for the loop (a `bench` sample's group restart
and checks are left out: a floor). Variants take parts away: `posix_spawn` is hyperfine's own
spawn and `wait4` alone; `fork` the loop's clone (a `clone3` without `CLONE_VM`), exec and wait
with no group, counter or read (the gap between the two is the clone's, not the containment's).
CPU per sample is the loop's and its children's (`os.wait4`), alternating with `hyperfine -N
--runs N true` round by round. Needs `cc`, root, and a hybrid host (v2 mounted at
`/sys/fs/cgroup/unified`, v1 `pids`, `cpuacct`, `memory`); the groups are removed at the end.

    python3 bench/sample_floor.py --runs 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = "/sys/fs/cgroup"
SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { COUNTERS = 1, READS = 2, JOINS = 4, INTO = 8, SPAWN = 16 };
extern char **environ;

static int in(int dir, const char *name, int flags) {
  int fd = openat(dir, name, flags | O_CLOEXEC);
  if (fd < 0) { perror(name); exit(2); }
  return fd;
}

static int counter(uint64_t config, int inherit) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE; a.size = sizeof a; a.config = config; a.disabled = 1;
  a.inherit = inherit; a.enable_on_exec = inherit;
  return syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int main(int argc, char **argv) {
  /* v2 group, pids group, cpuacct group, memory group, parts, samples */
  int dirs[4];
  for (int i = 0; i < 4; i++) dirs[i] = open(argv[1 + i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int parts = atoi(argv[5]); long samples = atol(argv[6]);
  int joins[3] = {in(dirs[1], "tasks", O_WRONLY), in(dirs[2], "tasks", O_WRONLY), in(dirs[3], "tasks", O_WRONLY)};
  int reads[8] = {in(dirs[0], "cgroup.events", O_RDONLY), in(dirs[2], "cpuacct.usage", O_RDONLY),
                  in(dirs[2], "cpuacct.stat", O_RDONLY), in(dirs[3], "memory.max_usage_in_bytes", O_RDONLY),
                  in(dirs[1], "pids.current", O_RDONLY), in(dirs[3], "memory.oom_control", O_RDONLY),
                  in(dirs[3], "memory.limit_in_bytes", O_RDONLY), in(dirs[1], "pids.max", O_RDONLY)};
  int peak = in(dirs[3], "memory.max_usage_in_bytes", O_WRONLY), null = open("/dev/null", O_RDWR | O_CLOEXEC);
  uint64_t kinds[3] = {PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_PAGE_FAULTS, PERF_COUNT_SW_CONTEXT_SWITCHES};
  if (parts & COUNTERS)
    for (int k = 0; k < 3; k++) counter(kinds[k], 0); /* the keepers */
  char buf[256];
  for (long n = 0; n < samples; n++) {
    int fds[3];
    if (parts & COUNTERS)
      for (int k = 0; k < 3; k++) fds[k] = counter(kinds[k], 1);
    if (parts & READS) {
      for (int i = 0; i < 29; i++) pread(reads[i % 8], buf, sizeof buf, 0);
      pwrite(peak, "0", 1, 0);
    }
    if (parts & SPAWN) { /* hyperfine's way: posix_spawn (a vfork), no pidfd */
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      for (int i = 0; i < 3; i++) posix_spawn_file_actions_adddup2(&actions, null, i);
      char *args[] = {"true", NULL};
      pid_t child;
      if (posix_spawnp(&child, "true", &actions, NULL, args, environ) != 0) { perror("posix_spawnp"); return 2; }
      posix_spawn_file_actions_destroy(&actions);
      int status;
      struct rusage usage;
      wait4(child, &status, 0, &usage);
      continue;
    }
    int pidfd = -1;
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_PIDFD | ((parts & INTO) ? CLONE_INTO_CGROUP : 0);
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd; ca.exit_signal = SIGCHLD; ca.cgroup = dirs[0];
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0) {
      if (parts & JOINS)
        for (int i = 0; i < 3; i++) write(joins[i], "0", 1);
      dup2(null, 0); dup2(null, 1); dup2(null, 2);
      char *args[] = {"true", NULL};
      execvp("true", args);
      _exit(127);
    }
    if (pid < 0) { perror("clone3"); return 2; }
    struct pollfd p = {pidfd, POLLIN, 0};
    poll(&p, 1, -1);
    int status;
    struct rusage usage;
    wait4(pid, &status, 0, &usage);
    close(pidfd);
    if (parts & COUNTERS)
      for (int k = 0; k < 3; k++) { uint64_t v; read(fds[k], &v, 8); close(fds[k]); }
  }
  return 0;
}
"""
VARIANTS = {
    "posix_spawn, wait4 (hyperfine's way)": 16,
    "fork, exec, pidfd wait": 0,
    "+ counters": 1,
    "+ counters, reads, joins, clone into": 15,
}


def groups(tag: str) -> list[str]:
    """The v2 group and the v1 pids, cpuacct and memory groups (memory under this process's own)."""
    memory = next(line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines() if ":memory:" in line)
    parents = [f"{ROOT}/unified", f"{ROOT}/pids", f"{ROOT}/cpuacct", f"{ROOT}/memory{memory.rstrip('/')}"]
    return [os.path.join(parent, tag) for parent in parents]


def timed(argv: list[str], runs: int) -> tuple[float, float, float]:
    """Wall, CPU and system µs a sample of one whole process and its children."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed")
    return tuple(x / runs * 1e6 for x in (time.monotonic() - started, usage.ru_utime + usage.ru_stime, usage.ru_stime))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    made = groups(f"benchfloor-{os.getpid()}")
    with tempfile.TemporaryDirectory() as scratch:
        source, program = os.path.join(scratch, "floor.c"), os.path.join(scratch, "floor")
        with open(source, "w") as handle:
            handle.write(SOURCE)
        subprocess.run(["cc", "-O2", "-o", program, source], check=True)
        sides = {"hyperfine": ["hyperfine", "-N", "--runs", str(args.runs), "--style", "none", "true"]}
        for name, parts in VARIANTS.items():
            sides[name] = [program, *made, str(parts), str(args.runs)]
        for path in made:
            os.mkdir(path)
        try:
            figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
            for round_ in range(args.rounds):  # the order reversed every other round
                names = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
                for name in names:
                    figures[name].append(timed(sides[name], args.runs))
        finally:
            for path in made:
                os.rmdir(path)
    print(f"a sample of true, µs (medians of {args.rounds} rounds of {args.runs}; load {os.getloadavg()[0]:.1f})")
    for name, values in figures.items():
        wall, cpu, system = (statistics.median(column) for column in zip(*values))
        print(f"{name:40s} wall {wall:6.0f}  CPU {cpu:5.0f} (system {system:4.0f})")


if __name__ == "__main__":
    main()
