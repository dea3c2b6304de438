"""The statistics of a benchmark, in pure Python: per-command summaries, outliers, the
comparison with its uncertainty, and a two-sample test.

Outliers use a modified Z-score, as hyperfine does: a time's distance from the median in units
of the median absolute deviation; above OUTLIER_THRESHOLD (ten scaled MADs) it is flagged.
"X ran N ± M times faster" propagates both commands' relative standard deviations. The
difference between two commands is tested with a two-sided Mann-Whitney U (no normality
assumed), computed as SciPy's ``mannwhitneyu`` computes it by default (``method="auto"``): exact
where no time is tied and a side has at most EXACT_MAX_RUNS runs, from U's distribution over every
order of the pooled runs, twice the smaller tail, at most 1; else the normal approximation with the
tie and continuity corrections, which on a few untied runs is not that test's figure (2 runs
against 3, each beyond every one of the other's, read 0.15; 2 of the C(5, 2) = 10 orders are as
extreme: 0.2).

The mean and median are computed here, as ``statistics.fmean`` and ``statistics.median``
compute them (``math.fsum`` over the count; the middle of the sorted values): importing
``statistics`` loads ``decimal``, ``fractions`` and ``random`` with it, ~15 M instructions
(~5 ms) of every ``bench``'s start-up for two functions of a few lines.
"""

from __future__ import annotations

import math
import sys

from ..plain import Plain

OUTLIER_THRESHOLD = 14.826  # |x - median| / MAD: ten standard deviations of a normal sample
SIGNIFICANCE = 0.05
EXACT_MAX_RUNS = 8  # SciPy's bound for an exact p-value: the smaller side's runs, no time tied
TOO_FEW = "too few runs to test"  # fewer than two runs on a side: no p-value (``mann_whitney``)


def fmean(values) -> float:
    """The arithmetic mean of a non-empty collection of numbers, in float arithmetic."""
    values = values if isinstance(values, (list, tuple)) else list(values)
    if not values:
        raise ValueError("fmean of no values")
    return math.fsum(values) / len(values)


def median(values) -> float:
    """The middle value of a non-empty collection (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    count = len(ordered)
    if not count:
        raise ValueError("median of no values")
    half = count // 2
    return ordered[half] if count % 2 else (ordered[half - 1] + ordered[half]) / 2


def modified_z_scores(values: list[float]) -> list[float]:
    """Each value's distance from the median over the median absolute deviation (0 if MAD is 0)."""
    if not values:
        return []
    middle = median(values)
    mad = median(abs(v - middle) for v in values) or sys.float_info.epsilon
    return [(v - middle) / mad for v in values]


def outlier_indices(values: list[float]) -> list[int]:
    return [i for i, z in enumerate(modified_z_scores(values)) if abs(z) > OUTLIER_THRESHOLD]


def first_run_slow(values: list[float]) -> bool:
    """The first run stands out from the others as an outlier on the slow side (cold caches)."""
    if len(values) < 3:
        return False
    rest = values[1:]
    middle = median(rest)
    mad = median(abs(v - middle) for v in rest) or sys.float_info.epsilon
    return (values[0] - middle) / mad > OUTLIER_THRESHOLD


class Summary(Plain):
    """One command's figures over its measured runs, in seconds and bytes."""

    __slots__ = ("runs", "mean", "stddev", "median", "min", "max", "user", "system", "memory_mean", "memory_max")

    def __init__(
        self,
        runs: int,
        mean: float,
        stddev: float | None,
        median: float,
        min: float,
        max: float,
        user: float | None,
        system: float | None,
        memory_mean: float | None,
        memory_max: int | None,
    ):
        self.runs = runs
        self.mean = mean
        self.stddev = stddev  # None for a single run
        self.median = median
        self.min = min
        self.max = max
        self.user = user  # None: no run's CPU was measured (hyperfine's field, so never a 0 that means nothing)
        self.system = system
        self.memory_mean = memory_mean
        self.memory_max = memory_max


def sample_stdev(values: list[float], mean: float) -> float:
    """The sample standard deviation in float arithmetic (``statistics.stdev`` is exact, with
    fractions: half a second for a million runs of an imported export)."""
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def summarize(times: list[float], user: list[float], system: list[float], memory: list[int | None]) -> Summary:
    """``times`` in seconds, non-empty; ``user``, ``system`` of the runs whose CPU was measured
    (none: ``Summary.user`` None); ``memory`` per run, None where unmeasured."""
    known = [m for m in memory if m is not None]
    mean = fmean(times)
    return Summary(
        runs=len(times),
        mean=mean,
        stddev=sample_stdev(times, mean) if len(times) > 1 else None,
        median=median(times),
        min=min(times),
        max=max(times),
        user=fmean(user) if user else None,
        system=fmean(system) if system else None,
        memory_mean=fmean(known) if known else None,
        memory_max=max(known) if known else None,
    )


