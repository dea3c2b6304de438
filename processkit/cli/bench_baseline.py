"""``bench --baseline FILE [--fail-if-slower PCT]``: the benchmark against an earlier export
(ours or hyperfine's), shown after the summary, carried in the exports, and, with the gate, a
significant slowdown beyond PCT of any command fails the benchmark (119, ``bench_regressed``).

The baseline is read and checked before the first run, so a wrong file costs nothing.
"""

from __future__ import annotations

from ..benchmark import options as measured_options
from ..errors import Failure, Kind
from ..grammar import FLAGS
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


def attach(result, earlier, file: str, threshold: float | None = None, named: Naming | None = None) -> None:
    """Compare ``result`` (a BenchResult) with the baseline, by the benchmark's metric where
    the baseline has it (CPU time needs its per-run figures: ours, not hyperfine's); with a
    ``threshold`` (``--fail-if-slower``), the gate's decisions too (``benchmark.gate``)."""
    from ..benchmark import baseline, gate

    metric = earlier.metric_for(result.metric)
    if metric == "cpu":
        current = [
            (r.command.name, r.command.text, r.cpu_summary, r.cpu_times) for r in result.results if r.cpu_summary
        ]
    else:
        current = [(r.command.name, r.command.text, r.summary, r.times) for r in result.results if r.summary]
    result.baseline = baseline.against(current, earlier.samples(metric), file, metric)
    if threshold is not None:
        flag = (named or FLAGS).given(measured_options.BY_DEST["fail_if_slower"], f"{threshold:g}")
        result.gate = gate.to_json(gate.decide(result, earlier, threshold, flag), threshold)


def lines(result) -> list[str]:
    from ..benchmark import baseline, gate

    if result.baseline is None:
        return []
    found = ["", *baseline.render(result.baseline)]
    if result.gate is not None:
        decisions = [gate.Decision(**entry) for entry in result.gate["commands"]]
        found += ["", *gate.lines(decisions, result.gate["threshold_percent"], result.baseline.file)]
    return found


def gate(result) -> None:
    """Fail (119) when the gate found a command slower than its baseline beyond the threshold,
    on the figure it names (``benchmark.gate``: what a busy machine's load explains never fails)."""
    from ..benchmark import gate as judged

    if result.gate is None or result.baseline is None:
        return
    slower = [judged.Decision(**entry) for entry in result.gate["commands"] if entry["outcome"] == judged.REGRESSED]
    if slower:
        worst = max(slower, key=lambda entry: entry.change_percent or 0.0)
        others = f" (and {len(slower) - 1} more)" if len(slower) > 1 else ""
        raise Failure(Kind.BENCH_REGRESSED, judged.said(worst, result.baseline.file) + others)
