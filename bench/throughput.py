"""Throughput, runner CPU, peak memory and start-up of processkit-cli, side by side.

Each figure compares two commands the way ``side_by_side.py`` does: alternate A B A B, measure
each run as a whole process (wall, CPU, peak RSS via ``os.wait4``), report medians and the
median of the pair-wise ratios A/B with their min-max. A comparison whose wall ratios spread
wider than ``--spread`` is run once more and the second series is the one reported.

Everything lives in a temporary directory: a regular (non-editable) install of this checkout in
a fresh venv (so a development install's import hooks cost nothing), the peer ``processkit-py``
in another venv, a line-oriented text file (~100-byte lines), a small-writes child compiled
with ``cc`` when there is one, and the capture output.

    python3 bench/throughput.py                   # everything (the peer alone takes ~30 min)
    python3 bench/throughput.py --only capture echo --size 256m -n 5
    python3 bench/throughput.py --table --size 512m -n 3 --lines 2000000   # issue 12's target table
    python3 bench/throughput.py --table --rows "native vs" "echo to"       # only those series

Peak RSS: a child's ``ru_maxrss`` starts at its parent's RSS when it was spawned (exec carries
the old address space's high-water mark over), so measured from this script no figure could read
below this script's own RSS. Runs are therefore started through a tiny launcher (C when ``cc``
exists, else Python) that waits for the command and reports the command's peak; wall and CPU
still come from ``measure()``, launcher included (about a millisecond). The start-up figure is
measured without it.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from side_by_side import measure  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LINE = 100

# The writers' end (after <stdio.h> and <sys/resource.h>): the process's own CPU seconds written
# to ``path``; 0 once written, else 1.
OWN_CPU_C = r"""
static int own_cpu_to(const char *path)
{
    struct rusage usage;
    FILE *out;
    getrusage(RUSAGE_SELF, &usage);
    out = fopen(path, "w");
    if (!out)
        return 1;
    fprintf(out, "%f\n", usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
            + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6);
    return fclose(out) != 0;
}
"""

SMALL_WRITES_C = (
    r"""
