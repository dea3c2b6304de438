"""``bench --baseline FILE [--fail-if-slower PCT]``: the benchmark against an earlier export
(ours or hyperfine's), shown after the summary, carried in the exports, and, with the gate, a
significant slowdown beyond PCT of any command fails the benchmark (119, ``bench_regressed``).

The baseline is read and checked before the first run, so a wrong file costs nothing.
"""

from __future__ import annotations

from ..benchmark import options as measured_options
from ..errors import Failure, Kind
from ..text import sanitize
from .parsing import Once

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..grammar import Naming


def add_flags(add) -> None:
    add(
        "--baseline",
        action=Once,
        metavar="FILE",
        help="compare each command with an earlier --export-json (ours or hyperfine's), by name or command",
    )
    option = measured_options.BY_FLAG["--fail-if-slower"]
    add(option.flag, action=Once, metavar=option.metavar, help=option.help)


def read(args):
    """The checked baseline export named by ``--baseline``, or None (``--fail-if-slower`` was
    read with the measured options, ``benchmark.options``)."""
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


def gate(result, threshold: float | None, named: Naming) -> None:
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
            f"{sanitize(result.baseline.file)} (Mann-Whitney U p = {worst.p_value:.2g}), beyond "
            f"{named.given(measured_options.BY_DEST['fail_if_slower'], f'{threshold:g}')} %{others}",
        )
