"""The benchmark's printout: the summary ``bench`` prints, laid out as hyperfine prints it (its
units, alignment and comparison wording), plus the median, CPU, memory, the timed-out count and
the significance of each difference. Named apart from ``CommandResult.summary`` (the figures it
prints, ``stats.Summary``)."""

from __future__ import annotations

import re

from ..text import plural, quoted, sanitize
from .plan import TIME_UNITS
from .result import BenchResult, CommandResult
from .words import scan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .host_load import RssFloor
    from .stats import Comparison

MIB = 1024 * 1024
# Words only a shell runs (its builtins with no program of their name, its keywords) and the
# characters of its syntax when unquoted (operators, expansions, globs, a tilde, a newline
# between commands): a line using them is one -N (no shell) cannot run, so it is not offered.
# (``{`` and ``[[`` are SHELL_SYNTAX's: unquoted, their first character is caught there.)
SHELL_ONLY = frozenset(
    ". : source exit return break continue cd export unset set shift eval exec readonly trap ulimit umask alias "
    "unalias local declare typeset let shopt wait hash times if for while until case function select ! "
    "read type command getopts jobs fg bg disown pushd popd dirs builtin enable history logout suspend fc "
    "compgen complete mapfile readarray bind caller coproc time".split()
)
SHELL_SYNTAX = frozenset("|&;<>()$`*?~[{\n")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
UNITS = dict(zip(TIME_UNITS, (("µs", 1e6), ("ms", 1e3), ("s", 1.0))))


def unit_for(seconds: float, forced: str | None = None) -> tuple[str, float]:
    """hyperfine's choice: µs below a millisecond, ms below a second, else s (or ``--time-unit``)."""
    if forced is not None:
        return UNITS[forced]
    if seconds < 0.001:
        return UNITS["microsecond"]
    if seconds < 1:
        return UNITS["millisecond"]
    return UNITS["second"]


def number(seconds: float, unit: tuple[str, float]) -> str:
    """The figure alone, at hyperfine's precision: three decimals in seconds, one otherwise."""
    return f"{seconds * unit[1]:.3f}" if unit[0] == "s" else f"{seconds * unit[1]:.1f}"


def duration(seconds: float, unit: tuple[str, float] | None = None) -> str:
    unit = unit or unit_for(seconds)
    return f"{number(seconds, unit)} {unit[0]}"


def memory(value: float | None) -> str:
    return "n/a" if value is None else f"{value / MIB:.1f} MiB"


def _rss_words(s, own: RssFloor | None, runs: list) -> str:
    """What the Max RSS figures are: the command's (rusage's ``ru_maxrss``, hyperfine's field), or,
    where no run read above the spawner's own resident set (``host_load.RssFloor``: no run read
    below ``low``, none was spawned from more than ``high``), bench's own: every run read it, so
    the command's own is at most that. bench grows as it runs: where the floor spans a range, a
    run spawned low in it that read more read its own, so the figures only may be bench's.
    Short: docs/bench.md says the rest."""
    low, high = (None, None) if own is None else (own.low(runs), own.high)
    if low is None or high is None or s.memory_max is None or s.memory_max > high:
        return "the command's, rusage: hyperfine's memory_usage_byte"
    if memory(low) == memory(high):  # the mean and the highest read that figure too
        return "bench's own: the command's is at most this"
    return f"may be bench's own: {memory(low)} to {memory(high)}"


def heading(index: int, result: CommandResult) -> str:
    """A command's first line, hyperfine's, printed as its steps begin."""
    return f"Benchmark {index + 1}: {sanitize(result.command.label)}"


def command_figures(result: CommandResult, forced: str | None = None) -> list[str]:
    """A command's block below its heading: its figures."""
    s = result.summary
    if s is None:
        return [f"  no run finished: {result.timed_out} timed out"]
    unit = unit_for(s.mean, forced)
    cpu = "[CPU: not measured]"  # a run shared the runner's counter (``ChildrenUsage``): no figure, not 0
    if s.user is not None and s.system is not None:
        cpu = f"[User: {duration(s.user, unit)}, System: {duration(s.system, unit)}]"
    if s.stddev is None:  # one run: hyperfine's "abs" line, no range
        lines = [f"  Time (abs ≡):        {duration(s.mean, unit):>8}  {'':>8}     {cpu}"]
    else:
        low, high = duration(s.min, unit), duration(s.max, unit)
        lines = [
            f"  Time (mean ± σ):     {duration(s.mean, unit):>8} ± {duration(s.stddev, unit):>8}    {cpu}",
            f"  Range (min … max):   {low:>8} … {high:>8}    {plural(s.runs, 'run')}",
        ]
    lines += [
        f"  Median:              {duration(s.median, unit):>8}",
        *_cpu_line(result, forced),
        f"  Max RSS:             mean {memory(s.memory_mean)}, highest {memory(s.memory_max)}    "
        f"({_rss_words(s, result.rss_floor, result.runs)})",
    ]
    if result.tree_memory is not None:
        mean, top = result.tree_memory
        lines.append(
            f"  Tree peak memory:    mean {memory(mean)}, highest {memory(top)}    (its whole tree's group, page cache included)"
        )
    lines += _counter_lines(result)
    if result.timed_out:
        lines.append(f"  Timed out:           {plural(result.timed_out, 'run')} (left out)")
    return lines


