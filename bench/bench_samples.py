"""Samples of `bench -N true` in its default 3 s against hyperfine's, and the CPU a sample costs.

Both tools fix the count by their first run's time (`bench` since issue 49's bench54; before, by
its mean whole cycle so far), so each takes `--min-time` / that time samples and the benchmark's
wall is printed beside them: a tool whose work between samples is longer takes longer in all.

Each round runs every `processkit-cli` given (e.g. the tree before and after a change) and
`hyperfine -N true`, each with its default time budget, the order turning by one each round (the
side run second took 15-20 % fewer samples in either order, bench52); a sample's CPU is the whole tool's
(its own and its children's, `os.wait4`) over the samples it took. Reports the medians over
rounds and the per-round ratios' medians, so load from other work hits all sides alike.

    python3 bench/bench_samples.py --rounds 7 --cli A/bin/processkit-cli --cli B/bin/processkit-cli

`--split N` measures in this interpreter's processkit instead (run it with the install's own
python): N runs of `true` on one `bench` engine, each run's CPU on bench's thread split into the
engine's (`host.carry`) and bench's own around it, and then the session's output pipe against a
pipe per stream per run (the engine's pumps), alternating run by run.

    X/bin/python bench/bench_samples.py --split 1000

`--own N` splits the CPU a sample of `true` costs by whose it is (run it with the install's own
python): N runs on one `bench` engine in this interpreter, this process's user and system time
(`RUSAGE_SELF`: bench, the engine, the containment's system calls) apart from the children's
(`RUSAGE_CHILDREN`: `true` with its joins and exit), against `hyperfine -N --runs N true` whole
(its own and its children's, `os.wait4`), alternating for `--rounds` rounds. What is left of a
sample's CPU once bench's user time is taken off is what no rewrite of bench's Python can cut.

    X/bin/python bench/bench_samples.py --own 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def sampled(argv: list[str]) -> tuple[int, float, float]:
    """(samples, CPU seconds of the whole tool, wall seconds) of one benchmark exporting its result."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "b.json")
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            proc = subprocess.Popen([*argv[:2], "--export-json", out, *argv[2:]], stdout=sink, stderr=sink)
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{argv[0]} failed")
        with open(out) as handle:
            samples = len(json.load(handle)["results"][0]["times"])
    return samples, usage.ru_utime + usage.ru_stime, wall


