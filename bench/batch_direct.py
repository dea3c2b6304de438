"""What a batch job of `true` costs the batch process without the engine's run path: the upper
bound of a batch fast path that keeps the containment's Python (the pool's lent groups: take,
restart, usage, give) and the native spawn, and drops the engine's generic machinery (its
events, loop turns, scheduler, race, teardown steps, pumps' objects, stream).

Each job here, one at a time: a lodged job slot, `containment.create` (the pool's lent v2,
`cpuacct`, `memory` and `pids` groups), the native spawn with stdin on `/dev/null` and stdout and
stderr on pipes, `restart_ahead` while the child execs, the exec's report waited for in the
spawn, both pipes read to their end, a blocking `wait4`, the members' look, the usage read, the
release, and a JSON line of the job's figures written to a file. What a batch job does on top
and this leaves out: its eight events, the members snapshot, the loop, the race and teardown
steps, the captures' memfds and digests, the summary line's other fields, the progress line,
the manifest's reading. So it is a floor under any per-job path that keeps the containment as it
is in Python; `bench/batch_floor.py` is the floor with nothing of processkit's.

Alternates with `batch_cpu.py`'s batch at `--jobs 1` (the same N × `true`) round by round, each
in a process of its own run by this interpreter; the batch process's own CPU a job (children
excluded), medians of the rounds and of the rounds' ratios.

    python3 bench/batch_direct.py [N] [ROUNDS]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile


def direct(count: int) -> float:
    """``count`` jobs of ``true`` the direct way in this process: its own CPU a job, ms."""
    from processkit import containment
    from processkit.engine import spawn
    from processkit.engine.host import Host
    from processkit.spec import NO_LIMITS, StdinMode

    host = Host()
    host.lodge(f"direct-batch-{os.getpid()}")
    assert host.lodging is not None
    env = dict(os.environ)
    directory = tempfile.mkdtemp(prefix="pk-batch-direct-")
    summary = os.open(os.path.join(directory, "summary.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        for number in range(count):
            env["PROCESSKIT_RUN_ID"] = f"direct-{number}"
            slot = host.lodging.slot()
            container = containment.create(NO_LIMITS, slot, True)
            starting = spawn.begin(
                ["true"], env=env, cwd=None, container=container, stdin=StdinMode.NULL, pipe_output=True,
                backend="native", passed=(),
            )  # fmt: skip
            container.cloned(starting.pid)
            containment.restart_ahead(slot)
            while not starting.until_signal(-1):
                pass
            child = starting.child()
            container.adopt(child.pid)
            for fd in (child.stdout, child.stderr):
                assert fd is not None, "pipe_output: both are pipes"
                while os.read(fd, 65536):
                    pass
                os.close(fd)
            status = child.wait()
            if child.pidfd is not None:
                os.close(child.pidfd)
            if container.member_pids():
                container.kill_all()
            usage = container.usage()
            container.release()
            slot.close()
            line = {"id": f"job-{number}", "exit_code": status, "resources": usage.resource_summary()}
            os.write(summary, (json.dumps(line) + "\n").encode())
    finally:
        after = resource.getrusage(resource.RUSAGE_SELF)
        os.close(summary)
        host.close()
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / count * 1000


def batch(count: int) -> float:
    """``batch_cpu.py``'s batch at ``--jobs 1`` in a process of its own: its CPU a job, ms."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_cpu.py")
    said = subprocess.run(
        [sys.executable, script, str(count), "--keep", "failed", "--jobs", "1"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return float(said[1]) + float(said[4])  # "user U ms/job  sys S ms/job ..."


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--direct":
        print(direct(int(sys.argv[2])))
        return
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    figures: dict[str, list[float]] = {"batch": [], "direct": []}
    for number in range(rounds):
        load = os.getloadavg()[0]
        figures["batch"].append(batch(count))
        said = subprocess.run([sys.executable, __file__, "--direct", str(count)], check=True, capture_output=True)
        figures["direct"].append(float(said.stdout))
        print(
            f"round {number + 1} (load {load:.1f}): batch {figures['batch'][-1]:.3f} ms, direct {figures['direct'][-1]:.3f} ms"
        )
    ratios = [d / b for d, b in zip(figures["direct"], figures["batch"])]
    print(
        f"batch {statistics.median(figures['batch']):.3f} ms a job, direct {statistics.median(figures['direct']):.3f} ms;"
        f" direct / batch, rounds' median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
