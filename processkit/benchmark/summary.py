"""The benchmark's summary as text, laid out as hyperfine prints it, plus memory, the timed-out
count and the significance of each difference."""

from __future__ import annotations

from ..text import sanitize
from .result import BenchResult, CommandResult

MIB = 1024 * 1024


def unit_for(seconds: float) -> tuple[str, float]:
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 0.001:
        return "ms", 1e3
    return "µs", 1e6


def duration(seconds: float, unit: tuple[str, float] | None = None) -> str:
    name, scale = unit or unit_for(seconds)
    return f"{seconds * scale:.1f} {name}"


def memory(value: float | None) -> str:
    return "n/a" if value is None else f"{value / MIB:.1f} MiB"


def command_block(index: int, result: CommandResult) -> list[str]:
    lines = [f"Benchmark {index + 1}: {sanitize(result.command.name)}"]
    s = result.summary
    if s is None:
        lines.append(f"  no run finished: {result.timed_out} timed out")
        return lines
    unit = unit_for(s.mean)
    spread = duration(s.stddev, unit) if s.stddev is not None else "n/a"
    lines += [
        f"  Time (mean ± σ):     {duration(s.mean, unit):>9} ± {spread:>8}    "
        f"[User: {duration(s.user, unit)}, System: {duration(s.system, unit)}]",
        f"  Range (min … max):   {duration(s.min, unit):>9} … {duration(s.max, unit):>8}    "
        f"{s.runs} run{'s' if s.runs != 1 else ''}",
        f"  Median:              {duration(s.median, unit):>9}",
        *_cpu_line(result),
        f"  Memory (mean … max): {memory(s.memory_mean):>9} … {memory(s.memory_max):>8}",
    ]
    if result.timed_out:
        lines.append(f"  Timed out:           {result.timed_out} run{'s' if result.timed_out != 1 else ''} (left out)")
    return lines


def _cpu_line(result: CommandResult) -> list[str]:
    cpu = result.cpu_summary
    if cpu is None:
        return []
    unit = unit_for(cpu.mean or 1e-9)
    spread = duration(cpu.stddev, unit) if cpu.stddev is not None else "n/a"
    return [f"  CPU (mean ± σ):      {duration(cpu.mean, unit):>9} ± {spread:>8}    (user+system, whole tree)"]


def warnings(result: CommandResult) -> list[str]:
    found = []
    if result.summary is not None and result.timed_out * 2 >= len(result.runs):
        found.append(
            f"Warning: {result.timed_out} of {len(result.runs)} runs of '{sanitize(result.command.name)}' timed out: "
            f"the figures are the {len(result.measured)} that finished in time, not the command's typical run."
        )
    if result.leftovers:
        found.append(
            f"Warning: the runs of '{sanitize(result.command.name)}' left {result.leftovers} process"
            f"{'es' if result.leftovers != 1 else ''} outside their process group (a setsid daemon?): each was "
            "ended after its run, and what it used after that run's figures were read is in no figure."
        )
    if result.first_slow and result.summary is not None:
        found.append(
            f"Warning: the first run of '{sanitize(result.command.name)}' was markedly slower than the rest "
            f"({duration(result.times[0])}): caches filled by it? Try --warmup or --prepare."
        )
    if result.outliers:
        found.append(
            f"Warning: {len(result.outliers)} statistical outlier{'s' if len(result.outliers) != 1 else ''} "
            f"in '{sanitize(result.command.name)}': other load on the host? Try --warmup, --cpus, or a quieter machine."
        )
    if result.summary is not None and result.summary.mean < 0.005:
        found.append(
            f"Warning: '{sanitize(result.command.name)}' took less than 5 ms: the figures are near the measurement floor."
        )
    return found


def comparison(result: BenchResult) -> list[str]:
    if result.fastest is None:
        return []
    by = " (by CPU time)" if result.metric == "cpu" else ""
    lines = [f"Summary{by}", f"  '{sanitize(result.fastest)}' ran"]
    for other in result.comparison:
        spread = f" ± {other.ratio_stddev:.2f}" if other.ratio_stddev is not None else ""
        verdict = (
            "n/a"
            if other.p_value is None
            else f"{'significant' if other.significant else 'not significant'}, Mann-Whitney U p = {other.p_value:.2g}"
        )
        lines.append(f"    {other.ratio:.2f}{spread} times faster than '{sanitize(other.name)}' ({verdict})")
    return lines


def render(result: BenchResult) -> str:
    lines: list[str] = []
    for index, command_result in enumerate(result.results):
        lines += command_block(index, command_result)
        lines += [f"  {line}" for line in warnings(command_result)]
        lines.append("")
    lines += comparison(result)
    return "\n".join(lines).rstrip("\n") + "\n"
