"""Per-run accounting against BenchExec's ``runexec --no-container``, its cost, and its leftovers.

1. Accuracy: each workload run by ``processkit-cli run`` (no flag, no cap; figures from its
   ``--usage-file``) and by ``runexec`` in turn, round after round; the medians side by side.
   Workloads: one process holding 200 MiB; a tree of two concurrent 100 MiB holders; a middle
   process starting two CPU burners and exiting at once (grandchildren that exit before the
   root). Both tools read the same kind of counters (v1 ``memory.max_usage_in_bytes`` with page
   cache, ``cpuacct.usage``), so the figures compare like with like.
2. Cost: ``run -- true`` with accounting and with ``PROCESSKIT_ACCOUNTING=0``, in alternating
   pairs; the median wall time of each and the median of the per-pair difference.
3. The join itself: a write of "0" to ``cgroup.procs`` or to ``tasks`` in each v1 group, timed
   in forked children.
4. Leftovers: the run groups (``processkit-run-*``) in this process's cgroup directories after
   N sequential runs, and after K runners SIGKILLed mid-run and one ``prune``.

    python3 bench/accounting.py --rounds 5 --pairs 201 --runs 1000 --killed 60 --joins 21
    PROCESSKIT_CONTAINMENT=process_group python3 bench/accounting.py
    PROCESSKIT_CONTAINMENT=process_group PROCESSKIT_CGROUP_V1_ROOT=/nonexistent python3 bench/accounting.py --pairs 0 --runs 0 --killed 0
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from accounting_workloads import HOLD_100_MIB, concurrent, early_burners  # noqa: E402

from processkit.api.launch import runner_command  # noqa: E402
from processkit.containment import cgroup_v1, cgroup_v2  # noqa: E402

PY = sys.executable
HOLD_ONE = "x = b'x' * (200 << 20)"
WORKLOADS = {
    "one process, 200 MiB": HOLD_ONE,
    "two concurrent 100 MiB holders": concurrent(2, HOLD_100_MIB),
    "early-exiting burners": early_burners(0.25),
}


def workload(code: str, scratch: str) -> list[str]:
    """The workload's command line, with a fresh path prefix for its barrier files."""
    return [PY, "-c", code, os.path.join(scratch, f"barrier-{time.monotonic_ns()}")]


def processkit_figures(code: str, scratch: str) -> tuple[int | None, float]:
    usage, jsonl = os.path.join(scratch, "usage.json"), os.path.join(scratch, "run.jsonl")
    flags = ["--jsonl", jsonl, "--no-echo", "--usage-file", usage]
    subprocess.run([*runner_command(), "run", *flags, "--", *workload(code, scratch)], check=True)
    with open(usage) as handle:
        figures = json.load(handle)
    return figures["peak_memory_bytes"], figures["cpu_ns"] / 1e9


def runexec_figures(code: str, scratch: str) -> tuple[int, float]:
    flags = ["--no-container", "--output", os.path.join(scratch, "runexec.log")]
    command = ["runexec", *flags, "--", *workload(code, scratch)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=scratch).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return int(values["memory"].rstrip("B")), float(values["cputime"].rstrip("s"))


