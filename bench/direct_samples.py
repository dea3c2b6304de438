"""What a `bench` sample costs without the engine's run path: the upper bound of a sample loop
that bypasses the engine (its events, loop, scheduler, race, teardown steps, publication) and
keeps the containment's Python (the pool's take and give, the usage read) and the native spawn.

Each sample here: the counters and the exit clock opened as `bench` opens them, a lodged job
slot, `containment.create` (the pool's lent groups), the native spawn with `bench`'s linger,
the exec's report, a blocking `wait4` (rusage), the members' look, the usage read, the
container's release, the slot's close, the counters read and closed, the exit clock read. What
a `bench` sample does on top and this leaves out: the run's events, its loop turns, its
publication timer, the stop-signal watch, the teardown's kill and confirmation, the output's
drain, the leftovers' look. So it is a floor under any loop that keeps the containment in
Python; `bench/sample_floor.py` is the floor with the containment's kernel work alone.

    python3 bench/direct_samples.py --rounds 5 --cli B/bin/processkit-cli
    python3 bench/direct_samples.py --sleep --rounds 7 --cli B/bin/processkit-cli
    python3 bench/direct_samples.py --cpu --rounds 5 --cli B/bin/processkit-cli
    python3 bench/direct_samples.py --steps 2000

Samples of `true` in 3 s (`bench`'s default `--min-time`); with `--sleep` the wall of 200 ×
`sleep 0.02` a sample, ms (200 runs less 20: the fixed start-up and end off; that fixed part
beside it, s); with `--cpu` the CPU a
sample of `true` of each tool's whole tree (2,500 runs less 500, so start-up and end are taken
off). Hyperfine, this loop (run by the interpreter the script runs under: its processkit is the
one measured), the loop with the steps a product path would add (`loop`'s ``contract``) and each
`--cli` alternate round by round; each figure's median, and the median
of its ratios to hyperfine's in the same round. `--steps N`: each step's median over N samples
of the loop in this process (no peer).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench_wall import timed  # a whole run's wall and CPU, its children's included


STEPS = (
    "counters, exit clock opened",
    "job slot, containment.create",
    "spawn.begin",
    "cloned, restart_ahead",
    "exec's report (the linger: the child's life)",
    "wait4",
    "members' look",
    "usage read",
    "release, slot closed",
    "counters and exit clock read",
)


def loop(
    argv: list[str], seconds: float, runs: int, steps: dict[str, list[int]] | None = None, contract: bool = False
) -> tuple[int, float, float]:
    """Samples of ``argv`` until ``seconds`` have passed (or ``runs`` were made): the count,
    the wall and this process's CPU (its own and its children's) a sample. ``steps``: each
    step's ns a sample appended to it (``STEPS``). ``contract``: the steps a product path would
    add, each cheaply: the host's signal watch, the child's exit waited for in a ``poll`` of its
    pidfd and the watch's wake-up pipe with a 50 ms timer (the publication's), the stdout
    through a pipe drained after each sample, the signals dispatched and the leftovers' look."""
    import select

    from processkit.containment import leftovers
    from processkit import signum
    from processkit.benchmark.counters import Opener
    from processkit.benchmark.exit_clock import ExitClock
    from processkit import containment
    from processkit.spec import NO_LIMITS
    from processkit.engine import spawn
    from processkit.engine.host import Host
    from processkit.spec import StdinMode

    host = Host()
    host.lodge(f"direct-{os.getpid()}")
    assert host.lodging is not None
    opener, clock = Opener(), ExitClock()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HYPERFINE_ITERATION": "0"}
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    spare, drained = leftovers.NOTHING, -1
    if contract:
        host.watch_signals()
        spare = leftovers.inherited()
        drained, written = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        os.close(null)
        null = written
    made, now = 0, time.perf_counter_ns
    before, cpu = time.monotonic(), os.times()
    deadline = before + seconds
    try:
        while made < runs and (runs != sys.maxsize or time.monotonic() < deadline):
            env["HYPERFINE_ITERATION"] = str(made)
            stamps = [now()]
            fds, rings = opener.open(), clock.open()
            stamps.append(now())
            slot = host.lodging.slot()
            container = containment.create(NO_LIMITS, slot, True)
            stamps.append(now())
            starting = spawn.begin(
                argv, env=env, cwd=None, container=container, stdin=StdinMode.NULL, pipe_output=False,
                backend="native", output_fd=null, linger_ms=5, passed=(),
            )  # fmt: skip
            stamps.append(now())
            container.cloned(starting.pid)
            containment.restart_ahead(slot)
            stamps.append(now())
            starting.until_signal(-1)
            child = starting.child()
            container.adopt(child.pid)
            stamps.append(now())
            if contract and child.pidfd is not None:
                waiting = select.poll()
                waiting.register(child.pidfd, select.POLLIN)
                waiting.register(host.signal_fd, select.POLLIN)
                while not any(fd == child.pidfd for fd, _ in waiting.poll(50)):
                    host.dispatch_signal_pipe()
            child.wait()
            if child.pidfd is not None:
                os.close(child.pidfd)
            stamps.append(now())
            if container.member_pids():
                container.kill_all()
            stamps.append(now())
            container.usage()
            stamps.append(now())
            container.release()
            slot.close()
            stamps.append(now())
            opener.read(fds)
            clock.read(rings)
            if contract:
                try:
                    while os.read(drained, 65536):
                        pass
                except BlockingIOError:
                    pass
                host.dispatch_caught_signals()
                leftovers.end_descendants(spare=spare)
            stamps.append(now())
            if steps is not None:
                for name, start, end in zip(STEPS, stamps, stamps[1:]):
                    steps.setdefault(name, []).append(end - start)
            made += 1
    finally:
        wall, after = time.monotonic() - before, os.times()
        os.close(null)
        if drained >= 0:
            os.close(drained)
        clock.close()
        opener.release()
        host.close()
        signum.signal(signum.SIGCHLD, signum.SIG_DFL)
    used = (after.user + after.system + after.children_user + after.children_system) - (
        cpu.user + cpu.system + cpu.children_user + cpu.children_system
    )
    return made, wall, used / max(made, 1)


