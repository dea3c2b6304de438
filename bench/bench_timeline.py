"""Where a whole benchmark's wall goes, by the kernel's own events: `bench` against hyperfine.

Each round records one run of each tool system wide with `perf record -a` on the scheduler's
`sched_process_fork`, `sched_process_exec` and `sched_process_exit` tracepoints (no tracer
stops the processes, as strace would), and reads from the tool's own children: its start-up
(the tool's exec to its first child's exec), the gap between one child's exit and the next
child's exec, each child's fork to its exec and exec to exit, and the tail (the last child's
exit to the tool's). With `--wakes` the gap is also split at the tool's wake-up: the first
return, after the child's exit and before the next fork, of a wait the tool blocks in (`wait4`,
`waitid`, `poll`, `ppoll`, `epoll_wait`, `epoll_pwait`; a child with none, the tool asleep in
another call, is left out of the split, which says how many children it holds), so the kernel's
part (the exit's work and the wake-up of an idle CPU, which both tools pay) stands apart from
the tool's own work up to its next fork; those system calls' tracepoints slow every system call
on the host (a start-up and a child's fork to exec read longer), so read the other figures from
a run without it. Medians per round, the tools in turn. Needs root (or perf_event_paranoid -1)
and perf.

    python3 bench/bench_timeline.py --rounds 3 --cli X/bin/processkit-cli --runs 100
    python3 bench/bench_timeline.py --wakes --command true --rounds 5 --cli X/bin/processkit-cli --runs 1000
    python3 bench/bench_timeline.py --command /bin/true --rounds 3 --cli X/bin/processkit-cli --runs 100
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile

EVENTS = ("sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit")
WAITS = ("wait4", "waitid", "poll", "ppoll", "epoll_wait", "epoll_pwait")  # where a tool sleeps
LINE = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")
FORK = re.compile(r"pid=(\d+) child_comm=.* child_pid=(\d+)")
FILENAME = re.compile(r"filename=(.*) pid=-?\d+ old_pid=-?\d+")  # the tracepoint's format: a path may hold spaces


def events(argv: list[str], wakes: bool) -> list[tuple[str, int, float, str, str]]:
    """(comm, pid, seconds, event, fields) of every process event while ``argv`` ran, and with
    ``wakes`` every return from a wait of ``WAITS``."""
    with tempfile.TemporaryDirectory() as scratch:
        data = os.path.join(scratch, "perf.data")
        record = ["perf", "record", "-q", "-o", data, "-a"]
        for event in (*EVENTS, *(f"syscalls:sys_exit_{name}" for name in WAITS if wakes)):
            record += ["-e", event]
        subprocess.run([*record, "--", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        script = ["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"]
        text = subprocess.run(script, capture_output=True, text=True, check=True).stdout
    found = []
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            comm, pid, stamp, event, fields = match.groups()
            found.append((comm, int(pid), float(stamp), event.rsplit(":", 1)[-1], fields))
    return found


def execs_program(fields: str, program: str) -> bool:
    """Whether an exec's fields name ``program``, given as a name (found on PATH, so any
    directory) or as a path: by the file name alone, since a tool may exec the path it resolved."""
    match = FILENAME.search(fields)
    return match is not None and os.path.basename(match.group(1)) == os.path.basename(program)


def woken_at(children: list[int], exits: dict, forked: dict, returns: list[float], ended: float) -> dict:
    """Each child's wake-up: the tool's first return from a wait of ``WAITS`` after the child's
    exit and before its next fork (the tool's end, after the last child). A child with none (the
    tool slept in another call) has no wake-up: left out, never counted as woken at its exit."""
    woke = {}
    for pid, after in zip(children, [*(forked[pid] for pid in children[1:]), ended]):
        back = next((back for back in returns if exits[pid] < back <= after), None)
        if back is not None:
            woke[pid] = back
    return woke


def timeline(argv: list[str], program: str, wakes: bool) -> dict[str, float]:
    """The figures of one run of ``argv``, whose children exec ``program``."""
    rows = events(argv, wakes)
    tool = next(pid for _, pid, _, event, fields in rows if event == "sched_process_exec" and argv[0] in fields)
    began = next(stamp for _, pid, stamp, event, _ in rows if pid == tool and event == "sched_process_exec")
    forked: dict[int, float] = {}
    for _, _, stamp, event, fields in rows:
        match = FORK.search(fields) if event == "sched_process_fork" else None
        if match and int(match.group(1)) == tool:
            forked[int(match.group(2))] = stamp
    execs = {
        pid: stamp
        for _, pid, stamp, event, fields in rows
        if event == "sched_process_exec" and pid in forked and execs_program(fields, program)
    }
    if not execs:
        raise SystemExit(f"no child of {argv[0]} exec'd {program}: nothing to time (is --command what it runs?)")
    exits = {pid: stamp for _, pid, stamp, event, _ in rows if event == "sched_process_exit" and pid in execs}
    returns = sorted(stamp for _, pid, stamp, event, _ in rows if pid == tool and event.startswith("sys_exit_"))
    ended = max(stamp for _, pid, stamp, event, _ in rows if pid == tool and event == "sched_process_exit")
    starts, stops = sorted(execs.values()), sorted(exits.values())
    gaps = [start - max(stop for stop in stops if stop < start) for start in starts[1:]]
    children = sorted(exits, key=execs.__getitem__)
    woke = woken_at(children, exits, forked, returns, ended)
    woken = [woke[pid] - exits[pid] for pid in children if pid in woke]
    work = [forked[after] - woke[pid] for pid, after in zip(children, children[1:]) if pid in woke]
    split = {
        "  children with a wake-up in WAITS": len(woke),
        "  of it, the exit to the tool's wake-up (us)": statistics.median(woken) * 1e6 if woken else math.nan,
        "  the wake-up to the next fork (us)": statistics.median(work) * 1e6 if work else math.nan,
    }
    return {
        "children": len(execs),
        "start-up to the first exec (ms)": (starts[0] - began) * 1e3,
        "exit to the next exec (us)": statistics.median(gaps) * 1e6 if gaps else math.nan,  # one child: no gap
        **(split if wakes else {}),
        "fork to exec (us)": statistics.median(execs[pid] - forked[pid] for pid in execs) * 1e6,
        "exec to exit (us)": statistics.median(exits[pid] - execs[pid] for pid in exits) * 1e6,
        "last exit to the tool's (ms)": (ended - stops[-1]) * 1e3,
        "whole (ms)": (ended - began) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--cli", action="append", help="a processkit-cli to measure (repeatable)")
    parser.add_argument("--command", default="sleep 0.02", help="the command both tools run (-N)")
    parser.add_argument("--wakes", action="store_true", help="split the gap at the tool's wake-up")
    args = parser.parse_args()
    clis = args.cli or [shutil.which("processkit-cli") or "processkit-cli"]
    tools = {cli: [cli, "bench", "-N", "--style", "none", "--runs", str(args.runs), args.command] for cli in clis}
    tools["hyperfine"] = ["hyperfine", "-N", "--style", "none", "--runs", str(args.runs), args.command]
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in tools}
    for round_ in range(args.rounds):
        names = list(tools)
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            figures[name].append(timeline(tools[name], shlex.split(args.command)[0], args.wakes))
    print(f"load average at the end {os.getloadavg()[0]:.1f}; medians over {args.rounds} rounds")
    for name, rounds in figures.items():
        print(name)
        for key in rounds[0]:
            values = [r[key] for r in rounds if not math.isnan(r[key])]  # a round with no wake-up has no split
            print(f"  {key}: {statistics.median(values):.1f}" if values else f"  {key}: none")


if __name__ == "__main__":
    main()
