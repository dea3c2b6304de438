"""bench's statistics against figures computed apart from them: the two-sample test's p-values
are scipy.stats.mannwhitneyu's default (method="auto", two-sided; its exact figure on small
untied samples is checked in full in test_bench_stats_exact.py), the rest
worked by hand from the definitions in processkit/benchmark/stats.py. A mutation pass
(bench/README.md, "Mutation testing") found these decisions unpinned by the process-level tests."""

from __future__ import annotations

import math

import pytest

from processkit.benchmark import stats


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 2 / 252),  # no ties, fully separated: exact, 2 of C(10, 5)
        ([1, 2, 2, 3, 5], [2, 3, 3, 4, 6, 7], 0.16304505585423734),  # ties across the samples: normal
        ([1, 2], [3, 4], 1 / 3),  # the smallest sizes tested: exact, 2 of C(4, 2)
        ([3, 1, 2], [2, 5, 4], 0.26828588367711736),  # unsorted, one tie
        ([1, 1, 1], [1, 1, 1], 1.0),  # every value tied: no variance
        ([1, 1], [1, 2], 0.6170750774519738),  # ties leave a variance of exactly 1
    ],
)
def test_mann_whitney_is_scipys_default_test(a, b, expected):
    assert stats.mann_whitney(a, b) == pytest.approx(expected, rel=1e-12)
    assert stats.mann_whitney(b, a) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("a, b", [([1.0], [2.0, 3.0]), ([1.0, 2.0], [3.0]), ([], [])])
def test_mann_whitney_needs_two_runs_each(a, b):
    assert stats.mann_whitney(a, b) is None


def test_the_ratio_and_its_uncertainty_propagate_both_relative_deviations():
    slower = stats.summarize([1.8, 2.2], [], [], [None, None])  # mean 2, stddev 0.2828...
    fastest = stats.summarize([0.9, 1.1], [], [], [None, None])  # mean 1, stddev 0.1414...
    value, spread = stats.ratio(slower, fastest)
    assert value == pytest.approx(2.0)
    relative = math.hypot(math.sqrt(0.08) / 2, math.sqrt(0.02) / 1)
    assert spread == pytest.approx(2.0 * relative)
    quick = stats.summarize([0.3, 0.5], [], [], [None, None])  # sub-second: a spread all the same
    quicker = stats.summarize([0.1, 0.3], [], [], [None, None])
    value, spread = stats.ratio(quick, quicker)
    assert value == pytest.approx(2.0)
    assert spread == pytest.approx(2.0 * math.hypot(math.sqrt(0.02) / 0.4, math.sqrt(0.02) / 0.2))
    nothing = stats.summarize([0.0, 0.0], [], [], [None, None])
    assert stats.ratio(nothing, fastest) == (0.0, None)  # a mean of 0 has no relative deviation
    single = stats.summarize([2.0], [], [], [None])
    assert stats.ratio(single, fastest) == (pytest.approx(2.0), None)  # one run: no spread
    zero = stats.summarize([0.0, 0.0], [], [], [None, None])
    assert stats.ratio(slower, zero) == (math.inf, None)


def test_a_summary_uses_the_sample_deviation_and_the_known_memory_only():
    summary = stats.summarize([1.0, 2.0, 4.0], [0.5, 1.5], [0.25], [100, None, 300])
    assert (summary.runs, summary.median, summary.min, summary.max) == (3, 2.0, 1.0, 4.0)
    assert summary.mean == pytest.approx(7 / 3)
    assert summary.stddev == pytest.approx(math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2))
    assert (summary.user, summary.system) == (1.0, 0.25)
    assert (summary.memory_mean, summary.memory_max) == (200.0, 300)
    bare = stats.summarize([1.0], [], [], [None])
    # no run's CPU measured: none, never a 0 under hyperfine's field
    assert (bare.stddev, bare.user, bare.system, bare.memory_mean, bare.memory_max) == (None, None, None, None, None)


def test_outliers_are_beyond_the_threshold_strictly():
    # median 1, MAD 1 (deviations 1, 0, 1, ...): a value's score is its distance from 1.
    assert stats.modified_z_scores([0.0, 1.0, 2.0]) == [-1.0, 0.0, 1.0]
    assert stats.modified_z_scores([0.0, 2.0, 4.0, 8.0]) == [-1.5, -0.5, 0.5, 2.5]  # median 3, MAD 2
    base = [0.0, 1.0, 1.0, 2.0, 2.0, 0.0]
    at = 1.0 + stats.OUTLIER_THRESHOLD
    assert stats.outlier_indices(base + [at]) == []
    assert stats.outlier_indices(base + [at + 0.01]) == [6]
    assert stats.outlier_indices(base + [1.0 - stats.OUTLIER_THRESHOLD - 0.01]) == [6]
    assert stats.modified_z_scores([]) == []


def test_a_slow_first_run_needs_two_more_to_stand_out_from():
    assert not stats.first_run_slow([100.0, 1.0])
    assert stats.first_run_slow([100.0, 1.0, 1.0])
    rest = [0.0, 1.0, 1.0, 2.0, 2.0, 0.0]  # median 1, MAD 1
    assert not stats.first_run_slow([1.0 + stats.OUTLIER_THRESHOLD] + rest)
    assert stats.first_run_slow([1.01 + stats.OUTLIER_THRESHOLD] + rest)
    assert not stats.first_run_slow([-100.0] + rest)  # fast, not slow
    assert stats.first_run_slow([10.0, 0.0, 0.0, 1.0, 2.0])  # every later run counts: median 0.5, MAD 0.5


def test_compare_takes_the_fastest_or_the_named_reference_and_judges_at_five_percent():
    fast = ("fast", stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0], [], [], [None] * 5), [1.0, 2.0, 3.0, 4.0, 5.0])
    slow = ("slow", stats.summarize([6.0, 7.0, 8.0, 9.0, 10.0], [], [], [None] * 5), [6.0, 7.0, 8.0, 9.0, 10.0])
    near = ("near", stats.summarize([1.0, 2.0, 3.0, 4.0, 6.0], [], [], [None] * 5), [1.0, 2.0, 3.0, 4.0, 6.0])
    assert stats.compare([fast]) is None
    reference, others = stats.compare([slow, fast, near])
    assert reference == 1
    assert [(c.index, c.name) for c in others] == [(0, "slow"), (2, "near")]
    assert others[0].ratio == pytest.approx(8.0 / 3.0)
    assert others[0].p_value == pytest.approx(2 / 252) and others[0].significant  # exact: 2 of C(10, 5)
    assert not others[1].significant
    reference, others = stats.compare([slow, fast], reference=0)
    assert reference == 0 and others[0].ratio == pytest.approx(3.0 / 8.0)


def test_significance_is_below_five_percent_strictly():
    assert stats.Comparison(0, "a", 1.0, None, 0.0499).significant
    assert not stats.Comparison(0, "a", 1.0, None, stats.SIGNIFICANCE).significant
    assert not stats.Comparison(0, "a", 1.0, None, None).significant
