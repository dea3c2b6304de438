"""The search for the lines that say why (``processkit/report/why_lines.py``) of two trees, side
by side: for each shape of capture (plain log lines, the shapes that were its slowest: short
lines, long words, colour sequences, every line a match, lines over 1 MiB; short lines with one
token word a MiB, which turns the gate off), one process a run
times ``why_lines.shown()`` on a file of that shape, the trees alternating in pairs; the medians
of its CPU time, the MB/s they make and the ratio are printed.

    python3 bench/why_lines_speed.py --a /path/to/before --b /path/to/after -n 5 --mib 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

SHAPES = {
    "log lines (56 B)": b"2026-12-07 12:00:00 INFO some log line here with words\n",
    "words (10 B)": b"abcdefghi\n",
    "a colon (4 B)": b"ab:\n",
    "E and a word (6 B)": b"Exxxx\n",
    "a word (100 B)": b"a" * 100 + b"\n",
    "a word (1000 B)": b"a" * 1000 + b"\n",
    "a word and a colon (1000 B)": b"a" * 1000 + b":\n",
    "a dotted name (1000 B)": b"a." * 500 + b"\n",
    "colour sequences (800 B)": b"\x1b[0m" * 200 + b"\n",
    "'error' inside (16 B)": b"some error here\n",
    "every line says why (18 B)": b"E   assert 1 == 2\n",
    "one-line JSON (2 MiB)": b'{"a": "' + b"v" * (2 << 20) + b'"}\n',
}
# each MiB of these ends in a line holding a token word (``rror``): the whole pattern searched
SPRINKLED = {
    "a location, 'rror' a MiB (5 B)": b"a:1:\n",
    "a colon, 'rror' a MiB (4 B)": b"ab:\n",
    "E and a word, 'rror' a MiB (6 B)": b"Exxxx\n",
}

# Run in a process of its own, with the tree's package first on the path: one search, timed.
WORKER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from processkit.report import why_lines
start = time.process_time()
why_lines.shown(sys.argv[2], 10, 5, [why_lines.SEARCH_BYTES])
print(time.process_time() - start)
"""


def _timed(tree: str, path: str) -> float:
    done = subprocess.run([sys.executable, "-c", WORKER, tree, path], capture_output=True, text=True, check=True)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the tree before (its processkit/ package)")
    parser.add_argument("--b", required=True, help="the tree after")
    parser.add_argument("-n", type=int, default=5, help="pairs a shape")
    parser.add_argument("--mib", type=int, default=16, help="each capture's size")
    args = parser.parse_args()
    size = args.mib << 20
    print(f"| shape ({args.mib} MiB) | A CPU s (MB/s) | B CPU s (MB/s) | B / A |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, line in [*SHAPES.items(), *SPRINKLED.items()]:
            path = os.path.join(scratch, "capture.log")
            with open(path, "wb") as out:
                if name in SPRINKLED:  # each MiB: the lines, then one with the word
                    out.write((line * ((1 << 20) // len(line) - 1) + b"an rror\n") * args.mib)
                else:
                    out.write((line * (size // len(line) + 1))[:size])
            times: dict[str, list[float]] = {"a": [], "b": []}
            for _ in range(args.n):
                for side in ("a", "b"):
                    times[side].append(_timed(getattr(args, side), path))
            a, b = (statistics.median(times[side]) for side in ("a", "b"))
            print(f"| {name} | {a:.3f} ({size / a / 1e6:.0f}) | {b:.3f} ({size / b / 1e6:.0f}) | {b / a:.3f} |")


if __name__ == "__main__":
    main()