def sample_count(head: list[str], command: str) -> int:
    """Samples a tool made of ``command`` in its default time (its JSON export's ``times``):
    ``head`` is ``["hyperfine"]`` or ``[cli, "bench"]``, the rest of the command line the same."""
    import json
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as export:
        subprocess.run(
            [*head, "-N", "--style", "none", "--export-json", export.name, command],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return len(json.load(open(export.name))["results"][0]["times"])


def argvs(clis: list[str], command: str, runs: int) -> dict[str, list[str]]:
    """Each tool's command line for ``runs`` samples of ``command`` (``true`` or ``sleep 0.02``)."""
    tail = ["-N", "--runs", str(runs), "--style", "none", command]
    got = {"hyperfine": ["hyperfine", *tail]}
    for cli in clis:
        got[cli] = [cli, "bench", *tail]
    child = [sys.executable, __file__, "--child", "--runs", str(runs), *(["--sleep"] if command != "true" else [])]
    got["direct loop"] = child
    got["direct loop, contract steps"] = [*child, "--contract"]
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sleep", action="store_true", help="200 x sleep 0.02, wall, instead of true's samples")
    parser.add_argument("--cli", action="append", default=[], help="a processkit-cli to run beside (repeatable)")
    parser.add_argument("--steps", type=int, help="N samples of true in this process: each step's median, no peer")
    parser.add_argument("--cpu", action="store_true", help="CPU a sample of true (the tree's, 2,500 runs less 500)")
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--contract", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps:
        steps: dict[str, list[int]] = {}
        before = os.times()
        made, wall, cpu = loop(["true"], 0, args.steps, steps)
        after = os.times()
        children = (after.children_user + after.children_system - before.children_user - before.children_system) / made
        for name in STEPS:
            print(f"{name}: {statistics.median(steps[name]) / 1000:.1f} us")
        print(f"{made} samples, {wall / made * 1e6:.0f} us wall and {cpu * 1e6:.0f} us CPU a sample (the child's too)")
        print(f"of it the children's: {children * 1e6:.0f} us")
        return
    if args.child:  # one round of the loop, in a process of its own
        command = ["sleep", "0.02"] if args.sleep else ["true"]
        if args.runs:
            made, wall, cpu = loop(command, 0, args.runs, contract=args.contract)
        else:
            made, wall, cpu = loop(command, 3.0, sys.maxsize, contract=args.contract)
        print(made, wall, cpu)
        return
    assert shutil.which("hyperfine"), "needs hyperfine"
    rows: dict[str, list[float]] = {}
    for index in range(args.rounds):
        load = os.getloadavg()[0]
        if args.cpu:  # ms of CPU a sample, start-up and end taken off by the difference of two counts
            short, long = argvs(args.cli, "true", 500), argvs(args.cli, "true", 2500)
            got = {name: (timed(long[name])[1] - timed(short[name])[1]) / 2000 * 1000 for name in short}
        elif args.sleep:  # ms a sample of the whole benchmark's wall: 200 runs less 20, so the fixed part is off
            short, long = argvs(args.cli, "sleep 0.02", 20), argvs(args.cli, "sleep 0.02", 200)
            got = {}
            for name in short:
                brief, whole = timed(short[name])[0], timed(long[name])[0]
                got[name] = (whole - brief) / 180 * 1000
                got[name + ", fixed (s)"] = brief - 20 * got[name] / 1000
        else:  # samples in 3 s
            got = {"hyperfine": float(sample_count(["hyperfine"], "true"))}
            for cli in args.cli:
                got[cli] = float(sample_count([cli, "bench"], "true"))
            out = subprocess.run([sys.executable, __file__, "--child"], check=True, capture_output=True)
            got["direct loop"] = float(out.stdout.split()[0])
        print(f"round {index + 1} (load {load:.1f}): " + ", ".join(f"{k}: {v:.3f}" for k, v in got.items()), flush=True)
        for key, value in got.items():
            rows.setdefault(key, []).append(value)
    for key, values in rows.items():
        median, base = statistics.median(values), statistics.median(rows["hyperfine"])
        if key.endswith(", fixed (s)"):  # near 0 for hyperfine: no ratio
            print(f"{key}: median {median:.3f}")
            continue
        ratios = [value / peer for value, peer in zip(values, rows["hyperfine"])]
        print(
            f"{key}: median {median:.3f}, {median / base:.3f}x hyperfine's median; rounds' ratios' median "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
