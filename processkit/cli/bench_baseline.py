"""``bench --baseline FILE [--fail-if-slower PCT]``: the benchmark against an earlier export
(ours or hyperfine's), shown after the summary, carried in the exports, and, with the gate, a
significant slowdown beyond PCT of any command fails the benchmark (119, ``bench_regressed``).

The baseline is read and checked before the first run, so a wrong file costs nothing.
"""

from __future__ import annotations

from ..errors import Failure, Kind, usage
from ..text import sanitize
from .parsing import Once


def add_flags(add) -> None:
    add(
        "--baseline",
        action=Once,
        metavar="FILE",
        help="compare each command with an earlier --export-json (ours or hyperfine's), by name or command",
    )
    add(
        "--fail-if-slower",
        action=Once,
        metavar="PCT",
        help="with --baseline: exit 119 when a command is significantly slower than the baseline by more than PCT %%",
    )


def read(args):
    """The checked baseline export named by ``--baseline``, or None; the flags' usage errors."""
    threshold = args.fail_if_slower
    if threshold is not None:
        args.fail_if_slower = _percent(threshold)
        if args.baseline is None:
            raise usage("the argument '--fail-if-slower <PCT>' requires '--baseline <FILE>'")
    if args.baseline is None:
        return None
    from ..benchmark import recorded
    from ..report import bench_page

    earlier = recorded.from_json(bench_page.load(args.baseline), args.baseline)
    if not earlier.measured("wall"):
        raise Failure(
            Kind.EVENTS_INVALID, f"the baseline {sanitize(args.baseline)} holds no command with a finished run"
        )
    return earlier


def _percent(text: str) -> float:
    digits = text.removesuffix("%")
    try:
        value = float(digits) if len(digits) <= 20 else None
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 1e6:
        raise usage(
            f"invalid value '{sanitize(text[:40])}' for '--fail-if-slower <PCT>': expected a percentage such as 5 or 2.5%"
        )
    return value


def attach(result, earlier, file: str) -> None:
    """Compare ``result`` (a BenchResult) with the baseline, by the benchmark's metric where
    the baseline has it (CPU time needs its per-run figures: ours, not hyperfine's)."""
    from ..benchmark import baseline

    metric = earlier.metric_for(result.metric)
    if metric == "cpu":
        current = [
            (r.command.name, r.command.text, r.cpu_summary, r.cpu_times) for r in result.results if r.cpu_summary
        ]
    else:
        current = [(r.command.name, r.command.text, r.summary, r.times) for r in result.results if r.summary]
    result.baseline = baseline.against(current, earlier.samples(metric), file, metric)


def lines(result) -> list[str]:
    from ..benchmark import baseline

    return [] if result.baseline is None else ["", *baseline.render(result.baseline)]


def gate(result, threshold: float | None) -> None:
    """Fail (119) when a command is significantly slower than its baseline by more than ``threshold`` %."""
    if threshold is None or result.baseline is None:
        return
    slower = result.baseline.regressions(threshold)
    if slower:
        worst = max(slower, key=lambda entry: entry.change_percent)
        others = f" (and {len(slower) - 1} more)" if len(slower) > 1 else ""
        raise Failure(
            Kind.BENCH_REGRESSED,
            f"'{sanitize(worst.command)}' is {worst.change_percent:.1f} % slower than the baseline "
            f"{sanitize(result.baseline.file)} (Mann-Whitney U p = {worst.p_value:.2g}), beyond --fail-if-slower "
            f"{threshold:g} %{others}",
        )
