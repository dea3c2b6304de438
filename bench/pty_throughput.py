"""``--pty`` throughput: ``processkit-cli run --pty`` with capture against util-linux ``script``.

All three run ``cat FILE`` on a fresh pseudo-terminal and copy what it emits to their stdout
(/dev/null here). A also captures every byte into ``stdout.log`` with its SHA-256; B is
``script -qfc 'cat FILE' /dev/null`` (its typescript goes to /dev/null); with ``--typescript``
also C, the same with its typescript in a file beside A's capture, so both keep a copy on the
same storage. Runs rotate A B (C) A B (C) (``side_by_side.measure``); the report is the medians and the medians of the
pair-wise wall ratios. Every A run is checked: its capture holds exactly the file as the
terminal emits it (each ``\\n`` as ``\\r\\n``) and ``output_captured`` carries its digest.

The input and the captures live under ``--dir`` (default: /dev/shm when writable), so a busy
disk's write-back does not decide the race.

    python3 bench/pty_throughput.py --size 1g -n 5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from side_by_side import measure  # noqa: E402

LINE = 99  # text lines as a compiler or test runner prints them, plus the newline


def write_text(path: Path, size: int) -> tuple[int, str]:
    """A text file of about ``size`` bytes; returns the length and digest of its pty image."""
    block = bytearray()
    for index in range(4096):
        block += (f"{index:06d} " + "abcdefghijklmnopqrstuvwxyz0123456789" * 3)[: LINE - 1].encode() + b"\n"
    image = hashlib.sha256()
    length = 0
    with open(path, "wb") as handle:
        while length < size:
            handle.write(block)
            length += len(block)
            image.update(block.replace(b"\n", b"\r\n"))
    return length + length // LINE, image.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1g", help="file size: a number with k, m or g (default 1g)")
    parser.add_argument("-n", type=int, default=5, help="counted pairs")
    parser.add_argument("--cli", default=shutil.which("processkit-cli") or "processkit-cli")
    parser.add_argument("--typescript", action="store_true", help="also C: script keeping its typescript in a file")
    parser.add_argument("--dir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    args = parser.parse_args()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    size = int(args.size[:-1]) * units[args.size[-1].lower()] if args.size[-1].isalpha() else int(args.size)
    with tempfile.TemporaryDirectory(prefix="pty-bench-", dir=args.dir) as scratch:
        work = Path(scratch)
        source = work / "input.txt"
        expected_length, expected_digest = write_text(source, size)
        capture, jsonl = work / "capture", work / "run.jsonl"
        ours = [args.cli, "run", "--pty", "--jsonl", str(jsonl), "--capture-dir", str(capture)]
        ours += ["--capture-max-bytes", str(2 * expected_length), "--", "cat", str(source)]
        peer = ["script", "-qfc", f"cat {source}", "/dev/null"]
        peer_file = ["script", "-qfc", f"cat {source}", str(work / "typescript")]
        commands = (ours, peer, peer_file) if args.typescript else (ours, peer)
        results: list[list[dict]] = [[] for _ in commands]
        for _ in range(args.n + 1):  # the first round warms the page cache and is not counted
            for index, argv in enumerate(commands):
                result = measure(argv)
                if index == 0:
                    check(jsonl, capture / "stdout.log", expected_length, expected_digest, result["code"])
                results[index].append(result)
        names = ("A processkit-cli run --pty, capture", "B script, typescript /dev/null", "C script, typescript file")
        for name, runs in zip(names, results):
            walls = [r["wall"] for r in runs[1:]]
            cpus = [r["cpu"] for r in runs[1:]]
            print(f"{name}: wall median {statistics.median(walls):.2f} s, cpu median {statistics.median(cpus):.2f} s")
        for label, peer_runs in zip(("A/B", "A/C"), results[1:]):
            ratios = [a["wall"] / b["wall"] for a, b in zip(results[0][1:], peer_runs[1:])]
            print(
                f"{label} wall: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
            )
        mib = expected_length / (1 << 20)
        print(f"{mib:.0f} MiB through the terminal per run, {args.n} pairs")


def check(jsonl: Path, log: Path, length: int, digest: str, code: int) -> None:
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    stdout = next(e for e in events if e["event"] == "output_captured")["stdout"]
    problems = []
    if code != 0:
        problems.append(f"exit {code}")
    if (stdout["bytes_seen"], stdout["bytes_written"], stdout["sha256"]) != (length, length, digest):
        problems.append(f"output_captured says {stdout}")
    if os.path.getsize(log) != length:
        problems.append(f"stdout.log holds {os.path.getsize(log)} bytes, expected {length}")
    if problems:
        raise SystemExit("processkit-cli run --pty lost or changed bytes: " + "; ".join(problems))


if __name__ == "__main__":
    main()
