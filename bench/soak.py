"""Soak and stress: many runs, one after another and side by side, and one long-lived run under a
stream of control requests. Afterwards nothing may be left, and nothing may have grown.

Checked, and printed as figures for bench/README.md:

- every run's exit code, a stream that ends in ``runner_exit``, and both capture files exactly
  the bytes the child wrote, with ``output_captured``'s sha256 equal to hashlib's of the file;
- leaks: cgroups named ``processkit-<runner pid>-*`` in every parent this host offers (cgroup v2
  and the v1 hierarchies) and ``/tmp/pkc-<runner pid>-*`` socket directories that are new since
  the start and name one of the soak's runners, files left in the (dedicated) registry, and
  processes still carrying the soak's environment marker (every child gets one; /proc/*/environ
  is searched for it);
- the runner's peak RSS per run (``ru_maxrss``) across the sequential runs: flat;
- a long-lived runner's descriptor count and RSS across thousands of control requests and
  interval snapshots: flat.

Peak RSS: a child's ``ru_maxrss`` starts at its parent's RSS when it is spawned (exec carries
the old address space's high-water mark over), so the runs are started by one small launcher
process (``LAUNCHER``) that spawns each runner and reports its wait4 rusage.

    python3 bench/soak.py                           # 1000 sequential, 5 rounds of 32 concurrent
    python3 bench/soak.py --runs 100 --rounds 1 --requests 500
    PROCESSKIT_CONTAINMENT=process_group python3 bench/soak.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Reads one JSON argv per line, spawns it with stdout/stderr on /dev/null, prints
# {"pid", "code", "maxrss_kib", "wall"} per line. Small and long-lived: its own RSS stays far
# below a runner's, so each runner's ru_maxrss is the runner's own.
LAUNCHER = r"""
import json, os, sys, time
null = os.open(os.devnull, os.O_RDWR)
actions = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
for line in sys.stdin:
    argv = json.loads(line)
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    print(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss, "wall": wall}), flush=True)
"""


def cli() -> str:
    beside = Path(sys.executable).parent / "processkit-cli"
    return str(beside) if beside.exists() else shutil.which("processkit-cli")


# -- what a child writes, and how it is checked --------------------------------------------------
# What RSS may grow by without counting as a leak: the allocator's own slack, plus (for the
# long-lived run) cancelled connection timers, which stay in the loop's heap for their 5 s.
RSS_SLACK_MIB = 4
SIZES = (0, 1, 10, 1000, 20_000, 200_000)  # lines of ``seq``: 0 B up to ~1.3 MB per stream


def runner_argv(where: Path, marker: str, *rest: str) -> list[str]:
    """A run of a soak or of chaos.py in ``where`` (made here): its stream and captures there, and
    ``marker`` in its tree's environment, which the leftovers' look finds it by; ``rest``: the
    run's other options, ``--`` and the child."""
    where.mkdir()
    return [
        cli(),
        "run",
        "--jsonl",
        str(where / "run.jsonl"),
        "--capture-dir",
        str(where / "cap"),
        "--env",
        marker,
        *rest,
    ]


def child(lines: int) -> list[str]:
    """stdout: ``seq 1 N``; stderr: the same backwards. Deterministic, so the bytes are known."""
    return ["sh", "-c", f"seq 1 {lines}; seq {lines} -1 1 >&2"] if lines else ["true"]


def expected(lines: int) -> tuple[bytes, bytes]:
    forward = "".join(f"{i}\n" for i in range(1, lines + 1)).encode()
    backward = "".join(f"{i}\n" for i in range(lines, 0, -1)).encode()
    return forward, backward


class Problems(list):
    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.append(what)


def verify_run(where: Path, lines: int, code: int, problems: Problems) -> None:
    """The exit code, a complete stream, and capture files byte-exact with honest digests."""
    label = where.name
    problems.check(code == 0, f"{label}: exit {code}")
    raw = (where / "run.jsonl").read_bytes()
    events = [json.loads(line) for line in raw.splitlines()]
    problems.check(raw.endswith(b"\n") and events[-1]["event"] == "runner_exit", f"{label}: incomplete stream")
    finished = next((e for e in events if e["event"] == "cleanup_finished"), None)
    problems.check(
        finished is not None
        and (finished["remaining"], finished["kill_error"], finished["read_error"]) == (0, False, False),
        f"{label}: cleanup not confirmed empty: {finished}",
    )
    captured = next((e for e in events if e["event"] == "output_captured"), None)
    if captured is None:
        problems.append(f"{label}: no output_captured")
        return
    for stream, produced in zip(("stdout", "stderr"), expected(lines)):
        report, content = captured[stream], (where / "cap" / f"{stream}.log").read_bytes()
        problems.check(content == produced, f"{label}: {stream}.log differs from what the child wrote")
        problems.check(report["sha256"] == hashlib.sha256(content).hexdigest(), f"{label}: {stream} digest differs")
        problems.check(
            report["bytes"] == len(produced) and not report["truncated"] and not report["write_error"],
            f"{label}: {stream} report {report}",
        )


