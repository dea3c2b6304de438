"""The Mann-Whitney U p-value on small untied samples is the exact test's, as SciPy's
``mannwhitneyu`` gives by default: 2 runs against 3, each beyond every one of the other's, read
``p = 0.15`` (the normal approximation) where the test's own figure is 0.2 (2 of the C(5, 2) = 10
orders are as extreme). Checked here against a count over every order of the pooled runs, for
every pair of sizes up to the exact rule's bound, and against SciPy where it is installed."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processkit.benchmark import stats


def _u(chosen: tuple[int, ...], size: int) -> int:
    """U of the runs at the places ``chosen`` among ``size``: the pairs in which one of them comes
    after one of the others."""
    others = [place for place in range(size) if place not in chosen]
    return sum(1 for mine in chosen for other in others if mine > other)


def _brute_force(n1: int, n2: int) -> dict[int, float]:
    """Each U's two-sided p-value, counted over every order of ``n1`` runs among ``n2``: twice the
    share of orders at least as far from the middle on the observed side, at most 1."""
    size = n1 + n2
    us = [_u(chosen, size) for chosen in combinations(range(size), n1)]
    total = len(us)
    found = {}
    for u in set(us):
        far = max(u, n1 * n2 - u)
        found[u] = min(1.0, 2 * sum(1 for other in us if other >= far) / total)
    return found


SIZES = [(n1, n2) for n1 in range(2, stats.EXACT_MAX_RUNS + 1) for n2 in range(2, stats.EXACT_MAX_RUNS + 1)]


@pytest.mark.parametrize("n1, n2", SIZES + [(2, 15), (3, 12), (stats.EXACT_MAX_RUNS, stats.EXACT_MAX_RUNS + 1)])
def test_every_u_of_small_untied_samples_has_the_exact_p_value(n1, n2):
    size = n1 + n2
    expected = _brute_force(n1, n2)
    seen = set()
    for chosen in combinations(range(size), n1):
        u = _u(chosen, size)
        if u in seen:
            continue
        seen.add(u)
        a = [float(place) for place in chosen]
        b = [float(place) for place in range(size) if place not in chosen]
        assert stats.mann_whitney(a, b) == pytest.approx(expected[u], rel=1e-12), (n1, n2, u)
    assert seen == set(range(n1 * n2 + 1))


def test_the_users_two_runs_against_three():
    assert stats.mann_whitney([0.020, 0.021], [0.010, 0.011, 0.012]) == pytest.approx(0.2, rel=1e-12)
    assert stats.best_p(2, 3) == pytest.approx(0.2, rel=1e-12)
    assert stats.best_p(3, 3) == pytest.approx(0.1, rel=1e-12)  # 2 of C(6, 3) = 20


def test_best_p_is_the_exact_minimum_up_to_the_bound():
    for runs, other in SIZES:
        assert stats.best_p(runs, other) == pytest.approx(2 / math.comb(runs + other, runs), rel=1e-12)


def test_ties_or_larger_samples_keep_the_normal_approximation():
    # 9 against 9, fully separated: U = 0, z = (40.5 - 0.5) / sqrt(9 * 9 * 19 / 12)
    z = 40 / math.sqrt(81 * 19 / 12)
    expected = math.erfc(z / math.sqrt(2))
    assert stats.mann_whitney(list(range(9)), list(range(9, 18))) == pytest.approx(expected, rel=1e-12)
    assert stats.mann_whitney([1, 2, 2], [3, 4, 5]) != pytest.approx(0.1)  # a tie: not the exact 0.1


def test_a_large_side_against_a_small_one_is_exact_and_cheap():
    """SciPy's rule bounds only the smaller side: 3 runs among 500 others, every one beyond."""
    assert stats.mann_whitney([1000.0, 1001.0, 1002.0], [float(i) for i in range(500)]) == pytest.approx(
        2 / math.comb(503, 3), rel=1e-12
    )


samples = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2, max_size=12)
untied = st.lists(st.integers(min_value=0, max_value=10**6), min_size=4, max_size=20, unique=True)


@settings(max_examples=300, deadline=None)
@given(samples, samples)
def test_p_is_a_probability_and_symmetric(a, b):
    p = stats.mann_whitney(a, b)
    assert p is not None and 0 < p <= 1
    assert stats.mann_whitney(b, a) == pytest.approx(p, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(untied, st.data())
def test_p_depends_only_on_the_order(values, data):
    """A rank test: any increasing map of the times leaves p as it was."""
    cut = data.draw(st.integers(min_value=2, max_value=len(values) - 2))
    a, b = values[:cut], values[cut:]
    p = stats.mann_whitney(a, b)
    assert stats.mann_whitney([v**3 + 7 for v in a], [v**3 + 7 for v in b]) == pytest.approx(p, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(samples, samples)
def test_p_is_scipys_default(a, b):
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)
    assert stats.mann_whitney(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-300)
