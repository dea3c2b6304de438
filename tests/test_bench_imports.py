"""What ``bench`` imports for a benchmark: its start-up is part of every benchmark's wall.

The statistics are computed in ``benchmark/stats.py`` without the standard ``statistics``
module, whose import brings ``decimal``, ``fractions`` and ``random`` (~15 M instructions of
the start-up, bench/README.md "bench's start-up and end against hyperfine's"); ``decimal`` is
imported only by a decimal ``--parameter-scan``, and the gate's module only by a benchmark
with ``--fail-if-slower``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import run_cli

_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)")
HEAVY = {"statistics", "decimal", "_decimal", "fractions", "random", "processkit.benchmark.gate"}


def _imported(stderr: bytes) -> set[str]:
    return {match.group(1) for match in map(_LINE.match, stderr.decode().splitlines()) if match}


def test_a_benchmark_imports_no_statistics_module_and_still_reports_its_figures(tmp_path):
    """Modules the interpreter imports before any script (a site's ``.pth`` hooks) are not counted."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    baseline = _imported(subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True).stderr)
    out = tmp_path / "b.json"
    done = run_cli("bench", "-N", "--runs", "3", "--style", "none", "--export-json", out, "true", env=env)
    assert done.returncode == 0, done.stderr
    imported = _imported(done.stderr) - baseline
    assert "processkit.benchmark.stats" in imported  # the profile did list the run's imports
    assert imported & HEAVY == set()
    (result,) = json.loads(out.read_text())["results"]
    times = sorted(result["times"])
    assert result["median"] == times[1] and abs(result["mean"] - sum(times) / 3) < 1e-12