# -- leaks ------------------------------------------------------------------------------------------
def cgroup_parents() -> list[str]:
    """Every directory a runner started from here makes its groups in (the package's own
    discovery: the v2 parent and the v1 hierarchies)."""
    from processkit.containment import sweep

    return sorted(set(sweep.parents()))


def host_entries() -> set[str]:
    """Run cgroups and socket directories on the host now, whoever made them."""
    groups = {
        os.path.join(parent, name)
        for parent in cgroup_parents()
        if os.path.isdir(parent)
        for name in os.listdir(parent)
        if name.startswith("processkit-")
    }
    return groups | {os.path.join("/tmp", name) for name in os.listdir("/tmp") if name.startswith("pkc-")}


def made_by(path: str, pids: set[int]) -> bool:
    """``processkit-run-<pid>-…``, ``processkit-<pid>-…`` (older) and ``pkc-<pid>-…`` name the
    runner that made them."""
    owner = os.path.basename(path).removeprefix("processkit-").removeprefix("run-").removeprefix("pkc-").split("-")[0]
    return owner.isdigit() and int(owner) in pids


def leftovers(before: set[str], runner_pids: set[int], registry: Path, marker: str) -> dict[str, list]:
    """What this soak's runners left: entries new since ``before`` that name one of them (other
    programs on the host may be making their own meanwhile), and any process with the marker."""
    new = sorted(path for path in host_entries() - before if made_by(path, runner_pids))
    groups = [path for path in new if os.path.basename(path).startswith("processkit-")]
    sockets = [path for path in new if os.path.basename(path).startswith("pkc-")]
    strays = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if marker.encode() in handle.read():
                    strays.append(pid)
        except OSError:
            pass
    # Records and locks; the runs' outcome tombstones (*.ended, bounded) stay on purpose.
    entries = [name for name in os.listdir(registry) if not name.endswith(".ended")]
    return {"cgroups": groups, "socket_dirs": sockets, "registry_files": entries, "processes": strays}