def _counter_lines(result: CommandResult) -> list[str]:
    """The perf counters the host has, each its mean per run (``counters.py``); those it lacks
    are said once for the whole benchmark (``counters_missing``), not per command."""
    from .counters import shown

    return [f"  {label + ':':<21}{value}" for label, value in shown(result.counters)]


def _cpu_line(result: CommandResult, forced: str | None) -> list[str]:
    """The whole tree's CPU (ours); said unmeasured where a run's was (a process-group run that
    shared the runner's counter), never left out unseen nor a 0."""
    cpu = result.cpu_summary
    if cpu is None:
        return ["  CPU:                 not measured    (user+system, whole tree)"]
    unit = unit_for(cpu.mean or 1e-9, forced)
    spread = duration(cpu.stddev, unit) if cpu.stddev is not None else "n/a"
    return [f"  CPU (mean ± σ):      {duration(cpu.mean, unit):>8} ± {spread:>8}    (user+system, whole tree)"]


def warnings(result: CommandResult, ignoring: bool = False) -> list[str]:
    found = []
    name = quoted(result.command.label)
    if ignoring and any(run.exit_code not in (0, None) for run in result.measured):
        found.append("Warning: Ignoring non-zero exit code.")
    if result.summary is not None and result.timed_out * 2 >= len(result.runs):
        found.append(
            f"Warning: {result.timed_out} of {len(result.runs)} runs of {name} timed out: "
            f"the figures are the {len(result.measured)} that finished in time, not the command's typical run."
        )
    if result.leftovers:
        found.append(
            f"Warning: the runs of {name} left {plural(result.leftovers, 'process', 'processes')}"
            " outside their process group or cgroup (a setsid daemon, a write to cgroup.procs?): each was "
            "ended after its run, and what it used after that run's figures were read is in no figure."
        )
    if result.first_slow and result.summary is not None:
        found.append(
            f"Warning: the first run of {name} was markedly slower than the rest "
            f"({duration(result.times[0])}): caches filled by it? Try --warmup or --prepare."
        )
    if result.outliers:
        found.append(
            f"Warning: {plural(len(result.outliers), 'statistical outlier')} in {name}: other load on the "
            "host? Try --warmup, --cpus, or a quieter machine."
        )
    if result.summary is not None and result.summary.mean < 0.005:
        hint = " Try -N (no shell)." if _runs_without_a_shell(result) else ""
        found.append(f"Warning: {name} took less than 5 ms: the figures are near the measurement floor.{hint}")
    return found


def _runs_without_a_shell(result: CommandResult) -> bool:
    """Whether -N would help: a shell line that is a plain program's invocation."""
    return result.command.shell and plain_invocation(result.command.text)


def plain_invocation(line: str) -> bool:
    """Whether ``line`` is a program's invocation as -N splits it (``echo 'a;b'`` is; ``exit 3``,
    ``cd src``, ``FOO=1 prog``, ``a | b``, ``ls *`` need the shell they would lose): none of the
    shell's syntax is read as the shell's (``words.scan``: a quoted or escaped one is the program's)."""
    try:
        words, bare = scan(line)
    except ValueError:
        return False
    return (
        bool(words) and words[0] not in SHELL_ONLY and not ASSIGNMENT.match(words[0]) and SHELL_SYNTAX.isdisjoint(bare)
    )


