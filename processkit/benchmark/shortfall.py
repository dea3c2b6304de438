"""The benchmark's verdict once every run is done: whether it fell short of what was asked
(``shortfall``), for the CLI and the runner service alike."""

from __future__ import annotations

from ..errors import Failure, Kind
from ..text import quoted
from .options import BY_DEST, switched_on
from .plan import Options
from .result import BenchResult


def shortfall(result: BenchResult, options: Options) -> Failure | None:
    """The benchmark's failure once every run is done, if it failed: a command none of whose
    runs finished, or (a run ended by ``--timeout`` is left out) one with fewer finished runs
    than ``--runs``/``--min-runs`` asks for, unless every failure is ignored (bare
    ``--ignore-failure``: a list of exit codes says nothing of timeouts)."""
    for command_result in result.results:
        if command_result.summary is None:
            return Failure(Kind.BENCH_FAILED, f"every run of {quoted(command_result.command.name)} timed out")
    needed, dest = (options.runs, "runs") if options.runs is not None else (options.min_runs, "min_runs")
    named = options.named
    asked = named.given(BY_DEST[dest], str(needed))
    if dest == "min_runs" and options.max_runs == needed:  # maybe the implicit minimum, lowered to it
        asked = f"the {needed} runs asked for ({named.given(BY_DEST['max_runs'], str(needed))})"
    if options.ignore_failure is True:
        return None
    for command_result in result.results:
        finished = len(command_result.measured)
        if command_result.timed_out and finished < needed:
            return Failure(
                Kind.BENCH_FAILED,
                f"only {finished} of {len(command_result.runs)} runs of {quoted(command_result.command.name)} "
                f"finished within {named(BY_DEST['timeout'])}, fewer than {asked}; "
                f"use {switched_on(named, 'ignore_failure')} to accept them",
            )
    return None
