"""A benchmark's result as typed values, and its JSON: hyperfine's shape plus our own fields.

``results[]`` carries hyperfine's keys (seconds; ``memory_usage_byte`` and ``exit_codes`` per
run, as hyperfine 1.16+ writes them), so scripts written for hyperfine's export read ours.
``memory_usage_byte``, ``user`` and ``system`` mean what they mean in hyperfine: the rusage of the
run's root as ``wait4`` reports it, the root's and its reaped descendants' (``ru_maxrss``: the
largest of them; the CPU times: their sum, so a process the root did not wait for is in none).
Beside them, per command: ``tree_peak_memory_byte`` per run (the whole tree's peak, its group's
high-water mark, as BenchExec's runexec reports it), ``counters`` (each perf counter's per-run
values, ``counters.py``), ``name``, ``argv``, per-run ``user_times``/``system_times`` (the
root's, as ``user``/``system``) and ``cpu_times`` (the whole tree's user+system: its group's
counters), ``off_cpu_times`` (wall less that and the tree's wait for a CPU), the runs' global ``order`` (interleaving is visible there), ``timed_out``,
``warmup_times``, ``cpu`` (statistics of ``cpu_times``), ``outliers``, ``memory_mean_byte``/``memory_max_byte``; at
the top level ``comparison`` (by wall or CPU time: its ``metric``) and ``processkit`` (the
options that shaped the runs).
"""

from __future__ import annotations

from ..plain import Plain
from .baseline import BaselineReport
from .measured import tree_cpu
from .plan import Command
from .stats import Comparison, Summary, compare, first_run_slow, outlier_indices, summarize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .host_load import RssFloor

# /2: memory_usage_byte is hyperfine's (ru_maxrss), tree_peak_memory_byte the group's; /3: user and
# system are hyperfine's (the root's rusage), cpu_times the tree's (before, user+system was the tree's)
FORMAT = "processkit-bench/3"


def counters_of(runs: list[TimedRun]) -> dict | None:
    """Each counter's per-run values (``{"instructions": [...], ...}``), None without counters;
    a counter the host lacks is None for the command, never a list of zeros."""
    opened = [run.counters for run in runs if run.counters is not None]
    if not opened or len(opened) != len(runs):
        return None
    names = list(opened[0])
    return {
        name: None if any(counts.get(name) is None for counts in opened) else [counts[name] for counts in opened]
        for name in names
    }


def _run_counters(counted: dict | None, index: int) -> dict | None:
    """One run's counters back from an export's ``counters`` (our own, read back by the API)."""
    if not counted:
        return None
    return {name: None if values is None else values[index] for name, values in counted.items()}


class TimedRun(Plain):
    """One timed run: its place in the whole benchmark's order, figures in seconds and bytes."""

    __slots__ = (
        "order",
        "wall",
        "user",
        "system",
        "memory",
        "exit_code",
        "timed_out",
        "tree_memory",
        "counters",
        "cpu",
        "off_cpu",
    )

    def __init__(
        self,
        order: int,
        wall: float | None,
        user: float | None,
        system: float | None,
        memory: int | None,
        exit_code: int | None,
        timed_out: bool,
        tree_memory: int | None = None,
        counters: dict | None = None,
        cpu: float | None = None,
        off_cpu: float | None = None,
    ):
        self.order = order
        self.wall = wall  # None for a timed-out run
        self.user = user  # the root's rusage (hyperfine's); None: not measured, never taken as 0
        self.system = system
        self.cpu = cpu  # the whole tree's user+system (its group's counters); None: not measured
        self.memory = memory  # hyperfine's memory_usage_byte: the root's ru_maxrss (wait4), bytes
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.tree_memory = tree_memory  # the whole tree's peak: its group's high-water mark, bytes
        self.counters = counters  # perf counters of the tree, by name (None: none opened)
        self.off_cpu = off_cpu  # wall less the tree's CPU and its wait for a CPU (``measured.off_cpu``); None: not read


