"""`processkit-cli batch` side by side with GNU parallel and xargs (issue 26's targets).

Each round runs, back to back on the same machine:
- `batch`: N jobs of `true`, `--jobs 2`, a JSONL stream and capture per job;
- GNU parallel `-j2 --joblog` running `true`;
- `xargs -P2` running `processkit-cli run --jsonl F -- true` (a tenth of N: it is slow);
- the big-output case: 200 jobs each writing 5 MB, `--jobs 4`, with capture (every digest
  checked against hashlib), against the same jobs through GNU parallel into files;
and reports jobs per second, the batch process's CPU per job (its rusage, children excluded)
and its peak RSS, then the ratios. Medians over ROUNDS rounds.

With ``--keep`` (issue 35) it runs instead, alternating within each round:
- `batch --keep failed` against `parallel -j2 --joblog` (N × `true`, `-j2`);
- `batch --keep all` against `parallel -j2 --joblog --results DIR` (a peer that also writes
  per-job files);
- the skewed manifest (one 4 s job among 40 × 0.1 s, `-j2`, `--history` from a first pass):
  its makespan against the bound max(longest, total / 2).

    python3 bench/batch.py [N] [ROUNDS]
    python3 bench/batch.py --keep [N] [ROUNDS] [--before TREE]

``--before TREE`` (with ``--keep``): an older checkout's source (``git archive REV | tar -x -C
TREE``, its ``processkit/_native*.so`` copied in) runs both --keep modes in turn with this one's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_trees

CLI = str(Path(sys.executable).parent / "processkit-cli")
BIG = 5 * 1024 * 1024


def timed(argv, **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - started


def batch_run(manifest: Path, out: Path, jobs: int, *extra: str, tree: str | None = None) -> tuple[float, float, float]:
    """Wall seconds, the batch process's CPU seconds and its peak RSS (MiB); ``tree``: a source
    tree to run instead of this checkout's (first on the path)."""
    code = (
        "import resource, sys; sys.argv = sys.argv[1:];"
        "from processkit.cli.main import main; rc = main(sys.argv[1:]);"
        "u = resource.getrusage(resource.RUSAGE_SELF);"
        "print(u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr); sys.exit(rc)"
    )
    if tree is not None:
        code = f"import sys; sys.path.insert(0, {tree!r}); " + code
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, CLI, "batch", str(manifest), "--out", str(out), "--jobs", str(jobs), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
    )
    wall = time.perf_counter() - started
    cpu, rss = proc.stderr.decode().splitlines()[-1].split()
    return wall, float(cpu), int(rss) / 1024


