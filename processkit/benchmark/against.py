"""A benchmark against an earlier export (``--baseline FILE``, ``baseline=``): the export read
and checked before the first run, so a wrong file costs nothing; the comparison attached to the
result (and, with a threshold, the gate's decisions); the gate's failure (119,
``bench_regressed``) raised after every run and every export. The same for the CLI and for the
API's bench process, each naming the option as its caller spells it.
"""

from __future__ import annotations

from ..errors import Failure, Kind
from .options import BY_DEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .plan import Options
    from .recorded import RecordedBench
    from .result import BenchResult


def read(path: str | None) -> RecordedBench | None:
    """The checked baseline export at ``path``, or None when none was given."""
    if path is None:
        return None
    from . import recorded

    earlier = recorded.from_json(recorded.load(path), path)
    if not earlier.measured("wall"):
        raise Failure(Kind.EVENTS_INVALID, f"the baseline {path} holds no command with a finished run")
    return earlier


def attach(result: BenchResult, earlier: RecordedBench, file: str, threshold: float | None, options: Options) -> None:
    """Compare ``result`` with the baseline, by the benchmark's metric where the baseline has it
    (CPU time needs its per-run figures: ours, not hyperfine's); with a ``threshold``
    (``--fail-if-slower``), the gate's decisions too (``gate``), in the words of the caller's
    ``options`` (``named``: flags or keywords; the run count it gave)."""
    from . import baseline, gate

    metric = earlier.metric_for(result.metric)
    # every command with runs, paired as the gate pairs them: one whose CPU time was not measured
    # (null) on a side is still paired, and its verdict says so (``baseline.against``)
    by_cpu = metric == "cpu"
    current = [
        (
            r.command.name,
            r.command.text,
            *((r.cpu_summary, r.cpu_times) if by_cpu else (r.summary, r.times)),
            (r.timed_out, len(r.runs)),
        )
        for r in result.results
        if r.summary
    ]
    timeout_ms = result.settings.get("timeout_ms")  # a baseline's runs as long count as timed out
    result.baseline = baseline.against(current, earlier.samples(metric, True, timeout_ms), file, metric, earlier.joined)
    if threshold is not None:
        flag = options.named.given(BY_DEST["fail_if_slower"], gate.percent(threshold))
        one_cpu = options.named.given(BY_DEST["cpus"], "N")
        decisions = gate.decide(result, earlier, threshold, flag, lambda count: more_runs(options, count), one_cpu)
        result.gate = gate.to_json(decisions, threshold)


def more_runs(options: Options, count: int) -> str:
    """What to give for ``count`` runs or more, as the caller gave its run count: ``--runs 5``
    (``runs=5``) where it gave ``--runs``, else ``--min-runs 5`` and, where its ``--max-runs`` is
    lower, that too: ``--runs`` cannot be used with either (``options.CONFLICTS``), and advice
    naming it was a usage error to the user who followed it with ``--min-runs`` given (a default
    minimum cannot be told from one given, so it is advised alike)."""
    named = options.named
    if options.runs is not None:
        return named.given(BY_DEST["runs"], str(count))
    words = named.given(BY_DEST["min_runs"], str(count))
    if options.max_runs is not None and options.max_runs < count:
        words += " and " + named.given(BY_DEST["max_runs"], str(count))
    return words


def check_gate(result: BenchResult) -> None:
    """Fail (119) when the gate found a command slower than its baseline beyond the threshold,
    on the figure it names (``gate``: what a busy machine's load explains never fails)."""
    if result.gate is None or result.baseline is None:
        return  # no gate asked for: its module is not even loaded (every benchmark's end)
    from . import gate as judged, gate_words

    slower = [judged.Decision(**entry) for entry in result.gate["commands"] if entry["outcome"] == judged.REGRESSED]
    if slower:
        worst = max(slower, key=lambda entry: entry.change_percent or 0.0)
        others = f" (and {len(slower) - 1} more)" if len(slower) > 1 else ""
        raise Failure(Kind.BENCH_REGRESSED, gate_words.said(worst, result.baseline.file) + others)
