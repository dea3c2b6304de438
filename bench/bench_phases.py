"""Where the wall between one `bench` sample's exit and the next one's clone goes, by phase.

Runs `processkit-cli bench ARGS` in this interpreter (use an install's own python), with
monotonic stamps taken around the steps between two samples: the root's exit (the kernel's
record, the exit clock's), the runner's wake-up after it (the spawn's linger returning, or the
host's `epoll_wait`), the
engine's tree read and release, `host.carry` returning, `bench`'s work after the run and the
session's between two runs, `bench`'s set-up of the next run, the containment's (`launch.prepare`)
and the spawn's request up to the clone's return. Medians over the samples. The stamps wrap the
engine's functions from outside, so a rename there breaks this script, not the engine. The
samples go through the engine's run path (``PROCESSKIT_BENCH_PATH=engine`` is set here: `bench`'s
direct sample, `benchmark/direct.py`, has no `host.carry` nor release step to stamp).

    X/bin/python bench/bench_phases.py -N --runs 200 --style none 'sleep 0.02'

Options before `bench`'s own (each for an A/B in one tree, run alternately; never a user's setting):
``--calls``: also each containment call's median in the same run (the pool's take and give by
controller, the usage and release; bench's own steps between two samples: the counters' read, the
exit clock's open and read, the leftovers' look, the drain, ``measured_from``, ``run_spec``, the
stop check), a call's own wall with its stamps' cost (~1 us);
``--linger MS``: the spawn's linger set to MS instead of `driver.LINGER_MS` (a command shorter
than it is then collected by the linger's poll, with no loop turn);
``--no-orphan-watch``: the host never watches SIGCHLD for its adopted orphans, so a root's exit
wakes the runner by its pidfd alone (an orphan is then left a zombie until the end: measurement only).

    X/bin/python bench/bench_phases.py --calls -N --runs 200 --style none 'sleep 0.02'
    X/bin/python bench/bench_phases.py --linger 40 -N --runs 200 --style none 'sleep 0.02'
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from processkit.benchmark import driver, exit_clock
from processkit.cli import main as cli
from processkit.engine import launch, runner, spawn_native
from processkit import readiness
from processkit.containment import Container, pool
from processkit.engine import signals
import processkit.engine.teardown as teardown
import processkit.engine.tree_end as tree_end

os.environ["PROCESSKIT_BENCH_PATH"] = "engine"  # the steps stamped below are the engine's run path's

stamp = time.monotonic_ns
samples: list[dict] = []
current: dict = {}
calls: dict[str, list[int]] = {}  # ``--calls``: each timed call's walls (ns), by label


def wrap(owner, name: str, before: str | None = None, after: str | None = None, keep=None) -> None:
    """``owner.name`` replaced by a call stamped ``before`` it and ``after`` it."""
    original = getattr(owner, name)

    def stamped(*args, **kwargs):
        if before:
            current[before] = stamp()
        value = original(*args, **kwargs)
        if after:
            current.setdefault(after, []).append(stamp()) if after.endswith("s") else current.__setitem__(
                after, stamp()
            )
        if keep is not None:
            keep(value)
        return value

    setattr(owner, name, stamped)


def measure_wrapper(original):
    def measure(self, argv, jsonl=None, iteration=None, output=None):
        global current
        current = {"measure": stamp()}
        measured = original(self, argv, jsonl, iteration, output)
        current["measured"] = stamp()
        if output is not None and current.get("exit") is not None:
            samples.append(current)
        return measured

    return measure


driver.Engine.measure = measure_wrapper(driver.Engine.measure)
wrap(exit_clock.ExitClock, "read", before="carried", keep=lambda value: current.__setitem__("exit", value))
wrap(exit_clock.ExitClock, "open", after="carry")
wrap(readiness.Selector, "select", after="selects")
wrap(launch, "prepare", before="prepare", after="prepared")
runner.launch = launch
for owner, step in ((tree_end, "read_tree"), (teardown, "release")):
    wrap(owner, step, before=step)
    setattr(runner, step, getattr(owner, step))
wrap(spawn_native.Pending, "__init__", before="spawn", after="cloned")
# The spawn's linger returns at the exit, and the root is then most often collected with no loop
# turn (engine54): its return is a wake-up as ``epoll_wait``'s is.
wrap(spawn_native.Pending, "until_signal", after="selects")

# Each phase: the stamp it starts at | the one it ends at ("next": the following sample's) | its name.
PHASES = [
    tuple(part.strip() for part in line.split("|"))
    for line in """