def wait_for_line(path: Path, needle: bytes, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and needle in path.read_bytes()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{needle!r} never appeared in {path}")
        time.sleep(0.01)


def fd_count(pid: int = os.getpid()) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def settled_fd_count(pid: int) -> int:
    """A runner's descriptors, less those a snapshot or a closing connection holds for a moment:
    the fewest seen over a few looks."""
    counts = []
    for _ in range(5):
        counts.append(fd_count(pid))
        time.sleep(0.01)
    return min(counts)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


# -- the three parts ---------------------------------------------------------------------------------
class Soak:
    def __init__(self, args, work: Path):
        self.args = args
        self.work = work
        self.marker = f"PK_SOAK_MARKER=soak-{os.getpid()}-{time.time_ns()}"
        self.registry = work / "registry"
        os.environ["PROCESSKIT_CLI_REGISTRY_DIR"] = str(self.registry)
        self.registry.mkdir(mode=0o700)
        self.runner_pids: set[int] = set()
        self.before = host_entries()
        self.problems = Problems()
        self.figures: dict = {
            "containment": os.environ.get("PROCESSKIT_CONTAINMENT", "default (cgroup_v2 where possible)")
        }

    def run_argv(self, where: Path, lines: int, *extra: str) -> list[str]:
        return runner_argv(where, self.marker, *extra, "--", *child(lines))

    def sequential(self) -> None:
        own_fds_before = fd_count()
        launcher = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        walls, peaks = [], []
        started = time.perf_counter()
        for index in range(self.args.runs):
            lines = SIZES[index % len(SIZES)]
            where = self.work / f"seq-{index:05d}"
            launcher.stdin.write(json.dumps(self.run_argv(where, lines)) + "\n")
            launcher.stdin.flush()
            result = json.loads(launcher.stdout.readline())
            self.runner_pids.add(result["pid"])
            verify_run(where, lines, result["code"], self.problems)
            walls.append(result["wall"])
            peaks.append(result["maxrss_kib"])
            shutil.rmtree(where)
        elapsed = time.perf_counter() - started
        launcher.stdin.close()
        launcher.stdout.close()
        launcher.wait()
        tenth = max(1, len(peaks) // 10)
        self.figures["sequential"] = {
            "runs": self.args.runs,
            "seconds": round(elapsed, 1),
            "wall_ms": {
                "median": ms(statistics.median(walls)),
                "p99": ms(percentile(walls, 99)),
                "max": ms(max(walls)),
            },
            "peak_rss_mib": {
                "first_tenth_median": mib(statistics.median(peaks[:tenth])),
                "last_tenth_median": mib(statistics.median(peaks[-tenth:])),
                "max": mib(max(peaks)),
            },
            "bench_fds_before_after": [own_fds_before, fd_count()],
        }
        self.problems.check(fd_count() == own_fds_before, "the bench itself leaked descriptors")
        rss = self.figures["sequential"]["peak_rss_mib"]
        self.problems.check(
            rss["last_tenth_median"] <= rss["first_tenth_median"] + RSS_SLACK_MIB / 4, f"runner peak RSS grew: {rss}"
        )

    def concurrent(self) -> None:
        rounds = []
        for round_index in range(self.args.rounds):
            batch = []
            started = time.perf_counter()
            for index in range(self.args.concurrent):
                lines = SIZES[(round_index + index) % len(SIZES)] * 2
                where = self.work / f"par-{round_index}-{index:02d}"
                proc = subprocess.Popen(
                    self.run_argv(where, lines),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                batch.append((proc, where, lines))
            for proc, where, lines in batch:
                code = proc.wait()
                self.runner_pids.add(proc.pid)
                verify_run(where, lines, code, self.problems)
                shutil.rmtree(where)
            rounds.append(time.perf_counter() - started)
        self.figures["concurrent"] = {
            "runs_per_round": self.args.concurrent,
            "rounds": self.args.rounds,
            "round_seconds": {"median": round(statistics.median(rounds), 2), "max": round(max(rounds), 2)},
        }

    def long_lived(self) -> None:
        """One run with 5 ms interval snapshots, asked inspect and attest over and over."""
        from processkit.control import client, replies

        where = self.work / "long"
        argv = self.run_argv(where, 0, "--run-id", "soak-long", "--snapshot-interval", "5ms")
        argv[argv.index("--") + 1 :] = ["sleep", "3600"]
        runner = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.runner_pids.add(runner.pid)
        wait_for_line(where / "run.jsonl", b'"members_snapshot"')
        samples = []
        started = time.perf_counter()
        for index in range(self.args.requests + 1):
            if index % max(1, self.args.requests // 10) == 0:
                samples.append((index, settled_fd_count(runner.pid), rss_kib(runner.pid)))
            if index < self.args.requests:
                verb, check = (("inspect", replies.check_snapshot), ("attest", replies.check_attestation))[index % 2]
                client.request_by_id("soak-long", verb, check)
        elapsed = time.perf_counter() - started
        client.request_by_id("soak-long", "cancel", replies.ack_check("cancel"))
        self.problems.check(runner.wait(30) == 108, "the long-lived run did not end with 108")
        snapshots = (where / "run.jsonl").read_bytes().count(b'"reason":"interval"')
        fds = [fds for _, fds, _ in samples]
        self.problems.check(len(set(fds)) == 1, f"the long-lived runner's descriptors changed: {samples}")
        self.problems.check(
            samples[-1][2] <= samples[0][2] + RSS_SLACK_MIB * 1024, f"the long-lived runner grew: {samples}"
        )
        self.figures["long_lived"] = {
            "requests": self.args.requests,
            "requests_per_second": round(self.args.requests / elapsed),
            "interval_snapshots": snapshots,
            "runner_fds_first_last": [fds[0], fds[-1]],
            "runner_rss_mib_first_last_max": [mib(samples[0][2]), mib(samples[-1][2]), mib(max(s[2] for s in samples))],
        }
        shutil.rmtree(where)

    def leaks(self) -> None:
        found = leftovers(self.before, self.runner_pids, self.registry, self.marker)
        self.figures["left_behind"] = {kind: len(items) for kind, items in found.items()}
        for kind, items in found.items():
            self.problems.check(not items, f"left behind: {kind}: {items[:5]}")


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def percentile(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="sequential runs (default 1000)")
    parser.add_argument("--concurrent", type=int, default=32, help="runs per concurrent round (default 32)")
    parser.add_argument("--rounds", type=int, default=5, help="concurrent rounds (default 5)")
    parser.add_argument(
        "--requests", type=int, default=2000, help="control requests to the long-lived run (default 2000)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pk-soak-"))
    soak = Soak(args, work)
    try:
        soak.sequential()
        soak.concurrent()
        soak.long_lived()
        soak.leaks()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(soak.figures, indent=2))
    for problem in soak.problems[:50]:
        print("PROBLEM:", problem, file=sys.stderr)
    print(f"{len(soak.problems)} problems", file=sys.stderr)
    return 1 if soak.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
