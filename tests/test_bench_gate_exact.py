"""The gate at small run counts decides on the exact Mann-Whitney U p-value (``stats.mann_whitney``
on untied runs with a side of at most ``EXACT_MAX_RUNS``). 2 runs against a baseline of 3 said
``Mann-Whitney U p = 0.15``, a figure the test never gives there (0.2); 8 runs every one slower than
a baseline of 2 read ``p = 0.05`` (the normal approximation's 0.0502) and ``inconclusive ... give
--runs 9 or more``, where the exact test, the one the gate names, finds it significant (2 of the
C(10, 2) = 45 orders are as extreme: p = 0.044), so a slowdown beyond the threshold fails."""

from __future__ import annotations

import json

from conftest import run_cli
from test_bench_gate_few_runs import untied_baseline


def _gated(tmp_path, runs: int, baseline_runs: int):
    out = tmp_path / "out.json"
    done = run_cli(
        "bench", "-N", "--runs", runs, "--baseline", untied_baseline(tmp_path, baseline_runs),
        "--fail-if-slower", "5", "sleep 0.05", "--export-json", out, cwd=tmp_path,
    )  # fmt: skip
    exported = json.loads(out.read_text())
    (decided,) = exported["gate"]["commands"]
    (against,) = exported["baseline"]["commands"]
    return done, decided, against


def test_two_runs_against_three_say_the_exact_p_value(tmp_path):
    done, decided, against = _gated(tmp_path, 2, 3)
    assert done.returncode == 0, done.stderr
    assert against["p_value"] == 0.2, against
    assert decided["outcome"] == "inconclusive", decided
    assert "Mann-Whitney U p = 0.2)" in decided["reason"], decided
    assert "give --runs 5 or more" in decided["reason"], decided  # 5 against 3: 2 / C(8, 3) = 0.036


def test_eight_runs_all_slower_than_a_baseline_of_two_are_a_regression(tmp_path):
    done, decided, against = _gated(tmp_path, 8, 2)
    assert against["p_value"] == 2 / 45 and against["verdict"] == "slower", against
    assert decided["outcome"] == "regressed", decided
    assert done.returncode == 119, done.stderr
    assert "Mann-Whitney U p = 0.044" in decided["reason"], decided


def test_seven_runs_against_two_are_told_the_eighth_would_do(tmp_path):
    """7 against 2 cannot show it (2 / C(9, 2) = 0.056); the advice was 9, the exact test needs 8."""
    done, decided, _ = _gated(tmp_path, 7, 2)
    assert (done.returncode, decided["outcome"]) == (0, "inconclusive"), decided
    assert "give --runs 8 or more" in decided["reason"], decided