def split(runs: int) -> None:
    """The engine's share of a sample's CPU against bench's own, then the output pipe's A/B."""
    import time

    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options

    engine = driver.Engine(Options())
    carried: list[int] = []
    carry = engine.host.carry

    def timed_carry(steps):
        started = time.thread_time_ns()
        try:
            return carry(steps)
        finally:
            carried.append(time.thread_time_ns() - started)

    engine.host.carry = timed_carry  # type: ignore[method-assign]
    whole: list[int] = []
    try:
        for index in range(runs + 20):
            started = time.thread_time_ns()
            engine.measure(("true",), None, str(index), "pipe")
            whole.append(time.thread_time_ns() - started)
        own = [w - c for w, c in zip(whole[20:], carried[20:])]
        print(f"CPU a run of true (median of {runs}): engine {statistics.median(carried[20:]) / 1e3:.1f} us, ", end="")
        print(f"bench around it {statistics.median(own) / 1e3:.1f} us")
        session = engine._outputs.descriptor
        sides: dict[str, list[int]] = {"a pipe per stream per run": [], "the session's pipe": []}
        for index in range(2 * runs):
            name = list(sides)[(index + index // 2) % 2]  # A B B A ...: neither side always first
            engine._outputs.descriptor = session if name == "the session's pipe" else lambda where: (None, False)
            started = time.thread_time_ns()
            engine.measure(("true",), None, str(index), "pipe")
            sides[name].append(time.thread_time_ns() - started)
        first, second = (statistics.median(values) / 1e3 for values in sides.values())
        print(f"--output pipe, bench's thread CPU a run: {first:.1f} us with {list(sides)[0]}, ", end="")
        print(f"{second:.1f} us with {list(sides)[1]} ({second / first:.3f})")
    finally:
        engine.close()
    print(f"load average {os.getloadavg()[0]:.1f}")


def own(runs: int, rounds: int) -> None:
    """Microseconds a sample, by whose CPU it is, bench in process against hyperfine whole."""
    import resource

    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options

    def in_process() -> tuple[float, ...]:
        engine = driver.Engine(Options(), ahead=True)
        try:
            for index in range(50):  # the pool's groups made, the counters' keepers opened
                engine.measure(("true",), None, str(index), "pipe")
            before = (
                time.monotonic(),
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
            for index in range(runs):
                engine.measure(("true",), None, str(index), "pipe")
            after = (
                time.monotonic(),
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
        finally:
            engine.close()
        (w0, s0, c0), (w1, s1, c1) = before, after
        spans = (w1 - w0, s1.ru_utime - s0.ru_utime, s1.ru_stime - s0.ru_stime, c1.ru_utime - c0.ru_utime)
        return tuple(span / runs * 1e6 for span in (*spans, c1.ru_stime - c0.ru_stime))

    def hyperfine() -> tuple[float, ...]:
        started = time.monotonic()
        argv = ["hyperfine", "-N", "--runs", str(runs), "--style", "none", "true"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        spans = (time.monotonic() - started, usage.ru_utime, usage.ru_stime)
        return tuple(span / runs * 1e6 for span in spans)

    ours: list[tuple[float, ...]] = []
    theirs: list[tuple[float, ...]] = []
    for round_ in range(rounds):  # alternating, the first side turning each round
        for side in (ours, theirs) if round_ % 2 == 0 else (theirs, ours):
            side.append(in_process() if side is ours else hyperfine())
    medians = [statistics.median(values) for values in zip(*ours)]
    print(f"a sample of true, us (medians of {rounds} rounds of {runs}):")
    print(
        "bench: cycle {:.0f}; its process user {:.0f}, system {:.0f}; the child user {:.0f}, system {:.0f}".format(
            *medians
        )
    )
    wall, user, system = (statistics.median(values) for values in zip(*theirs))
    print(f"hyperfine: cycle {wall:.0f}; user {user:.0f}, system {system:.0f} (its own and the child's)")
    cpu = sum(medians[1:])
    print(
        f"CPU a sample: bench {cpu:.0f}, less its process's user time {cpu - medians[1]:.0f}; hyperfine {user + system:.0f}"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cli", action="append", help="a processkit-cli to measure (repeatable)")
    parser.add_argument("--split", type=int, metavar="N", help="N runs in this interpreter's processkit (above)")
    parser.add_argument("--own", type=int, metavar="N", help="N runs: whose CPU a sample is (above)")
    args = parser.parse_args()
    if args.own:
        own(args.own, args.rounds)
        return
    if args.split:
        split(args.split)
        return
    if not args.cli:
        parser.error("--cli is needed (or --split)")
    sides = {cli: [cli, "bench", "-N", "--style", "none", "true"] for cli in args.cli}
    sides["hyperfine"] = ["hyperfine", "-N", "--style", "none", "true"]
    rounds: list[dict[str, tuple[int, float, float]]] = []
    names = list(sides)
    for round_ in range(args.rounds):  # the order turns by one each round: no side always second
        turn = round_ % len(names)
        rounds.append({name: sampled(sides[name]) for name in names[turn:] + names[:turn]})
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("| Side | samples | wall (s) | CPU per sample (ms) | samples / hyperfine's | CPU per sample / first side's |")
    print("|---|---|---|---|---|---|")
    first = args.cli[0]
    for name in sides:
        samples = statistics.median(r[name][0] for r in rounds)
        wall = statistics.median(r[name][2] for r in rounds)
        per = statistics.median(r[name][1] / r[name][0] * 1e3 for r in rounds)
        ratio = statistics.median(r[name][0] / r["hyperfine"][0] for r in rounds)
        cpu = statistics.median((r[name][1] / r[name][0]) / (r[first][1] / r[first][0]) for r in rounds)
        print(f"| {name} | {samples:.0f} | {wall:.2f} | {per:.3f} | {ratio:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
