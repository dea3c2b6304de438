"""Chaos: many runs with capture, a random third of their runners SIGKILLed at random moments,
then one ``prune``. Nothing of the killed runs may be left, and what they wrote must still read.

Each run's child writes output and starts a grandchild that ignores SIGTERM and SIGHUP (and,
under cgroup v2, leaves for its own session with ``setsid``; a process group cannot hold that
one, as documented). A killed runner dies before its child starts, while it pumps output, or in
its teardown: each killed run is given one of those phases at random, and its runner is killed
at a random moment inside it, found from its own JSONL (a host's load would otherwise push every
fixed delay into one phase); the teardown is started by a SIGTERM, during which the grandchild
holds the grace. Then one ``prune`` runs, and is timed.

Reported (figures for bench/README.md): leftover processes (any carrying the run's environment
marker), cgroups, registry files and socket (run) directories of this bench's runners, all of
which must be 0; the share of killed runs whose JSONL still validates line by line (every
complete line against the event schema; a torn last line is what a SIGKILL may leave and is not
counted); the wall time of the ``prune``; and what it reports having ended.

    python3 bench/chaos.py                 # 1,000 runs
    python3 bench/chaos.py --runs 60
    PROCESSKIT_CONTAINMENT=process_group python3 bench/chaos.py --runs 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soak import cli, host_entries, leftovers, runner_argv

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r"""
import os, signal, sys, time
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if sys.argv[1] == "1":
        os.setsid()
    open(sys.argv[3], "w").close()
    time.sleep(600)
    os._exit(0)
for _ in range(int(sys.argv[2])):
    sys.stdout.write("out " * 64 + "\n")
    sys.stderr.write("err " * 16 + "\n")
    time.sleep(0.002)