def comparison(result: BenchResult, sort: str = "auto") -> list[str]:
    """hyperfine's two layouts: by mean time, the reference and how each other command compares
    ("N ± M times faster than"); by command (``--sort command``), every ratio in given order."""
    reference = result.reference
    if reference is None:
        return []
    by = " (by CPU time)" if result.metric == "cpu" else ""
    compared = result.compared
    zero = [r for r in compared if _mean(r, result.metric) <= 0]
    if reference.summary is not None and zero:
        hint = " Try -N (no shell)." if any(_runs_without_a_shell(r) for r in zero) else ""
        return [
            "Note: the comparison cannot be computed, as some mean times are zero: a command faster than "
            f"the shell's start-up (which is taken off), or too fast to measure.{hint}"
        ]
    if sort == "command":
        lines = [f"Relative speed comparison{by}"]
        ratios = {id(compared[c.index]): c for c in result.comparison}
        for command_result in compared:
            other = ratios.get(id(command_result))
            if other is None:
                lines.append(f"  {1.0:10.2f}{'':8}  {sanitize(command_result.command.label)}")
                continue
            shown, stddev = _speed(other)
            spread = f" ± {stddev:5.2f}" if stddev is not None else " " * 8
            lines.append(f"  {shown:10.2f}{spread}  {sanitize(command_result.command.label)}")
        return lines
    lines = [f"Summary{by}", f"  {sanitize(reference.command.label)} ran"]
    others = sorted(result.comparison, key=lambda c: c.ratio)
    for other in others:
        label = sanitize(compared[other.index].command.label)
        shown, stddev = _speed(other)
        spread = f" ± {stddev:.2f}" if stddev is not None else ""
        verdict = other.verdict()
        if other.ratio > 1:
            lines.append(f"{shown:8.2f}{spread} times faster than {label} ({verdict})")
        elif other.ratio < 1:
            lines.append(f"{shown:8.2f}{spread} times slower than {label} ({verdict})")
        else:
            lines.append(f"    As fast ({shown:.2f}{spread}) as {label} ({verdict})")
    return lines


def _speed(other: Comparison) -> tuple[float, float | None]:
    """hyperfine's relative speed of a compared command: the ratio of the two means the larger
    over the smaller (never below 1: a command faster than ``--reference`` reads as how many
    times faster), with its standard deviation scaled alike (None where it has none)."""
    shown = 1 / other.ratio if 0 < other.ratio < 1 else other.ratio
    if other.ratio_stddev is None or other.ratio <= 0:
        return shown, None
    return shown, shown * other.ratio_stddev / other.ratio


def _mean(result: CommandResult, metric: str) -> float:
    figures = result.cpu_summary if metric == "cpu" else result.summary
    return figures.mean if figures is not None else 0.0


def startup_line(result: BenchResult) -> list[str]:
    startup = result.settings.get("shell_startup")
    if not startup:
        return []
    return [
        f"Shell start-up: {duration(startup['wall'])} ({sanitize(startup['command'])}, mean of "
        f"{startup['runs']} runs), subtracted from every shell command's times; -N runs without a shell.",
        "",
    ]


class Pieces:
    """The printout in the pieces printed as the benchmark goes, hyperfine's way: a command's
    ``Benchmark N:`` line (``header``) as it begins, the rest of its block (``block``) once that
    command is over, in order, and what is left (``rest``: the blocks not printed yet, then the
    counters missing and the comparison) at the end; so a failure or a stop keeps the finished
    commands' blocks and names the one that was running. The pieces' lines, one after another,
    are the whole printout's (``render``), byte for byte."""

    def __init__(self, count: int, time_unit: str | None = None, sort: str = "auto"):
        self.count = count  # the commands: each block but the last ends with a blank line
        self.time_unit = time_unit
        self.sort = sort
        self.printed = 0  # the commands whose blocks are out, the first ones
        self.headed = 0  # the commands whose headers are out, the first ones

    def header(self, result: BenchResult, index: int) -> list[str]:
        """Command ``index``'s ``Benchmark N:`` line (``result``: its results so far, in order), led
        by the shell's start-up line before the first."""
        lines = startup_line(result) if self.headed == 0 else []
        self.headed = index + 1
        return [*lines, heading(index, result.results[index])]

    def block(self, result: BenchResult, index: int) -> list[str]:
        """Command ``index``'s block (``result``: its results so far, in order), its header unless
        it is out, each but the last ended by a blank line (hyperfine's: a shown output of the next
        command comes after it)."""
        lines = self.header(result, index) if self.headed <= index else []
        command_result = result.results[index]
        lines += command_figures(command_result, self.time_unit)
        lines += [f"  {line}" for line in warnings(command_result, bool(result.settings.get("ignore_failure")))]
        self.printed = index + 1
        return lines + [""] if index < self.count - 1 else lines

    def rest(self, result: BenchResult) -> list[str]:
        """Everything not printed yet of the whole ``result``."""
        lines: list[str] = []
        for index in range(self.printed, len(result.results)):
            lines += self.block(result, index)
        from .counters import missing_line

        said = missing_line(result.settings.get("counters_missing") or [])
        tail = [*said, "", *comparison(result, self.sort)] if said else comparison(result, self.sort)
        while tail and not tail[-1]:
            tail.pop()
        return lines + ["", *tail] if tail else lines


def render(result: BenchResult, time_unit: str | None = None, sort: str = "auto") -> str:
    """The whole printout at once (the tests' reference for ``Pieces``, printed a block at a time)."""
    return "".join(f"{line}\n" for line in Pieces(len(result.results), time_unit, sort).rest(result))
