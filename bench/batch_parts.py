"""Where the batch process's CPU per job goes, by part of the run: ``bench/batch_cpu.py`` run in
this process with the parts below each timed on the process's CPU clock (user + system; a part
called inside another counts in both), printed per job beside the whole process's CPU.

    PYTHONPATH=TREE python3 bench/batch_parts.py 1000 --keep failed 2>/dev/null
    PYTHONPATH=TREE python3 bench/batch_parts.py --layers 1000 --keep failed 2>/dev/null

``--layers`` times ``LAYERS`` instead: the engine's phases of a run and the host's loop around
them (its turns, the signals and reaps after each, the next job taken, a job's end recorded).

Lighter than cProfile, which multiplies the cost of every small call, so the shares are those of
a batch run as it is (the wrappers' own cost, about 0.2 µs a call, included).
"""

from __future__ import annotations

import collections
import importlib
import inspect
import os
import runpy
import sys
import time

PARTS = [
    ("processkit.containment", "create"),  # the run's groups: the pool's takes, the v2 group
    ("processkit.containment.pool", "Pool.take"),
    ("processkit.containment.pool", "Pool._restart_one"),  # a lent group's checks and restarts
    ("processkit.containment", "restart_ahead"),
    ("processkit.containment.pool", "Pool.give"),
    ("processkit.containment.base", "Container.usage"),  # the figures
    ("processkit.containment.base", "Container.release"),
    ("processkit.engine.state", "RunState.read_member_list"),  # the spawn's snapshot, the end's tree
    ("processkit.containment.members", "read_member"),  # a member found: its /proc/<pid>/stat, read and split
    ("processkit.containment.members", "read_stat"),
    ("processkit.engine.spawn", "begin"),  # the spawn, up to its clone (its exec's report is waited for on the loop)
    ("processkit.events.emitter", "Emitter.emit"),
    # The engine's whole run (a generator: each resumption timed), and the batch's own parts.
    # A name is timed where the batch looks it up: ``attempt`` imports the run's ``steps`` and
    # its helpers by name, ``on_host`` imports ``job_steps`` so.
    ("processkit.batching.attempt", "steps"),
    ("processkit.batching.on_host", "job_steps"),  # the batch's wiring around the run's steps
    ("processkit.batching.manifest", "read"),  # the check pass, once per batch
    ("processkit.batching.manifest", "job_from"),  # both passes
    ("processkit.batching.manifest", "Manifest.__iter__"),  # the pass as the jobs start
    ("processkit.batching.attempt", "job_spec"),
    ("processkit.batching.attempt", "ensure_directory"),
    ("processkit.batching.attempt", "settle"),
    ("processkit.engine.reaper", "Reaper._reap_each"),  # a peek that showed a claimed child: the kernel's list walked
    ("processkit.batching.job_lines", "ran"),
    ("processkit.batching.recorder", "Recorder.record"),
    ("processkit.summary_line", "JobLine.encode"),
    ("processkit.cli.batch_progress", "Progress.finished"),
]


LAYERS = [
    ("processkit.engine.launch", "prepare"),  # the run's state, stream, captures, container
    ("processkit.engine.launch", "start"),  # the spawn, the exec's report, the spawn's snapshot
    ("processkit.engine.launch", "connect"),  # the pumps
    ("processkit.engine.runner", "_phases"),  # the run from its setup to its outcome
    ("processkit.engine.runner", "_finish"),  # the teardown, the figures, the last events
    ("processkit.engine.runner", "_release"),
    ("processkit.batching.attempt", "steps"),
    ("processkit.batching.on_host", "job_steps"),
    ("processkit.engine.scheduler", "Scheduler._fill"),  # the next job taken (the manifest, its spec)
    ("processkit.engine.scheduler", "Scheduler._ended"),  # a job's end: its line, record, progress
    ("processkit.batching.job_lines", "ran"),
    ("processkit.batching.recorder", "Recorder.record"),
    ("processkit.loop", "Loop.run_once"),  # a turn of the loop: the wait, the callbacks
    ("processkit.readiness", "Selector.select"),
    ("processkit.engine.host", "Host.turned"),  # the signals caught in the turn (a job's SIGCHLD)
    ("processkit.engine.host", "Host.settled"),  # the reap held to the turn's end
    ("processkit.containment", "create"),
    ("processkit.engine.spawn", "begin"),
]


def timed(spent: collections.Counter, key: str, real):
    def part(*args, **kwargs):
        started = time.process_time()
        try:
            result = real(*args, **kwargs)
        finally:
            spent[key] += time.process_time() - started
        return resumed(spent, key, result) if inspect.isgenerator(result) else result

    return part


def resumed(spent: collections.Counter, key: str, generator):
    """A generator (a run's steps) timed at each resumption, not while it waits; what is thrown
    into it is handed on."""
    sent, raised = None, None
    while True:
        started = time.process_time()
        try:
            value = generator.send(sent) if raised is None else generator.throw(raised)
        except StopIteration as stop:
            return stop.value
        finally:
            spent[key] += time.process_time() - started
        sent, raised = None, None
        try:
            sent = yield value
        except GeneratorExit:
            generator.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown into the run: handed on
            raised = exc


def main() -> None:
    spent: collections.Counter = collections.Counter()
    parts = PARTS
    if sys.argv[1:2] == ["--layers"]:
        parts = LAYERS
        del sys.argv[1]
    for module_name, name in parts:
        owner = importlib.import_module(module_name)
        attribute = name
        if "." in name:
            class_name, attribute = name.split(".")
            owner = getattr(owner, class_name)
        setattr(owner, attribute, timed(spent, name, getattr(owner, attribute)))
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    sys.argv = ["batch_cpu.py", *sys.argv[1:]]
    started = time.process_time()
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_cpu.py"), run_name="__main__")
    total = time.process_time() - started
    for name, seconds in spent.most_common():
        print(f"{name:36s} {seconds / count * 1e6:7.1f} µs/job  {seconds / total:6.1%}")
    print(f"{'the whole process':36s} {total / count * 1e6:7.1f} µs/job")


if __name__ == "__main__":
    main()
