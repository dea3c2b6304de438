"""``bench`` beside the hyperfine installed here, on the same commands: where the two differ on
purpose, docs/differences.md has the row and ``bench --help`` says it; where ``bench`` follows
hyperfine (``--order sequential``), the steps run in hyperfine's order. Skipped without hyperfine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

HYPERFINE = shutil.which("hyperfine")
pytestmark = pytest.mark.skipif(HYPERFINE is None, reason="hyperfine is not installed")
DIFFERENCES = Path(__file__).resolve().parents[1] / "docs" / "differences.md"
ESCAPE = "\x1b["


def hyperfine(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HYPERFINE, *args], cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )


def bench(tmp_path, *args) -> subprocess.CompletedProcess:
    done = run_cli("bench", *args, cwd=tmp_path, timeout=120)
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    return done


def row(starting: str) -> str:
    """The differences.md row whose first cell starts with ``starting``."""
    rows = [line for line in DIFFERENCES.read_text().splitlines() if line.startswith("| " + starting)]
    assert rows, f"docs/differences.md has no row for {starting!r}"
    return rows[0]


def test_style_color_draws_no_colour_and_says_so(tmp_path):
    """hyperfine's ``--style color`` colours its printout even into a pipe; ``bench``'s draws none,
    which its help and a differences row say, rather than taking the style in silence."""
    theirs = hyperfine(tmp_path, "--style", "color", "--runs", "1", "-N", "true")
    assert theirs.returncode == 0, theirs.stderr
    assert ESCAPE in theirs.stdout
    ours = bench(tmp_path, "--style", "color", "--runs", "1", "-N", "true")
    assert ours.returncode == 0, ours.stderr
    assert ESCAPE not in ours.stdout + ours.stderr
    assert "Benchmark 1: true" in ours.stdout
    helped = run_cli("bench", "--help", cwd=tmp_path).stdout.decode()
    assert "no colours are drawn" in " ".join(helped.split())
    assert "`color` prints what `basic` prints" in row("`bench --style`")


def step_log(tmp_path, tool, *order: str) -> list[str]:
    """What each step and run wrote, in order, for two parameterised commands with every step."""
    log = tmp_path / f"log-{tool.__name__}-{len(order)}"
    args = ["--runs", "2", "--warmup", "1", "-L", "x", "a,b", *order]
    args += ["-s", f"echo setup {{x}} >> {log}", "-p", f"echo prep {{x}} >> {log}", "-c", f"echo clean {{x}} >> {log}"]
    done = tool(tmp_path, *args, f"echo run {{x}} >> {log}")
    assert done.returncode == 0, done.stderr
    return log.read_text().split("\n")


def test_sequential_order_is_hyperfines_and_the_default_is_a_stated_difference(tmp_path):
    theirs = step_log(tmp_path, hyperfine)
    assert theirs[:2] == ["setup a", "prep a"]
    assert step_log(tmp_path, bench, "--order", "sequential") == theirs
    ours = step_log(tmp_path, bench)
    assert ours[:2] == ["setup a", "setup b"] and ours[-3:] == ["clean a", "clean b", ""]
    assert sorted(ours) == sorted(theirs)  # the same steps, in another order
    stated = row("The order in which `bench` runs the commands")
    assert "`--order sequential` is hyperfine's order" in stated