exit | woken | the exit to the runner's wake-up (the spawn's linger, or epoll_wait)
woken | read_tree | the wake-up to the tree read (reap, race, report)
read_tree | release | the tree and usage reads, the teardown
release | carried | the release to host.carry's return
carried | measured | bench after the run (drain, exit clock, counters, leftovers)
measured | next measure | the session between two runs
next measure | next carry | bench's set-up of the next run
next carry | next prepare | the run's set-up up to the containment
next prepare | next prepared | the containment (launch.prepare)
next prepared | next spawn | up to the spawn's request
next spawn | next cloned | the request and the clone (Pending)
exit | next cloned | the exit to the next clone's return
""".strip().splitlines()
]


def timed(owner, name: str, label=None, static: bool = False) -> None:
    """``owner.name`` timed into ``calls``, under ``label(args)`` (default: its name);
    ``static``: a static method's, kept one."""
    original = getattr(owner, name)

    def call(*args, **kwargs):
        began = stamp()
        try:
            return original(*args, **kwargs)
        finally:
            calls.setdefault(label(*args, **kwargs) if label else name, []).append(stamp() - began)

    setattr(owner, name, staticmethod(call) if static else call)


def kinds(controllers) -> str:
    return ",".join(controllers)


def time_calls() -> None:
    timed(pool.Pool, "take", lambda self, parent, controllers: f"take [{kinds(controllers)}]")
    timed(pool.Pool, "give", lambda self, group: f"give [{kinds(group.controllers)}]")
    timed(pool.Pool, "restart_ahead")
    timed(Container, "usage")
    timed(Container, "release")
    # bench's own steps between two samples, each a candidate to move off the gap (perf63bench)
    from processkit.benchmark import counters, outputs
    from processkit.containment import leftovers

    timed(counters.Opener, "read", lambda fds: "counters read", static=True)
    timed(exit_clock.ExitClock, "read", lambda self, rings: "exit clock read")
    timed(exit_clock.ExitClock, "open", lambda self: "exit clock open")
    timed(leftovers, "end_descendants", lambda **kwargs: "leftovers look")
    timed(outputs.SessionOutputs, "drain", lambda self: "output drain")
    timed(driver, "measured_from", lambda outcome: "measured_from")
    timed(driver, "run_spec", lambda *args, **kwargs: "run_spec")
    timed(driver.Engine, "stopped", lambda self: "stopped")


def without_orphan_watch() -> None:
    watch_for_host = signals.watch_for_host

    def unwatched(loop, stop, reaper, *rest, **kwargs):
        watch = watch_for_host(loop, stop, reaper, *rest, **kwargs)
        reaper.wants_sigchld = None
        return watch

    import processkit.engine.host as host

    host.watch_for_host = unwatched


def options(argv: list[str]) -> list[str]:
    """This script's own options taken off the front of ``argv``; the rest is ``bench``'s."""
    while argv and argv[0] in ("--calls", "--linger", "--no-orphan-watch"):
        option = argv.pop(0)
        if option == "--calls":
            time_calls()
        elif option == "--linger":
            driver.LINGER_MS = int(argv.pop(0))
        else:
            without_orphan_watch()
    return argv


def main() -> None:
    argv = options(sys.argv[1:])
    try:
        cli.main(["bench", *argv])
    except SystemExit:
        pass
    rows: dict[str, list[int]] = {label: [] for _, _, label in PHASES}
    for sample, following in zip(samples, samples[1:]):
        woken = [at for at in sample.get("selects", []) if at > sample["exit"]]
        if not woken:
            continue
        marks = {**sample, "woken": woken[0]}
        marks.update(
            {f"next {key}": following[key] for key in ("measure", "carry", "prepare", "prepared", "spawn", "cloned")}
        )
        for start, end, label in PHASES:
            rows[label].append(marks[end] - marks[start])
    print(f"{len(rows[PHASES[0][2]])} gaps, load average {os.getloadavg()[0]:.1f}; medians (us):")
    for label, values in rows.items():
        print(f"  {label}: {statistics.median(values) / 1e3:.1f}")
    for label, values in sorted(calls.items()):
        print(
            f"  call {label}: {statistics.median(values) / 1e3:.1f} (x{len(values) / max(len(samples), 1):.1f} a sample)"
        )


if __name__ == "__main__":
    main()
