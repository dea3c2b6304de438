"""A tiny command reads what it costs (issue 47): ``bench -N true`` against hyperfine's ``-N
true`` (or, without hyperfine, a blocking spawn-and-wait of ``true`` timed here as hyperfine
times it), side by side in alternating blocks, the median of the per-block ratios of medians.
The timed interval holds the command, from its clone to its exit as the kernel records it
(``benchmark/exit_clock.py``), not the containment's set-up or the loop's turn to notice."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time

from conftest import run_cli

BLOCKS, RUNS = 5, 40


def ours(tmp_path) -> float:
    out = tmp_path / "ours.json"
    done = run_cli("bench", "-N", "--runs", str(RUNS), "--style", "none", "--export-json", out, "true", timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())["results"][0]["median"]


def theirs(tmp_path) -> float:
    if shutil.which("hyperfine"):
        out = tmp_path / "theirs.json"
        subprocess.run(
            ["hyperfine", "-N", "--runs", str(RUNS), "--style", "none", "--export-json", out, "true"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return json.loads(out.read_text())["results"][0]["median"]
    program = shutil.which("true")
    times = []
    for _ in range(RUNS):
        started = time.monotonic_ns()
        pid = os.posix_spawn(program, ["true"], os.environ)
        os.waitpid(pid, 0)
        times.append((time.monotonic_ns() - started) / 1e9)
    return statistics.median(times)


def test_true_reads_what_hyperfine_reads(tmp_path):
    ratios = []
    for _ in range(BLOCKS):
        ratios.append(ours(tmp_path) / theirs(tmp_path))
    assert statistics.median(ratios) < 1.3, ratios  # was 2.5 and more on a busy host; see bench/README.md
