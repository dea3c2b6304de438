"""The batch process's CPU per job with two source trees side by side (issue 34 §5: one recorder
and a typed summary line must not make a job dearer), alternating the trees within each round.

Each round runs, for each tree in turn (``PYTHONPATH=TREE``), ``batch`` of N jobs of ``true``
(``--jobs 2``, ``--keep failed`` and then ``--keep all``) in a process of its own, and reads that
process's rusage (children excluded): its CPU per job. Prints each tree's median and the median
of the per-round ratios (new / old). With ``--line`` it times instead, in each tree's process,
making and encoding one finished job's line from its three events (the recorder's share of a
job, too small to see in the batch's whole CPU on a loaded machine): the median of 7 passes of
20,000, in microseconds. An old tree is a checkout exported by ``git archive`` with the built
``_native`` module copied in.

    git archive BASE | tar -x -C /tmp/old && cp processkit/_native.abi3.so /tmp/old/processkit/
    python3 bench/batch_recorder.py /tmp/old . [N] [ROUNDS]
    python3 bench/batch_recorder.py --line /tmp/old . [ROUNDS]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = (
    "import resource, sys; from processkit.cli.main import main; rc = main(sys.argv[1:]);"
    "u = resource.getrusage(resource.RUSAGE_SELF); print(u.ru_utime + u.ru_stime, file=sys.stderr); sys.exit(rc)"
)


# One job's line made and encoded, in a tree of either shape: the typed line (job_lines.ran)
# from the events as the emitter keeps them (objects), or the dict line (summary.summary_line)
# from their encoded bytes.
LINE = """
import json, statistics, time
from processkit.batching.manifest import jobs_from
from processkit.engine.endings import Outcome
from processkit.jsontext import dumps
captured = {"path": "o/j/capture/stdout.log", "bytes": 3, "bytes_seen": 3, "bytes_written": 3,
            "sha256": "9" * 64, "truncated": False, "write_error": False}
events = [
    {"schema_version": 1, "time": "2026-12-01T22:38:44.924Z", "event": "resource_summary", "read_error": False,
     "peak_memory_bytes": 262144, "total_cpu_ms": 0, "io_read_bytes": None, "io_write_bytes": None,
     "peak_process_count": 1},
    {"schema_version": 1, "time": "2026-12-01T22:38:44.927Z", "event": "output_captured", "stdout": captured,
     "stderr": {**captured, "path": "o/j/capture/stderr.log"}},
    {"schema_version": 1, "time": "2026-12-01T22:38:44.927Z", "event": "runner_exit", "code": 0,
     "source": "child_exit", "child_code": 0},
]
job = jobs_from([{"args": ["true"], "id": "j"}])[0]
outcome = Outcome(0)
outcome.started_ns, outcome.ended_ns = time.monotonic_ns() - 5_000_000, time.monotonic_ns()
try:
    from processkit.batching import summary
except ImportError:
    summary = None
if summary is not None:
    outcome.written = {e["event"]: dumps(e).encode() + b"\\n" for e in events}
    def one():
        line = summary.summary_line(job, "run-1", 1, outcome, summary.written_objects(outcome))
        return dumps(line).encode() + b"\\n"
else:
    from processkit.batching import job_lines
    outcome.remembered = {e["event"]: e for e in events}
    def one():
        return job_lines.ran(job, "run-1", 1, outcome, outcome.remembered).encode()
passes = []
for _ in range(7):
    started = time.perf_counter()
    for _ in range(20000):
        one()
    passes.append((time.perf_counter() - started) / 20000 * 1e6)
print(statistics.median(passes))
"""


def line_us(tree: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    proc = subprocess.run([sys.executable, "-c", LINE], env=env, capture_output=True, check=True)
    return float(proc.stdout)


def line_main(old: str, new: str, rounds: int) -> None:
    figures: dict[str, list[float]] = {"old": [], "new": []}
    for round_ in range(rounds):
        for name, tree in [("old", old), ("new", new)] if round_ % 2 == 0 else [("new", new), ("old", old)]:
            figures[name].append(line_us(tree))
    for name, values in figures.items():
        print(f"one line, {name}: {statistics.median(values):.1f} µs ({', '.join(f'{v:.1f}' for v in values)})")
    ratios = [b / a for a, b in zip(figures["old"], figures["new"])]
    print(f"one line, new/old: {statistics.median(ratios):.3f}")


def batch_cpu(tree: str, manifest: Path, out: Path, keep: str) -> float:
    """The batch process's CPU seconds for one batch run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    argv = [sys.executable, "-c", CHILD, "batch", str(manifest), "--out", str(out), "--jobs", "2", "--keep", keep]
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    shutil.rmtree(out)
    return float(proc.stderr.decode().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--line"]:
        line_main(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 7)
        return
    old, new = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    work = Path(tempfile.mkdtemp(prefix="bench-recorder-"))
    manifest = work / "true.jsonl"
    manifest.write_text("".join(json.dumps({"args": ["true"]}) + "\n" for _ in range(count)))
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(rounds):
            trees = [("old", old), ("new", new)] if round_ % 2 == 0 else [("new", new), ("old", old)]
            for keep in ("failed", "all"):
                for name, tree in trees:
                    cpu = batch_cpu(tree, manifest, work / f"out-{name}", keep)
                    figures.setdefault((keep, name), []).append(cpu / count * 1000)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for keep in ("failed", "all"):
        olds, news = figures[(keep, "old")], figures[(keep, "new")]
        for name, values in (("old", olds), ("new", news)):
            shown = ", ".join(f"{v:.3f}" for v in values)
            print(f"--keep {keep:6} {name}: {statistics.median(values):.3f} ms CPU/job ({shown})")
        ratios = [b / a for a, b in zip(olds, news)]
        print(
            f"--keep {keep:6} new/old: {statistics.median(ratios):.3f} (pairs: {', '.join(f'{r:.3f}' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