def accuracy(rounds: int, scratch: str) -> None:
    print("| workload | processkit peak | runexec peak | ratio | processkit CPU | runexec CPU | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, code in WORKLOADS.items():
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(processkit_figures(code, scratch))
            theirs.append(runexec_figures(code, scratch))
        cpu = statistics.median(c for _, c in ours), statistics.median(c for _, c in theirs)
        theirs_memory = statistics.median(m for m, _ in theirs)
        if any(m is None for m, _ in ours):  # a bare process group: no counter holds a tree's peak
            memory = f"null | {theirs_memory / 2**20:.1f} MiB | -"
        else:
            ours_memory = statistics.median(m for m, _ in ours)
            memory = (
                f"{ours_memory / 2**20:.1f} MiB | {theirs_memory / 2**20:.1f} MiB | {ours_memory / theirs_memory:.3f}"
            )
        print(f"| {name} | {memory} | {cpu[0] * 1000:.0f} ms | {cpu[1] * 1000:.0f} ms | {cpu[0] / cpu[1]:.3f} |")


def timed_true(scratch: str, accounting: bool) -> float:
    env = dict(os.environ, PROCESSKIT_ACCOUNTING="1" if accounting else "0")
    jsonl = os.path.join(scratch, "cost.jsonl")
    started = time.perf_counter()
    subprocess.run([*runner_command(), "run", "--jsonl", jsonl, "--no-echo", "--", "true"], env=env, check=True)
    return time.perf_counter() - started


def cost(pairs: int, scratch: str) -> None:
    on, off, differences = [], [], []
    for index in range(pairs):
        first = index % 2 == 0  # alternate which one goes first
        a = timed_true(scratch, first)
        b = timed_true(scratch, not first)
        with_, without = (a, b) if first else (b, a)
        on.append(with_)
        off.append(without)
        differences.append(with_ - without)
    print(
        f"run -- true, {pairs} pairs: with accounting {statistics.median(on) * 1000:.2f} ms, "
        f"PROCESSKIT_ACCOUNTING=0 {statistics.median(off) * 1000:.2f} ms, "
        f"median per-pair difference {statistics.median(differences) * 1000:+.2f} ms"
    )


def join_cost(samples: int) -> None:
    """What a child pays to join the v1 accounting groups before exec: a write of "0" to each
    group's ``cgroup.procs`` (the whole thread group: the global threadgroup lock) or ``tasks``
    (its one thread), timed inside forked children; groups made for the purpose and removed."""
    parents = cgroup_v1.own_groups()
    made = []
    try:
        for controller in ("memory", "cpuacct", "pids"):
            if controller in parents:
                made.append(os.path.join(parents[controller], f"processkit-bench-join-{os.getpid()}"))
                os.mkdir(made[-1])
        for name in ("cgroup.procs", "tasks"):
            fds = [os.open(os.path.join(path, name), os.O_WRONLY) for path in made]
            times = []
            for _ in range(samples):
                read_end, write_end = os.pipe()
                pid = os.fork()
                if pid == 0:
                    started = time.perf_counter()
                    for fd in fds:
                        os.write(fd, b"0")
                    os.write(write_end, repr(time.perf_counter() - started).encode())
                    os._exit(0)
                os.close(write_end)
                times.append(float(os.read(read_end, 64)))
                os.close(read_end)
                os.waitpid(pid, 0)
                time.sleep(0.05)  # apart, as runs are: no grace period shared with the last join
            for fd in fds:
                os.close(fd)
            print(f"join {len(made)} v1 groups through {name}: median {statistics.median(times) * 1000:.3f} ms")
    finally:
        for path in made:
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.01)


def run_groups(runner_pids: set[int]) -> list[str]:
    """The run groups (v2 and v1) of the runners this benchmark started: a group is named after
    its run's token, which starts with the runner's pid (the host's other runs are not counted)."""
    parents = [cgroup_v2.find_parent(), *cgroup_v1.own_groups().values()]
    found = []
    for parent in filter(None, parents):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = name[len("processkit-run-") :].split("-", 1)[0]
            if name.startswith("processkit-run-") and pid.isdigit() and int(pid) in runner_pids:
                found.append(os.path.join(parent, name))
    return found


def leftovers(runs: int, killed: int, scratch: str) -> None:
    started: set[int] = set()
    for _ in range(runs):
        runner = subprocess.Popen(
            [*runner_command(), "run", "--jsonl", os.path.join(scratch, "seq.jsonl"), "--no-echo", "--", "true"]
        )
        started.add(runner.pid)
        assert runner.wait() == 0
    print(f"after {runs} sequential runs: {len(run_groups(started))} run groups left")
    started.clear()
    runners = []
    for index in range(killed):
        jsonl = os.path.join(scratch, f"killed-{index}.jsonl")
        runners.append(
            (jsonl, subprocess.Popen([*runner_command(), "run", "--jsonl", jsonl, "--no-echo", "--", "sleep", "60"]))
        )
        started.add(runners[-1][1].pid)
    for jsonl, runner in runners:
        while not (os.path.exists(jsonl) and "run_started" in open(jsonl).read()):
            time.sleep(0.01)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    stranded = len(run_groups(started))
    subprocess.run([*runner_command(), "prune"], check=True, stdout=subprocess.DEVNULL)
    left = run_groups(started)
    print(f"{killed} runners SIGKILLed: {stranded} run groups stranded, {len(left)} left after prune {left}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=201)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--killed", type=int, default=60)
    parser.add_argument("--joins", type=int, default=21)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="processkit-bench-accounting-")
    try:
        if args.joins:
            join_cost(args.joins)
        if shutil.which("runexec") and args.rounds:
            accuracy(args.rounds, scratch)
        if args.pairs:
            cost(args.pairs, scratch)
        if args.runs or args.killed:
            leftovers(args.runs, args.killed, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