def write_manifest(path: Path, jobs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return path


def check_digests(out: Path) -> int:
    wrong = 0
    for line in (out / "summary.jsonl").read_text().splitlines():
        entry = json.loads(line)
        info = entry["capture"]["stdout"]
        data = Path(info["path"]).read_bytes()
        wrong += info["sha256"] != hashlib.sha256(data).hexdigest() or len(data) != BIG or entry["exit_code"] != 0
    return wrong


def makespan(summary: Path) -> float:
    """From the first job's start to the last one's end, by the summary's own figures."""
    from datetime import datetime

    spans = []
    for line in summary.read_text().splitlines():
        entry = json.loads(line)
        start = datetime.fromisoformat(entry["started_at"].replace("Z", "+00:00")).timestamp()
        spans.append((start, start + entry["duration_ms"] / 1000))
    return max(end for _, end in spans) - min(start for start, _ in spans)


def keep_rounds(work: Path, count: int, rounds: int, note, before: str | None = None) -> None:
    """Issue 35's figures: the two --keep modes against their peers, and the skewed makespan;
    with ``before`` (a source tree), that tree's two --keep runs in turn with this one's."""
    trues = write_manifest(work / "true.jsonl", [{"args": ["true"]} for _ in range(count)])
    seq = "\n".join(str(n) for n in range(count)).encode() + b"\n"
    skewed_jobs = [{"args": ["sleep", "0.1"], "id": f"short{n}"} for n in range(40)]
    skewed_jobs.insert(20, {"args": ["sleep", "4"], "id": "long"})
    skewed = write_manifest(work / "skewed.jsonl", skewed_jobs)
    batch_run(skewed, work / "history", 2)  # the history: one pass in manifest order
    history = str(work / "history" / "summary.jsonl")
    bound = max(4.0, (4.0 + 40 * 0.1) / 2)
    for round_ in range(rounds):
        out = work / f"failed-{round_}"
        wall, cpu, _ = batch_run(trues, out, 2, "--keep", "failed")
        note("keep failed: batch jobs/s", count / wall)
        note("keep failed: batch CPU ms/job", cpu / count * 1000)
        shutil.rmtree(out)
        if before is not None:
            for keep in ("failed", "all"):
                wall, cpu, _ = batch_run(trues, out, 2, "--keep", keep, tree=before)
                note(f"before: keep {keep}: batch jobs/s", count / wall)
                note(f"before: keep {keep}: batch CPU ms/job", cpu / count * 1000)
                shutil.rmtree(out)
        wall = timed(["parallel", "-j2", "--joblog", str(work / "joblog"), "true"], input=seq)
        note("keep failed: parallel jobs/s", count / wall)
        out = work / f"all-{round_}"
        wall, cpu, _ = batch_run(trues, out, 2, "--keep", "all")
        note("keep all: batch jobs/s", count / wall)
        note("keep all: batch CPU ms/job", cpu / count * 1000)
        shutil.rmtree(out)
        results = work / "results"
        wall = timed(
            ["parallel", "-j2", "--joblog", str(work / "joblog"), "--results", str(results), "true"], input=seq
        )
        note("keep all: parallel --results jobs/s", count / wall)
        shutil.rmtree(results)
        out = work / f"skewed-{round_}"
        wall, _, _ = batch_run(skewed, out, 2, "--history", history, "--keep", "failed")
        span = makespan(out / "summary.jsonl")
        note("skewed: makespan s (first start to last end)", span)
        note("skewed: makespan / bound", span / bound)
        note("skewed: batch wall / bound (start-up, page)", wall / bound)
        shutil.rmtree(out)


def keep_main(count: int, rounds: int, before: str | None = None) -> None:
    figures: dict[str, list[float]] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        keep_rounds(work, count, rounds, lambda name, value: figures.setdefault(name, []).append(value), before)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in medians.items():
        print(f"{name:36} {value:10.3f}   ({', '.join(f'{v:.3f}' for v in figures[name])})")
    for name, ours, theirs in (
        ("keep failed / parallel --joblog", "keep failed: batch jobs/s", "keep failed: parallel jobs/s"),
        ("keep all / parallel --results", "keep all: batch jobs/s", "keep all: parallel --results jobs/s"),
    ):
        pairs = [a / b for a, b in zip(figures[ours], figures[theirs])]  # each round's pair, side by side
        print(
            f"{name:36} {medians[ours] / medians[theirs]:10.2f}x of medians; pairs' median "
            f"{statistics.median(pairs):.2f}x ({', '.join(f'{r:.2f}' for r in pairs)})"
        )


def main() -> None:
    if sys.argv[1:2] == ["--keep"]:
        del sys.argv[1]
        before = None
        if "--before" in sys.argv:  # --before TREE: an older source tree's --keep runs beside this one's
            at = sys.argv.index("--before")
            before = os.path.abspath(sys.argv[at + 1])
            del sys.argv[at : at + 2]
        compile_trees(before)
        keep_main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 3, before)
        return
    compile_trees()
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    figures: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        trues = write_manifest(work / "true.jsonl", [{"args": ["true"]} for _ in range(count)])
        writer = f"import sys; sys.stdout.buffer.write(b'x' * {BIG})"
        bigs = write_manifest(work / "big.jsonl", [{"args": [sys.executable, "-c", writer]} for _ in range(200)])
        seq = "\n".join(str(n) for n in range(count)).encode() + b"\n"
        for round_ in range(rounds):
            out = work / f"out-{round_}"
            wall, cpu, rss = batch_run(trues, out, 2)
            note("batch jobs/s", count / wall)
            note("batch CPU ms/job", cpu / count * 1000)
            note("batch peak RSS MiB", rss)
            shutil.rmtree(out)
            wall = timed(["parallel", "-j2", "--joblog", str(work / "joblog"), "true"], input=seq)
            note("parallel jobs/s", count / wall)
            few = count // 10
            streams = work / "streams"
            streams.mkdir(exist_ok=True)
            script = f'exec {CLI} run --jsonl {streams}/"$1".jsonl -- true'
            few_seq = "\n".join(str(n) for n in range(few)).encode() + b"\n"
            wall = timed(["xargs", "-P2", "-n1", "sh", "-c", script, "sh"], input=few_seq)
            note("xargs+run jobs/s", few / wall)
            shutil.rmtree(streams)
            out = work / f"big-{round_}"
            wall, _, _ = batch_run(bigs, out, 4)
            note("big: batch wall s", wall)
            note("big: wrong digests", check_digests(out))
            shutil.rmtree(out)
            files = work / "files"
            files.mkdir()
            jobs = "\n".join(str(n) for n in range(200)).encode()
            command = f"{shlex.quote(sys.executable)} -c {shlex.quote(writer)} > {files}/{{}}.out"
            wall = timed(["parallel", "-j4", command], input=jobs)
            note("big: parallel wall s", wall)
            shutil.rmtree(files)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in medians.items():
        print(f"{name:28} {value:10.2f}   ({', '.join(f'{v:.2f}' for v in figures[name])})")
    print(f"{'batch / parallel':28} {medians['batch jobs/s'] / medians['parallel jobs/s']:10.2f}x")
    print(f"{'batch / xargs+run':28} {medians['batch jobs/s'] / medians['xargs+run jobs/s']:10.2f}x")
    print(f"{'big: batch / parallel wall':28} {medians['big: batch wall s'] / medians['big: parallel wall s']:10.2f}x")


if __name__ == "__main__":
    main()