class CommandResult:
    """A command's timed runs and what the statistics say about them."""

    rss_floor: RssFloor | None = None  # bench's own resident set around its runs (a session's result only)

    def __init__(
        self, command: Command, runs: list[TimedRun], warmups: list[float | None] | None = None, leftovers: int = 0
    ):
        self.command = command
        self.runs = runs
        self.warmups = warmups or []  # the warm-up runs' times, in order (shown, never counted)
        self.leftovers = leftovers  # processes its runs left outside their boundary, ended after each (shown)
        self.measured = [run for run in runs if not run.timed_out and run.wall is not None]
        self.timed_out = len(runs) - len(self.measured)
        times = self.times
        self.summary: Summary | None = (
            summarize(
                times,
                [run.user for run in self.measured if run.user is not None],
                [run.system for run in self.measured if run.system is not None],
                [run.memory for run in self.measured],
            )
            if times
            else None
        )
        # the tree's user+system of every run; none at all where a run's was not measured: a
        # figure over some runs only would be compared as if over all (the gate has no CPU then)
        cpu = [run.cpu for run in self.measured if run.cpu is not None]
        self.cpu_times = cpu if len(cpu) == len(self.measured) else []
        self.cpu_summary = summarize(self.cpu_times, [], [], []) if self.cpu_times else None
        off = [run.off_cpu for run in self.measured if run.off_cpu is not None]
        self.off_cpu_times = off if len(off) == len(self.measured) else []  # every run's, or none (as cpu_times)
        trees = [run.tree_memory for run in self.measured if run.tree_memory is not None]
        self.tree_memory = (sum(trees) / len(trees), max(trees)) if trees else None  # mean, highest
        self.counters = counters_of(self.measured)  # name -> per-run values (None: the host lacks it)
        self.instructions: list | None = (self.counters or {}).get("instructions")
        self.outliers = outlier_indices(times)
        self.first_slow = first_run_slow(times)

    @property
    def times(self) -> list[float]:
        return [run.wall for run in self.measured if run.wall is not None]

    def to_json(self) -> dict:
        s = self.summary
        record: dict = {
            "command": self.command.name,
            "mean": s.mean if s else None,
            "stddev": s.stddev if s else None,
            "median": s.median if s else None,
            "user": s.user if s else None,
            "system": s.system if s else None,
            "min": s.min if s else None,
            "max": s.max if s else None,
            "times": self.times,
            "memory_usage_byte": [run.memory for run in self.measured],
            "exit_codes": [run.exit_code for run in self.measured],
        }
        record["tree_peak_memory_byte"] = [run.tree_memory for run in self.measured]
        if self.command.parameters:
            record["parameters"] = dict(sorted(self.command.parameters.items()))  # by name, as hyperfine's map
        record.update(
            {
                "name": self.command.name,
                "text": self.command.text,
                "argv": list(self.command.argv),
                "user_times": [run.user for run in self.measured],
                "system_times": [run.system for run in self.measured],
                "cpu_times": [run.cpu for run in self.measured],
                "off_cpu_times": [run.off_cpu for run in self.measured],
                "order": [run.order for run in self.measured],
                "timed_out": self.timed_out,
                "timed_out_order": [run.order for run in self.runs if run.timed_out],
                "warmup_times": self.warmups,
                "outliers": self.outliers,
                "first_run_slow": self.first_slow,
                "cpu": None
                if self.cpu_summary is None
                else {key: getattr(self.cpu_summary, key) for key in ("mean", "stddev", "median", "min", "max")},
                "memory_mean_byte": s.memory_mean if s else None,
                "memory_max_byte": s.memory_max if s else None,
                "tree_peak_memory_mean_byte": self.tree_memory[0] if self.tree_memory else None,
                "tree_peak_memory_max_byte": self.tree_memory[1] if self.tree_memory else None,
                "counters": self.counters,
            }
        )
        return record


class BenchResult:
    """The whole benchmark: every command's result, the comparison, and the settings used."""

    @classmethod
    def from_json(cls, data: dict) -> BenchResult:
        """The result back from its ``to_json()`` (what ``--export-json`` wrote): the runs are
        read back and the statistics computed again, so they are this module's, not the file's."""
        results = []
        for record in data["results"]:
            command = Command(record["name"], record["text"], tuple(record["argv"]), record.get("parameters") or {})
            measured = zip(
                record["order"],
                record["times"],
                record["user_times"],
                record["system_times"],
                record["memory_usage_byte"],
                record["exit_codes"],
            )
            trees = record.get("tree_peak_memory_byte") or [None] * len(record["times"])
            counted = record.get("counters")
            cpu = tree_cpu(record.get("cpu_times"), record["user_times"], record["system_times"])
            runs = [
                TimedRun(o, wall, user, system, memory, code, False, tree, _run_counters(counted, index), cpu[index])
                for index, ((o, wall, user, system, memory, code), tree) in enumerate(zip(measured, trees))
            ]
            for run, off_cpu in zip(runs, record.get("off_cpu_times") or []):
                run.off_cpu = off_cpu
            runs += [TimedRun(o, None, 0.0, 0.0, None, None, True) for o in record["timed_out_order"]]
            ordered = sorted(runs, key=lambda run: run.order)
            results.append(CommandResult(command, ordered, record.get("warmup_times")))
        settings = {key: value for key, value in data["processkit"].items() if key != "format"}
        result = cls(results, settings)
        if data.get("baseline") is not None:
            result.baseline = BaselineReport.from_json(data["baseline"])
        return result

    def __init__(self, results: list[CommandResult], settings: dict):
        self.results = results
        self.settings = settings
        self.metric = settings.get("metric", "wall")  # what the comparison ranks by: wall or CPU time
        cpu = self.metric == "cpu"
        figures = [(r, r.cpu_summary if cpu else r.summary, r.cpu_times if cpu else r.times) for r in results]
        summarized = [(r.command.name, s, times) for r, s, times in figures if s is not None]
        self.compared = [r for r, s, _ in figures if s is not None]  # the commands with figures, in order
        # --reference is the first command: the others are compared with it while it has figures
        given = 0 if settings.get("reference") and self.compared and self.compared[0] is results[0] else None
        compared = compare(summarized, given)
        self.reference: CommandResult | None = self.compared[compared[0]] if compared else None
        self.comparison: list[Comparison] = compared[1] if compared else []
        self.fastest: str | None = min(summarized, key=lambda item: item[1].mean)[0] if compared else None
        self.baseline: BaselineReport | None = None  # against an earlier export (bench --baseline)
        self.gate: dict | None = None  # the gate's decisions (--fail-if-slower, ``gate.to_json``)

    def to_json(self) -> dict:
        return {
            "results": [result.to_json() for result in self.results],
            "comparison": None
            if self.fastest is None
            else {
                "metric": self.metric,
                "fastest": self.fastest,
                "reference": self.reference.command.name if self.reference is not None else None,
                "others": [
                    {
                        "command": c.name,
                        "ratio": c.ratio,
                        "ratio_stddev": c.ratio_stddev,
                        "p_value": c.p_value,
                        "test": "mann-whitney-u",
                        "significant": c.significant,
                    }
                    for c in self.comparison
                ],
            },
            "processkit": {"format": FORMAT, **self.settings},
            **({} if self.baseline is None else {"baseline": self.baseline.to_json()}),
            **({} if self.gate is None else {"gate": self.gate}),
        }