/* One write() per 100-byte line; at exit, its own CPU seconds go to argv[2]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
"""
    + OWN_CPU_C
    + r"""
int main(int argc, char **argv)
{
    long lines = argc > 2 ? atol(argv[1]) : 0;
    char line[100];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    for (long i = 0; i < lines; i++) {
        line[i % 64] = (char)('a' + i % 26);
        if (write(1, line, sizeof line) != (ssize_t)sizeof line)
            return 1;
    }
    return own_cpu_to(argv[2]);
}
"""
)

WRITER_C = (
    r"""
/* Writes argv[2] bytes to stdout in write() calls of argv[1] bytes; at exit, its own CPU seconds
 * go to argv[3] when given. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
"""
    + OWN_CPU_C
    + r"""
int main(int argc, char **argv)
{
    size_t size = argc > 2 ? strtoull(argv[1], NULL, 10) : 0;
    unsigned long long left = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    char *piece = malloc(size ? size : 1);
    if (!piece || !size)
        return 2;
    for (size_t i = 0; i < size; i++)
        piece[i] = (char)(i % 100 == 99 ? '\n' : 'a' + i % 26);
    while (left) {
        ssize_t count = write(1, piece, left < size ? (size_t)left : size);
        if (count <= 0)
            return 1;
        left -= (unsigned long long)count;
    }
    if (argc < 4)
        return 0;
    return own_cpu_to(argv[3]);
}
"""
)

# A line-at-a-time child: a line every argv[2] seconds, each carrying its CLOCK_MONOTONIC stamp.
LONE_LINES_PY = """
import sys, time
for _ in range(int(sys.argv[1])):
    sys.stdout.write(f"{time.monotonic():.9f}\\n")
    sys.stdout.flush()
    time.sleep(float(sys.argv[2]))
"""

PEAK_C = r"""
/* Runs argv[2..], writes its peak RSS in KiB (wait4) to argv[1], exits with its status. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct rusage usage;
    int status;
    FILE *out;
    pid_t pid;
    if (argc < 3)
        return 125;
    pid = fork();
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    if (pid < 0 || wait4(pid, &status, 0, &usage) < 0)
        return 125;
    out = fopen(argv[1], "w");
    if (!out)
        return 125;
    fprintf(out, "%ld\n", usage.ru_maxrss);
    if (fclose(out) != 0)
        return 125;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"""

PEAK_PY = (
    "import os, sys; pid = os.fork()\n"
    "if pid == 0: os.execvp(sys.argv[2], sys.argv[2:])\n"
    "_, status, usage = os.wait4(pid, 0); open(sys.argv[1], 'w').write(f'{usage.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))"
)

SMALL_WRITES_PY = """
import os, resource, sys
line = bytearray(b"x" * 99 + b"\\n")
for i in range(int(sys.argv[1])):
    line[i % 64] = 97 + i % 26
    os.write(1, line)
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[2], "w") as out:
    out.write(f"{usage.ru_utime + usage.ru_stime}\\n")
"""


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.lower()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def touch(size: int) -> None:
    """``size`` bytes of memory made (zeroed by the kernel) and given back, in this process.

    Why: on a VM whose freed guest pages are reported to the host (``virtio_balloon``'s free page
    reporting, about 2 s after they were freed), the first touch of a page taken from those faults
    on the host, inside whatever touches it: for a capture, the kernel's copy into the file's
    fresh pages, which then swings sixfold from run to run whichever pump runs. Pages just freed
    here are not yet reported, and the run's allocations take them, so each run starts from the
    same warm free memory (measured: bench/README.md, "Native against Python at 4 KiB, measured
    steadily"). The cost is this process's, not the measured run's.
    """
    if size:
        with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE):
            pass


class Bench:
    def __init__(self, args, work: Path):
        self.args = args
        self.work = work
        self.results: list[dict] = []
        self.peak_file = work / "peak-kib"
        self.touch = parse_size(args.touch)  # memory made and freed before each run (``touch``)
        self.launcher = self.compile("peak", PEAK_C) or [sys.executable, "-c", PEAK_PY]

    def compile(self, name: str, source: str) -> list[str] | None:
        """``source`` built with ``cc -O2``, or None without a compiler."""
        cc = shutil.which("cc")
        if not cc:
            return None
        path = self.work / f"{name}.c"
        path.write_text(source)
        subprocess.run([cc, "-O2", "-o", str(self.work / name), str(path)], check=True)
        return [str(self.work / name)]

    # -- preparation -----------------------------------------------------------------------------
    def venv(self, name: str, *packages: str) -> Path:
        """A fresh venv with ``packages`` pip-installed (regular installs, never editable)."""
        where = self.work / name
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        subprocess.run([str(where / "bin" / "pip"), "install", "-q", *packages], check=True)
        return where / "bin"

    def data(self, size: int) -> Path:
        """``size`` bytes of text in ~100-byte lines: a 1 MiB block of random lines, repeated."""
        path = self.work / "lines.txt"
        rng = random.Random(1)
        words = [
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)
        ]
        block = bytearray()
        while len(block) < 1 << 20:
            block += (" ".join(rng.choice(words) for _ in range(20))[: LINE - 1] + "\n").encode()
        with open(path, "wb") as out:
            for _ in range(size // len(block)):
                out.write(block)
            out.write(block[: size % len(block)])
        return path

    def small_writes_child(self) -> list[str]:
        binary = self.compile("smallwrites", SMALL_WRITES_C)
        if binary is None:
            print("no cc: the small-writes child is a Python os.write loop", file=sys.stderr)
        return binary or [sys.executable, "-c", SMALL_WRITES_PY]

    # -- measuring -------------------------------------------------------------------------------
    def series(
        self,
        name: str,
        a: list[str],
        b: list[str] | None,
        note: str = "",
        child_cpu: Path | None = None,
        n: int | None = None,
        warmup: int | None = None,
        launcher: bool = True,
    ) -> dict | None:
        """Alternate A B; with ``child_cpu``, each run's CPU is the runner's own (minus the child's).

        With ``launcher``, peak RSS is the command's own, through the launcher (see above). None
        when ``--rows`` leaves the series out.
        """
        if self.args.rows and not any(word in name for word in self.args.rows):
            return None
        prefix = [*self.launcher, str(self.peak_file)] if launcher else []
        n = n or self.args.n
        warmup = self.args.warmup if warmup is None else warmup
        for attempt in (1, 2):
            runs: list[list[dict]] = [[], []]
            commands = [a] + ([b] if b else [])
            for round_ in range(warmup + n):
                for index, argv in enumerate(commands):
                    touch(self.touch)
                    result = measure(prefix + argv)
                    if result["code"] != 0:
                        raise SystemExit(f"{name}: exit {result['code']} from {' '.join(argv)}")
                    if launcher:
                        result["rss_mib"] = int(self.peak_file.read_text()) / 1024
                    if child_cpu is not None:
                        result["cpu"] -= float(child_cpu.read_text())
                    if round_ >= warmup:
                        runs[index].append(result)
            row = summarize(name, runs, note)
            spread = row.get("wall_ratio_max", 0) - row.get("wall_ratio_min", 0)
            if b is None or spread <= self.args.spread * row["wall_ratio"] or attempt == 2:
                break
            print(f"{name}: wall ratios spread {spread:.2f}; running the series again", file=sys.stderr)
        row["attempts"] = attempt
        row["a"], row["b"] = " ".join(a), " ".join(b) if b else None
        self.results.append(row)
        print(render_row(row), flush=True)
        return row


def summarize(name: str, runs: list[list[dict]], note: str) -> dict:
    row = {"name": name, "note": note, "n": len(runs[0])}
    for side, results in zip("ab", runs):
        if not results:
            continue
        for key in ("wall", "cpu", "rss_mib"):
            row[f"{side}_{key}"] = statistics.median(r[key] for r in results)
    if runs[1]:
        for key in ("wall", "cpu"):
            ratios = [x[key] / y[key] for x, y in zip(*runs) if y[key] > 0]
            row[f"{key}_ratio"] = statistics.median(ratios)
            row[f"{key}_ratio_min"], row[f"{key}_ratio_max"] = min(ratios), max(ratios)
    return row


def render_row(row: dict) -> str:
    def side(s: str) -> str:
        return f"{row[s + '_wall']:.3f} s wall, {row[s + '_cpu']:.3f} s CPU, {row[s + '_rss_mib']:.1f} MiB"

    text = f"{row['name']}: A {side('a')}"
    if "b_wall" in row:
        text += (
            f" | B {side('b')} | A/B wall {row['wall_ratio']:.3f} ({row['wall_ratio_min']:.3f}-{row['wall_ratio_max']:.3f})"
            f", CPU {row['cpu_ratio']:.3f} ({row['cpu_ratio_min']:.3f}-{row['cpu_ratio_max']:.3f})"
        )
    return text + (f"  [{row['note']}]" if row["note"] else "")


def import_breakdown(python: Path, cli: Path, jsonl: Path, runs: int = 7, top: int = 12) -> list[tuple[str, float]]:
    """The heaviest top-level imports of ``run -- true`` (``-X importtime``), median of ``runs``."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        proc = subprocess.run(
            [str(python), "-X", "importtime", str(cli), "run", "--jsonl", str(jsonl), "--", "true"],
            capture_output=True,
            text=True,
            check=True,
        )
        total = 0.0
        for line in proc.stderr.splitlines():
            fields = line.split("|")
            if line.startswith("import time:") and len(fields) == 3 and fields[1].strip().isdigit():
                if not fields[2].startswith("  "):  # deeper levels are indented further
                    samples.setdefault(fields[2].strip(), []).append(int(fields[1]) / 1e6)
                    total += int(fields[1]) / 1e6
        samples.setdefault("(all top-level imports)", []).append(total)
    found = sorted(((module, statistics.median(times)) for module, times in samples.items()), key=lambda item: -item[1])
    return found[: top + 1]


FIGURES = ("startup", "capture", "echo", "small-writes", "idle", "rss", "peer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", help="size of the line-oriented file (default 1g)")
    parser.add_argument("--lines", type=int, default=3_000_000, help="lines the small-writes child writes")
    parser.add_argument("-n", type=int, default=7, help="counted runs of each side")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--touch", default="0", metavar="SIZE", help="memory made and freed before each run (e.g. 2g): see touch()"
    )
    parser.add_argument("--peer-runs", type=int, default=1, help="counted runs of each peer comparison (slow)")
    parser.add_argument(
        "--spread",
        type=float,
        default=0.25,
        help="re-run when max-min of the wall ratios exceeds this fraction of the median",
    )
    parser.add_argument("--only", nargs="+", choices=FIGURES, default=list(FIGURES))
    parser.add_argument("--work", help="parent directory for the temporary files (default: the system's)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", help="also write every row to this file")
    parser.add_argument(
        "--rows", nargs="+", metavar="WORDS", help="only the series whose name contains one of these (e.g. 'native vs')"
    )
    parser.add_argument(
        "--table",
        action="store_true",
        help="the hot-path target table (bench/README.md); --size is then the bytes per producer "
        "(default 256m) and --work defaults to /dev/shm",
    )
    args = parser.parse_args()
    args.size = args.size or ("256m" if args.table else "1g")
    if args.table and args.work is None and os.access("/dev/shm", os.W_OK):
        args.work = "/dev/shm"

    work = Path(tempfile.mkdtemp(prefix="pk-bench-", dir=args.work))
    bench = Bench(args, work)
    try:
        (run_table if args.table else run_figures)(bench, args)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(bench.results, indent=1) + "\n")
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def checkout() -> str:
    """The measured tree: its commit, and whether it had uncommitted changes (they are installed too)."""
    described = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return described.stdout.strip() or "(not a git checkout)"


def run_figures(bench: Bench, args) -> None:
    work, only = bench.work, set(args.only)
    bin_dir = bench.venv("venv", str(REPO))
    pk, py = str(bin_dir / "processkit-cli"), str(bin_dir / "python")
    pumps = subprocess.run(
        [py, "-c", "from processkit.engine.pump import select_backend; print(select_backend())"],
        capture_output=True,
        text=True,
        cwd=work,
        check=True,
    ).stdout.strip()
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}; default pump: {pumps}; checkout {checkout()}",
        flush=True,
    )
    jsonl, cap_dir, tee_out = str(work / "run.jsonl"), str(work / "cap"), str(work / "tee.out")
    run = [pk, "run", "--jsonl", jsonl]
    capture = ["--capture-dir", cap_dir, "--capture-max-bytes", "2g"]

    def pump(name: str) -> list[str]:
        return ["env", f"PROCESSKIT_PUMP={name}"]

    if "startup" in only:
        bench.series(
            "start-up: run -- true vs python -c pass",
            [*run, "--", "true"],
            [py, "-c", "pass"],
            n=max(args.n, 15),
            launcher=False,
        )
        for module, seconds in import_breakdown(Path(py), Path(pk), work / "importtime.jsonl"):
            print(f"    import {module}: {seconds * 1000:.1f} ms cumulative")

    needs_data = only & {"capture", "echo", "idle", "rss", "peer"}
    data = str(bench.data(parse_size(args.size))) if needs_data else ""
    size_note = f"{args.size} of ~{LINE}-byte lines"
    tee = ["sh", "-c", f"cat {data} | tee {tee_out} >/dev/null"]
    pipe = ["sh", "-c", f"cat {data} | cat >/dev/null"]

    if "capture" in only:
        bench.series(
            "capture: run --capture-dir -- cat vs cat | tee", [*run, *capture, "--", "cat", data], tee, size_note
        )
        bench.series(
            "capture, Python pump vs cat | tee", [*pump("python"), *run, *capture, "--", "cat", data], tee, size_note
        )
    if "echo" in only:
        bench.series("echo: run -- cat vs cat | cat", [*run, "--", "cat", data], pipe, size_note)
        bench.series("echo, Python pump vs cat | cat", [*pump("python"), *run, "--", "cat", data], pipe, size_note)

    if only & {"small-writes", "idle"}:
        child, child_cpu = bench.small_writes_child(), work / "child-cpu"
        writes = [*child, str(args.lines), str(child_cpu)]
        lines_note = f"{args.lines} writes of {LINE} bytes; runner CPU only"
    if "small-writes" in only:
        for label, flags in (("echo", []), ("echo + capture", capture)):
            bench.series(
                f"small writes, {label}: native vs Python pump (runner CPU)",
                [*pump("native"), *run, *flags, "--", *writes],
                [*pump("python"), *run, *flags, "--", *writes],
                lines_note,
                child_cpu=child_cpu,
            )
    if "idle" in only:
        idle = ["--idle-timeout", "1h"]
        bench.series(
            "idle: capture with vs without --idle-timeout 1h",
            [*run, *idle, *capture, "--", "cat", data],
            [*run, *capture, "--", "cat", data],
            size_note,
        )
        bench.series(
            "idle: echo with vs without --idle-timeout 1h",
            [*run, *idle, "--", "cat", data],
            [*run, "--", "cat", data],
            size_note,
        )
        bench.series(
            "idle: small writes with vs without --idle-timeout 1h (runner CPU)",
            [*run, *idle, *capture, "--", *writes],
            [*run, *capture, "--", *writes],
            lines_note,
            child_cpu=child_cpu,
        )

    if "rss" in only:
        twice = f"2x {args.size} (cat FILE FILE)"
        bench.series("peak RSS: capture, native pump", [*run, *capture, "--", "cat", data, data], None, twice, n=3)
        bench.series(
            "peak RSS: capture, Python pump",
            [*pump("python"), *run, *capture, "--", "cat", data, data],
            None,
            twice,
            n=3,
        )

    if "peer" in only:
        peer = str(bench.venv("peer", "processkit-py") / "processkit")
        runs = args.peer_runs
        bench.series(
            "peer: run --idle-timeout 1h -- cat vs processkit run --idle-timeout 3600",
            [*run, "--idle-timeout", "1h", "--", "cat", data],
            [peer, "run", "--idle-timeout", "3600", "--", "cat", data],
            size_note,
            n=runs,
            warmup=0,
        )
        bench.series(
            "peer: run --capture-dir -- cat vs processkit run --output-limit 2 GiB",
            [*run, *capture, "--", "cat", data],
            [peer, "run", "--output-limit", str(2 << 30), "--", "cat", data],
            size_note,
            n=runs,
            warmup=0,
        )


def lone_line_delays(command: list[str], lines: int, every: float) -> list[float]:
    """Seconds from a lone line's write (its stamp) to its arrival on the runner's stdout."""
    import time

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    delays = []
    for line in proc.stdout:
        delays.append(time.monotonic() - float(line))
    if proc.wait() != 0 or len(delays) != lines:
        raise SystemExit(f"lone lines: exit {proc.returncode}, {len(delays)} of {lines} lines")
    return delays


def run_table(bench: Bench, args) -> None:
    """Issue 12's target table: each figure a side-by-side series, medians of interleaved pairs."""
    work = bench.work
    bin_dir = bench.venv("venv", str(REPO))
    pk, py = str(bin_dir / "processkit-cli"), str(bin_dir / "python")
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}; work dir {work}; checkout {checkout()}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    total = parse_size(args.size)
    writer = bench.compile("writer", WRITER_C)
    if writer is None:
        raise SystemExit("--table needs cc for its producer")
    jsonl, cap_dir, out = str(work / "run.jsonl"), str(work / "cap"), str(work / "out")
    run = [pk, "run", "--jsonl", jsonl]
    capture = ["--capture-dir", cap_dir, "--capture-max-bytes", "2g"]

    def produce(size: int, count: int = total, cpu: Path | None = None) -> list[str]:
        return [*writer, str(size), str(count), *([str(cpu)] if cpu else [])]

    def shell(*words: str) -> list[str]:
        return ["sh", "-c", " ".join(words)]

    def quoted(argv: list[str]) -> str:
        return " ".join(shlex.quote(word) for word in argv)

    startup = bench.series(
        "start-up: run -- true vs python -c pass",
        [*run, "--", "true"],
        [py, "-c", "pass"],
        n=max(args.n, 15),
        launcher=False,
    )
    if startup is not None:
        for module, seconds in import_breakdown(Path(py), Path(pk), work / "importtime.jsonl"):
            print(f"    import {module}: {seconds * 1000:.1f} ms cumulative")
    note = f"{args.size} per producer"
    for size, label in ((4096, "4K"), (65536, "64K"), (1 << 20, "1M")):
        child = quoted(produce(size))
        bench.series(
            f"echo to /dev/null, {label} writes: run vs cat", [*run, "--", *produce(size)], shell(child, "| cat"), note
        )
        bench.series(
            f"echo to a file, {label} writes: run vs cat",
            shell("exec", quoted([*run, "--", *produce(size)]), ">", out),
            shell(child, "| cat >", out),
            note,
        )
        bench.series(
            f"echo into a pipe (to cat), {label} writes: run vs cat",
            shell(quoted([*run, "--", *produce(size)]), "| cat"),
            shell(child, "| cat | cat"),
            note,
        )
    for size, label in ((4096, "4K"), (65536, "64K"), (1 << 20, "1M")):
        child = quoted(produce(size))
        bench.series(
            f"capture+SHA+echo, {label} writes: run vs tee FILE + openssl sha256 (CPU)",
            [*run, *capture, "--", *produce(size)],
            shell(child, "| tee", out, ">/dev/null && openssl dgst -sha256", out, ">/dev/null"),
            note,
        )
        bench.series(
            f"capture+SHA+echo, {label} writes: run vs tee FILE (wall)",
            [*run, *capture, "--", *produce(size)],
            shell(child, "| tee", out, ">/dev/null"),
            note,
        )
    child_cpu = work / "child-cpu"
    per_pump = produce(4096, 4 * total, child_cpu)  # four times the bytes: start-up weighs less
    bench.series(
        "runner CPU, capture, 4K writes: native vs Python pump",
        ["env", "PROCESSKIT_PUMP=native", *run, *capture, "--", *per_pump],
        ["env", "PROCESSKIT_PUMP=python", *run, *capture, "--", *per_pump],
        f"4x {args.size}; runner CPU only, start-up included",
        child_cpu=child_cpu,
    )
    bench.series(  # where the native pump's stay serves the writer's wakeups (csrc/stay.c)
        "runner CPU, echo, 4K writes: native vs Python pump",
        ["env", "PROCESSKIT_PUMP=native", *run, "--", *per_pump],
        ["env", "PROCESSKIT_PUMP=python", *run, "--", *per_pump],
        f"4x {args.size}; runner CPU only, start-up included",
        child_cpu=child_cpu,
    )
    bench.series(
        "capture, hashing thread vs inline (native)",
        ["env", "PROCESSKIT_HASH_THREAD=1", *run, *capture, "--", *produce(4096)],
        ["env", "PROCESSKIT_HASH_THREAD=0", *run, *capture, "--", *produce(4096)],
        note + "; 4K writes",
    )
    small = produce(100, args.lines * 100)
    bench.series(
        f"{args.lines} writes of 100 B, capture: whole tree vs tee FILE",
        [*run, *capture, "--", *small],
        shell(quoted(small), "| tee", out, ">/dev/null"),
        f"{args.lines} x 100 B",
    )
    small = produce(100, args.lines * 100, child_cpu)  # where the tree's CPU goes: the writer's own taken off
    bench.series(
        f"{args.lines} writes of 100 B, capture: runner vs tee (the writer's CPU taken off)",
        [*run, *capture, "--", *small],
        shell(quoted(small), "| tee", out, ">/dev/null"),
        f"{args.lines} x 100 B; each side's own CPU, start-up included",
        child_cpu=child_cpu,
    )
    idle = ["--idle-timeout", "1h"]
    bench.series(
        "--idle-timeout 1h overhead, capture, 4K writes",
        [*run, *idle, *capture, "--", *produce(4096)],
        [*run, *capture, "--", *produce(4096)],
        note,
    )
    bench.series(
        "peak RSS, 2 GiB captured + echoed",
        [*run, *capture, "--", *produce(1 << 16, 2 << 30)],
        None,
        "2 GiB in 64K writes",
        n=1,
        warmup=0,
    )
    if args.rows and not any(word in "lone-line echo delay" for word in args.rows):
        print_markdown(bench.results, startup)
        return
    lone = [py, "-c", LONE_LINES_PY, "200", "0.02"]
    delays = sorted(lone_line_delays([*run, "--", *lone], 200, 0.02))
    row = {
        "name": "lone-line echo delay",
        "p50_ms": delays[len(delays) // 2] * 1000,
        "p95_ms": delays[int(len(delays) * 0.95)] * 1000,
        "max_ms": delays[-1] * 1000,
    }
    bench.results.append(row)
    print(
        f"lone-line echo delay: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms, max {row['max_ms']:.2f} ms "
        "(200 lines, one per 20 ms)",
        flush=True,
    )
    print_markdown(bench.results, startup)


def print_markdown(rows: list[dict], startup: dict | None) -> None:
    """The rows as a bench/README.md table. "Net" subtracts the runner's own start-up (the medians
    of ``run -- true``) from A's medians: what the runner costs per byte, not per run."""
    print(
        "\n| Figure | A/B wall, median (min–max) | A/B CPU, median (min–max) | net of start-up: wall / CPU | A alone |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        if "p95_ms" in row:
            print(f"| {row['name']} | | | | p50 {row['p50_ms']:.2f} ms, p95 **{row['p95_ms']:.2f} ms** |")
            continue
        if "b_wall" not in row:
            print(f"| {row['name']} | | | | peak RSS **{row['a_rss_mib']:.1f} MiB** |")
            continue
        net = ""
        if (
            startup is not None
            and row is not startup
            and not row["name"].startswith(("runner CPU", "capture, hashing", "--idle"))
        ):
            net_wall = (row["a_wall"] - startup["a_wall"]) / row["b_wall"]
            net_cpu = (row["a_cpu"] - startup["a_cpu"]) / row["b_cpu"]
            net = f"{net_wall:.2f} / {net_cpu:.2f}"
        print(
            f"| {row['name']} | **{row['wall_ratio']:.2f}** ({row['wall_ratio_min']:.2f}–{row['wall_ratio_max']:.2f}) "
            f"| **{row['cpu_ratio']:.2f}** ({row['cpu_ratio_min']:.2f}–{row['cpu_ratio_max']:.2f}) | {net} "
            f"| {row['a_wall']:.3f} s wall, {row['a_cpu']:.3f} s CPU |"
        )


if __name__ == "__main__":
    main()