"""
SETUP_WINDOW_SECONDS = 0.3  # a runner killed in setup dies this long after its start, at most
RUNNING_WINDOW_SECONDS = 0.3  # ... while running: this long after run_started, at most
TEARDOWN_WINDOW_SECONDS = 0.5  # ... in teardown (a SIGTERM starts it): after cleanup_started
SETTLE_SECONDS = 5.0
PHASES = ("setup", "running", "teardown")
TEARDOWN = (
    "root_exited",
    "timeout",
    "cancelled",
    "killed",
    "output_overflow",
    "limit_evidence",
    "resource_summary",
    "cleanup_started",
    "cleanup_finished",
    "output_captured",
)


def phase(jsonl: Path) -> str:
    """Where the runner is, from the last complete event it wrote."""
    try:
        lines = jsonl.read_bytes().split(b"\n")[:-1]
    except FileNotFoundError:
        return "setup"
    if not lines:
        return "setup"
    last = json.loads(lines[-1])["event"]
    return "teardown" if last in TEARDOWN else "running"


def jsonl_validates(path: Path) -> bool:
    """Every complete line is a valid event; a torn last line does not count against it."""
    from processkit.events.validate import validate_event

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return True  # killed before the stream was opened: nothing to read wrongly
    for line in raw.split(b"\n")[:-1]:
        try:
            event = json.loads(line)
        except ValueError:
            return False
        if validate_event(event):
            return False
    return True


class Victim:
    """A runner to kill at a random moment of one phase of its run."""

    def __init__(self, runner: subprocess.Popen, where: Path, target: str, rng: random.Random):
        self.runner, self.jsonl, self.forked, self.target, self.rng = (
            runner,
            where / "run.jsonl",
            where / "forked",
            target,
            rng,
        )
        self.deadline = time.monotonic() + rng.uniform(0, SETUP_WINDOW_SECONDS) if target == "setup" else None
        self.terminated = False

    def due(self) -> bool:
        """Whether the moment has come; arms the deadline once the phase is reached (a run is
        running once its grandchild exists)."""
        if self.deadline is None and (self.target == "setup" or self.forked.exists()):
            now = phase(self.jsonl)
            if self.target == "running" and now == "running":
                self.deadline = time.monotonic() + self.rng.uniform(0, RUNNING_WINDOW_SECONDS)
            elif self.target == "teardown" and now == "running" and not self.terminated:
                self.runner.send_signal(signal.SIGTERM)
                self.terminated = True
            elif self.target == "teardown" and now == "teardown":
                self.deadline = time.monotonic() + self.rng.uniform(0, TEARDOWN_WINDOW_SECONDS)
        return self.deadline is not None and time.monotonic() >= self.deadline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=8, help="runners alive at once")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="pk-chaos-"))
    registry = work / "registry"
    marker = f"PK_CHAOS_MARKER=chaos-{os.getpid()}-{time.time_ns()}"
    os.environ["PROCESSKIT_CLI_REGISTRY_DIR"] = str(registry)
    escape = "0" if os.environ.get("PROCESSKIT_CONTAINMENT") == "process_group" else "1"
    before = host_entries()
    to_kill = set(rng.sample(range(args.runs), args.runs // 3))
    running: list[tuple[int, subprocess.Popen, Victim | None]] = []
    pids: set[int] = set()
    killed: dict[int, str] = {}  # run -> the phase its runner was killed in
    started = time.monotonic()
    for index in range(args.runs):
        while len(running) >= args.parallel:
            running = _step(running, killed, work)
        where = work / f"r{index}"
        argv = runner_argv(
            where,
            marker,
            "--no-echo",
            "--grace",
            "2s",
            "--",
            sys.executable,
            "-c",
            CHILD,
            escape,
            str(rng.randint(150, 400)),
            str(where / "forked"),
        )
        runner = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pids.add(runner.pid)
        victim = Victim(runner, where, rng.choice(PHASES), rng) if index in to_kill else None
        running.append((index, runner, victim))
    while running:
        running = _step(running, killed, work)
    runs_seconds = time.monotonic() - started

    t0 = time.monotonic()
    prune = subprocess.run([cli(), "prune", "--json", "--report-reaped"], capture_output=True, check=True)
    sweep_seconds = time.monotonic() - t0
    report = json.loads(prune.stdout)
    settle = time.monotonic() + SETTLE_SECONDS
    while True:  # SIGKILLed processes take a moment to exit
        found = leftovers(before, pids, registry, marker)
        if not found["processes"] or time.monotonic() > settle:
            break
        time.sleep(0.05)
    valid = sum(jsonl_validates(work / f"r{index}" / "run.jsonl") for index in killed)
    figures = {
        "runs": args.runs,
        "killed": len(killed),
        "killed_in_phase": {name: list(killed.values()).count(name) for name in PHASES},
        "containment": os.environ.get("PROCESSKIT_CONTAINMENT", "default (cgroup_v2 where possible)"),
        "runs_wall_s": round(runs_seconds, 1),
        "prune_wall_s": round(sweep_seconds, 3),
        "prune_tally": {key: report[key] for key in ("pruned", "live", "unprobed", "orphaned_locks")},
        "ended_processes": report["reaped"]["processes"],
        "removed_cgroups": len(report["reaped"]["groups"]),
        "signalled_process_groups": len(report["reaped"]["process_groups"]),
        "removed_run_dirs": len(report["reaped"]["run_dirs"]),
        "left_processes": len(found["processes"]),
        "left_cgroups": len(found["cgroups"]),
        "left_registry_files": len(found["registry_files"]),
        "left_socket_dirs": len(found["socket_dirs"]),
        "killed_jsonl_valid_share": round(valid / len(killed), 4) if killed else None,
    }
    print(json.dumps(figures, indent=2))
    for pid in found["processes"]:  # leave the host as it was, whatever the verdict
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    clean = not (found["processes"] or found["cgroups"] or found["registry_files"] or found["socket_dirs"])
    if clean and valid == len(killed):
        shutil.rmtree(work)
        return 0
    print(f"the runs' streams and captures are kept in {work}", file=sys.stderr)
    return 1


def _step(running: list, killed: dict[int, str], work: Path) -> list:
    """Kill the runners whose moment has come, drop those that ended; pause briefly."""
    still = []
    for index, runner, victim in running:
        if runner.poll() is not None:
            continue
        if victim is not None and victim.due():
            landed = phase(work / f"r{index}" / "run.jsonl")
            runner.kill()
            runner.wait()
            killed[index] = landed
            continue
        still.append((index, runner, victim))
    time.sleep(0.005)
    return still


if __name__ == "__main__":
    raise SystemExit(main())
