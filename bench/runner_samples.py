"""The runner's CPU samples by kind, for commands run side by side under ``perf record``.

Why: a capture's runner CPU is mostly the kernel's copy into the capture file's fresh pages and
the SHA-256, which no pump choice changes, and on a VM whose freed pages are reported to the host
the copy alone swings sixfold from run to run (bench/README.md, "A capture's pipe never polled"):
a whole-process CPU ratio of two pumps then reads anywhere from 0.5 to 1.5. Sampled, each run's
runner time splits into that copy (``copy_folio_from_iter_atomic``), the digest (the native
pump's ``compress_shani``, or OpenSSL's in libcrypto for the Python pump), the rest of the
kernel and the rest of user space; the sum without the copy is what a pump's own work moves.
The commands run alternately (A B A B), each after ``--touch`` bytes of memory were made and
freed here (``throughput.touch``), and the medians and per-pair ratios are printed. Needs
``perf`` (a sample every 250 µs of CPU by default).

    python3 bench/runner_samples.py -n 7 --touch 2g \\
      "env PROCESSKIT_PUMP=native processkit-cli run --capture-dir /dev/shm/ca --capture-max-bytes 2g -- W 4096 1073741824" \\
      "env PROCESSKIT_PUMP=python processkit-cli run --capture-dir /dev/shm/cb --capture-max-bytes 2g -- W 4096 1073741824"
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import parse_size, touch  # noqa: E402

KINDS = ("total", "copy", "sha", "kernel", "user", "without_copy")


def kind(dso: str, symbol: str, in_kernel: bool) -> str:
    """Which of KINDS a sample of ``symbol`` in ``dso`` counts to (besides the total)."""
    if symbol == "copy_folio_from_iter_atomic":
        return "copy"
    if "sha" in symbol.lower() or dso.startswith("libcrypto"):
        return "sha"
    return "kernel" if in_kernel else "user"


def one(command: str, data: Path, comm: str, warm: int) -> dict[str, int]:
    """One run of ``command`` under ``perf record``: the samples of the processes named ``comm``."""
    touch(warm)
    with open("/dev/null", "wb") as sink:
        code = subprocess.call(["perf", "record", "-q", "-o", str(data), "--", *shlex.split(command)], stdout=sink)
    if code != 0:
        raise SystemExit(f"exit {code} from {command}")
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--comm", comm, "--sort", "dso,sym", "--stdio", "-n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = dict.fromkeys(KINDS, 0)
    for line in report.splitlines():
        fields = line.split()
        # "  39.00%  2533  _native.abi3.so  [.] compress_shani"
        if len(fields) < 5 or not fields[0].endswith("%") or fields[3] not in ("[k]", "[.]"):
            continue
        samples = int(fields[1])
        counts["total"] += samples
        counts[kind(fields[2], fields[4], fields[3] == "[k]")] += samples
    counts["without_copy"] = counts["total"] - counts["copy"]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="+", help="shell-free commands, run alternately")
    parser.add_argument("-n", type=int, default=7, help="rounds")
    parser.add_argument("--comm", default="processkit-cli", help="the measured process's name (its threads too)")
    parser.add_argument("--touch", default="2g", metavar="SIZE", help="memory made and freed before each run")
    args = parser.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("needs perf")
    warm = parse_size(args.touch)
    runs: list[list[dict[str, int]]] = [[] for _ in args.commands]
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.n):
            for index, command in enumerate(args.commands):
                runs[index].append(one(command, Path(work) / "perf.data", args.comm, warm))
                print(f"[{index}] " + ", ".join(f"{k} {runs[index][-1][k]}" for k in KINDS), flush=True)
    for index, command in enumerate(args.commands):
        medians = ", ".join(f"{k} {statistics.median(r[k] for r in runs[index]):.0f}" for k in KINDS)
        print(f"[{index}] {command}\n    samples, medians: {medians}")
    for index in range(1, len(args.commands)):
        for key in ("total", "without_copy", "copy"):
            ratios = [a[key] / b[key] for a, b in zip(runs[0], runs[index]) if b[key]]
            print(f"[0]/[{index}] {key}: {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