def ratio(slower: Summary, fastest: Summary) -> tuple[float, float | None]:
    """How many times ``fastest`` (the reference) is faster than ``slower``, and that ratio's
    uncertainty."""
    value = slower.mean / fastest.mean if fastest.mean > 0 else math.inf
    if slower.stddev is None or fastest.stddev is None or not math.isfinite(value) or slower.mean <= 0:
        return value, None
    relative = math.hypot(slower.stddev / slower.mean, fastest.stddev / fastest.mean)
    return value, value * relative


def mann_whitney(a: list[float], b: list[float]) -> float | None:
    """The two-sided p-value that ``a`` and ``b`` come from one distribution; None if too few."""
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        return None
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    tie_term = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        size = j - i + 1
        tie_term += size**3 - size
        i = j + 1
    rank_sum = sum(r for r, (_, group) in zip(ranks, pooled) if group == 0)
    u = rank_sum - n1 * (n1 + 1) / 2
    if not tie_term and min(n1, n2) <= EXACT_MAX_RUNS:
        smaller = int(min(u, n1 * n2 - u))
        return min(1.0, 2 * orders_up_to(smaller, min(n1, n2), max(n1, n2)) / math.comb(n1 + n2, n1))
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)  # with the continuity correction
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def orders_up_to(limit: int, few: int, many: int) -> int:
    """How many of the ``comb(few + many, few)`` orders of ``few`` runs among ``many`` others give a
    U of at most ``limit`` (U: the pairs in which one of the ``few`` comes after one of the
    ``many``). That count for each U is a partition's (U into at most ``few`` parts, each at most
    ``many``), whose counts are the coefficients of prod(1 - q**(many + i)) / (1 - q**i), i = 1 ..
    ``few``: built factor by factor up to q**limit, in integers, exact."""
    counts = [1] + [0] * limit
    for i in range(1, few + 1):
        for power in range(i, limit + 1):  # over (1 - q**i): each count adds the new one i below it
            counts[power] += counts[power - i]
        for power in range(limit, many + i - 1, -1):  # times (1 - q**(many + i)): less the old one below
            counts[power] -= counts[power - many - i]
    return sum(counts)


def best_p(runs: int, other: int) -> float | None:
    """The smallest p-value ``mann_whitney`` can give ``runs`` against ``other`` runs (every one of
    a side beyond every one of the other's); at or above SIGNIFICANCE, no result of theirs is
    significant. None for fewer than two on a side."""
    return mann_whitney([float(i) for i in range(runs)], [float(runs + i) for i in range(other)])


class Comparison(Plain):
    """One command against the reference (the fastest, or ``--reference``): the ratio of their
    means (above 1: the reference is faster), its uncertainty, and the test's verdict."""

    __slots__ = ("index", "name", "ratio", "ratio_stddev", "p_value", "significant")

    def __init__(self, index: int, name: str, ratio: float, ratio_stddev: float | None, p_value: float | None):
        self.index = index  # the command's place among the compared ones
        self.name = name
        self.ratio = ratio
        self.ratio_stddev = ratio_stddev
        self.p_value = p_value
        self.significant = p_value is not None and p_value < SIGNIFICANCE

    def verdict(self) -> str:
        """The test's words, as the summary and the page say them."""
        if self.p_value is None:
            return TOO_FEW
        return f"{'significant' if self.significant else 'not significant'}, Mann-Whitney U p = {self.p_value:.2g}"


def compare(
    named: list[tuple[str, Summary, list[float]]], reference: int | None = None
) -> tuple[int, list[Comparison]] | None:
    """The reference (``reference``'s place, else the fastest by mean) and every other command
    relative to it; None for fewer than two."""
    if len(named) < 2:
        return None
    if reference is None:
        reference = min(range(len(named)), key=lambda index: named[index][1].mean)
    _, base, base_times = named[reference]
    others = []
    for index, (name, summary, times) in enumerate(named):
        if index != reference:
            value, spread = ratio(summary, base)
            others.append(Comparison(index, name, value, spread, mann_whitney(times, base_times)))
    return reference, others
