"""The floor under a batch job's CPU: N children of ``true``, ``--jobs`` at a time, run by the
least a Python process can do for each (``os.posix_spawnp`` with the child's stdout and stderr
on pipes, a pidfd on one ``epoll``, the pipes read to their end, ``os.wait4``), and the
process's own CPU per job (its rusage, children excluded), beside the wall time. No group, no
event, no record, no line: what ``bench/batch_cpu.py`` measures for ``batch`` less all of
processkit's work, so the two side by side say how much of a job's CPU is processkit's at all
(bench/README.md, "Batch per job (issue 49, batch56)").

    python3 bench/batch_floor.py [N] [JOBS]
"""

from __future__ import annotations

import os
import resource
import select
import sys
import time


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    at_once = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    poll = select.epoll()
    owned: dict[int, tuple[str, int]] = {}  # fd -> ("pidfd", pid) or ("pipe", pid)
    open_fds: dict[int, int] = {}  # pid -> the fds of its that are not yet at their end
    started = ended = 0
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def start() -> None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        actions = [
            (os.POSIX_SPAWN_DUP2, null, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        pid = os.posix_spawnp("true", ["true"], env, file_actions=actions)
        os.close(out_w)
        os.close(err_w)
        pidfd = os.pidfd_open(pid)
        for fd, kind in ((out_r, "pipe"), (err_r, "pipe"), (pidfd, "pidfd")):
            owned[fd] = (kind, pid)
            poll.register(fd, select.EPOLLIN)
        open_fds[pid] = 3

    def done(fd: int) -> None:
        kind, pid = owned.pop(fd)
        poll.unregister(fd)
        os.close(fd)
        if kind == "pidfd":
            os.wait4(pid, 0)
        open_fds[pid] -= 1

    while ended < count:
        while started < count and started - ended < at_once:
            start()
            started += 1
        for fd, _ in poll.poll():
            kind, pid = owned[fd]
            if kind == "pipe" and os.read(fd, 65536):
                continue
            done(fd)
            if open_fds[pid] == 0:
                del open_fds[pid]
                ended += 1
    wall, after = time.perf_counter() - wall, resource.getrusage(resource.RUSAGE_SELF)
    user = (after.ru_utime - before.ru_utime) * 1000 / count
    system = (after.ru_stime - before.ru_stime) * 1000 / count
    print(f"user {user:.3f} ms/job  sys {system:.3f} ms/job  cpu {user + system:.3f} ms/job  wall {wall:.3f} s")


if __name__ == "__main__":
    main()
