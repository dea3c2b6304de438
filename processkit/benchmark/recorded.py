"""A benchmark export read back, ours or hyperfine's: every field a reader uses is checked
before it is used, and the figures are computed again from the runs.

The file is someone else's input (an artefact from another machine, a hand-edited baseline), so
a wrong shape is a clear error naming the file and the field (114, as any invalid input), never
an exception from deep inside a page. Numbers are bounded before any arithmetic: a time is a
finite number of seconds under ``MAX_SECONDS``, a count an integer under ``MAX_COUNT`` (a
4,000-digit integer is refused by comparison, never converted to a float). Hyperfine's shape is
the common part (``command``, ``times``, ``user``, ``system``, ``memory_usage_byte``,
``exit_codes``); our own fields beside it (``name``, ``text``, ``order``, ``user_times``,
``system_times``, ``off_cpu_times``, ``warmup_times``, ``timed_out``, ``processkit``,
``baseline``) are read when present. The summary figures in the file (``mean``, ``min``, ...) are checked but not trusted:
the statistics are this module's, over the runs the file holds.
"""

from __future__ import annotations

import math

from ..bounded import BENCH_EXPORT, InputError, load_file
from ..errors import Failure, Kind
from ..plain import Plain
from ..text import plural
from ..userfiles import open_judged
from .baseline import BaselineReport, ended, read_back
from .host_load import Load
from .json_values import is_number, kind, magnitude
from .measured import tree_cpu
from .stats import Summary, outlier_indices, summarize

MAX_SECONDS = 1e9  # about 31 years: a larger "time" is not a run's
MAX_COUNT = 2**53  # an order, an exit code, a byte count: exact as a float too
MAX_COMMANDS = 10_000
TESTED_RUNS = 200_000  # runs a Mann-Whitney U sees, all commands together: its sorts stay bounded
MIN_TESTED = 50
MAX_NAME = 4096  # characters of a command's name or text that are kept (the rest is cut, marked)
ORIGIN_PROCESSKIT = "processkit"
ORIGIN_HYPERFINE = "hyperfine"
SUMMARY_KEYS = ("mean", "stddev", "median", "user", "system", "min", "max")


class RecordedCommand(Plain):
    """One command of an export: its runs (seconds, in the order they ran) and their figures."""

    name: str
    text: str
    times: list  # seconds, one per measured run
    order: list  # each run's place in the whole benchmark (hyperfine's: sequential)
    warmups: list  # the warm-up runs' seconds, drawn before the timed runs
    user: float | None  # mean user CPU per run, as the file gives it (hyperfine) or from user_times
    system: float | None
    cpu_times: list | None  # the tree's user+system per run (ours), None when the file has none or a run's is null
    memory: list  # per-run peak memory in bytes, only the measured ones
    timed_out: int | None  # None: the file does not say (hyperfine)
    summary: Summary | None = None
    cpu_summary: Summary | None = None
    outliers: list = []
    instructions: list | None = None  # per run, where the export's host counted them (ours)
    tree_memory: list = []  # per-run peak of the whole tree's group, bytes (ours, from processkit-bench/2)
    counters: dict | None = None  # perf counter name -> per-run counts, None where the host lacked it (ours)
    rss_floor: int | None = None  # bench's own resident set by the command's last run, its runs' floor (ours)
    cpu_recorded: bool = False  # the file records CPU time per run (ours: user_times, system_times), null or not
    # wall less the tree's CPU and its wait for a CPU, per run (ours); None where the file has none or a run's is null
    off_cpu_times: list | None = None


class RecordedBench(Plain):
    """A whole export: where it came from, its commands, and the settings it records."""

    source: str  # the file's name, for messages
    origin: str  # ORIGIN_PROCESSKIT or ORIGIN_HYPERFINE
    commands: list
    order: str  # interleaved, sequential, or how hyperfine ran them
    metric: str  # wall or cpu: what its comparison ranks by
    cpus: list | None
    interval: str | None = None  # what each time covers, as our export says (``timed_interval``)
    baseline: BaselineReport | None = None  # our export's own comparison with its baseline
    reference: bool = False  # ours, run with --reference: its first command is what the others are compared with
    load: Load | None = None  # what others took of the CPUs while it ran, and a quota held its runs back (ours)
    max_rss_floor: int | None = None  # bench's VmHWM by the last run, the highest command's ``rss_floor`` (ours)
    timeout_ms: int | None = None  # its --timeout (ours): a baseline's runs as long would have timed out
    joined: bool = False  # before processkit-bench/3 (ours): argv names space-joined, user/system the tree's CPU

    def metric_for(self, wanted: str) -> str:
        """``wanted`` where every measured command records it: CPU time needs it per run (ours;
        hyperfine's export has none, so wall time). A command whose runs' CPU time is recorded
        null (unmeasured) keeps CPU time: it is inconclusive by it, never judged by wall time."""
        has_cpu = all(command.cpu_recorded for command in self.commands if command.summary is not None)
        return "cpu" if wanted == "cpu" and has_cpu else "wall"

    def measured(self, metric: str | None = None) -> list[RecordedCommand]:
        """The commands with runs to compare, by ``metric`` (this export's own by default)."""
        if (metric or self.metric) == "cpu":
            return [command for command in self.commands if command.cpu_summary is not None]
        return [command for command in self.commands if command.summary is not None]

    def cpu_unmeasured(self) -> list[str]:
        """By CPU time, the names of the commands with runs none of whose CPU time was measured:
        they have no sample to compare, and ``report`` says so rather than leave them out unseen."""
        if self.metric != "cpu":
            return []
        return [command.name for command in self.measured("wall") if command.cpu_summary is None]

    def samples(self, metric: str | None = None, every: bool = False, timeout_ms: int | None = None) -> list[tuple]:
        """``(name, text, summary, times, (timed-out runs, runs))`` per command measured by ``metric``:
        the summary over every run, the times an even sample for the tests (``TESTED_RUNS`` in all),
        so comparing a huge export stays bounded in time; a run as long as ``timeout_ms`` (the
        benchmark's compared with it) counts as timed out. ``every``: each command with runs, its
        summary None where ``metric``'s figure was not measured (``baseline.against`` pairs them so)."""
        by_cpu = (metric or self.metric) == "cpu"
        commands = self.measured("cpu" if by_cpu and not every else "wall")
        cap = max(MIN_TESTED, TESTED_RUNS // max(len(commands), 1))
        return [
            (
                c.name,
                c.text,
                c.cpu_summary if by_cpu else c.summary,
                _even(c.cpu_times if by_cpu else c.times, cap),
                ended(c.timed_out, c.times, timeout_ms),
            )
            for c in commands
        ]


class _Reader:
    """The checks, each naming the file and the field that failed."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, what: str) -> Failure:
        return Failure(Kind.EVENTS_INVALID, f"{self.source} is not a usable benchmark export: {where} {what}")

    def mapping(self, value, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"is {kind(value)}, not an object")
        return value

    def sequence(self, value, where: str) -> list:
        if not isinstance(value, list):
            raise self.fail(where, f"is {kind(value)}, not a list")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"is {kind(value)}, not a string")
        return value if len(value) <= MAX_NAME else value[:MAX_NAME] + "…"

    def seconds(self, value, where: str) -> float:
        if not is_number(value):
            raise self.fail(where, f"is {kind(value)}, not a number of seconds")
        if not 0 <= value <= MAX_SECONDS:  # compared, never converted: a huge integer is cheap here
            raise self.fail(where, f"is {magnitude(value)}, not a time in seconds (0 to {MAX_SECONDS:.0e})")
        return float(value)

    def maybe_seconds(self, value, where: str) -> float | None:
        return None if value is None else self.seconds(value, where)

    def count(self, value, where: str, *, optional: bool = False, signed: bool = False) -> int | None:
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(where, f"is {kind(value)}, not an integer")
        if not (-MAX_COUNT if signed else 0) <= value <= MAX_COUNT:
            raise self.fail(where, f"is {magnitude(value)}, out of range")
        return value

    def seconds_list(self, value, where: str, *, nulls: bool = False) -> list[float]:
        """A list of times; with ``nulls``, None entries (a timed-out warm-up) are dropped."""
        items = self.sequence(value, where)
        if all(type(item) is float for item in items) and (not items or 0 <= min(items) and max(items) <= MAX_SECONDS):
            return items  # the common case, checked without a Python-level loop per item
        found: list[float] = []
        for index, item in enumerate(items):
            if item is None and nulls:
                continue
            found.append(self.seconds(item, f"{where}[{index}]"))
        return found

    def count_list(self, value, where: str, *, nulls: bool = False, signed: bool = False) -> list:
        items = self.sequence(value, where)
        if all(type(item) is int for item in items) and (
            not items or (-MAX_COUNT if signed else 0) <= min(items) and max(items) <= MAX_COUNT
        ):
            return items
        return [
            self.count(item, f"{where}[{index}]", optional=nulls, signed=signed) for index, item in enumerate(items)
        ]

    def same_length(self, items: list, times: list, where: str) -> list:
        if len(items) != len(times):
            raise self.fail(where, f"has {len(items)} entries for {len(times)} times")
        return items


def _even(values: list | None, cap: int) -> list:
    """At most ``cap`` of ``values``, spread evenly over them (in the order they ran)."""
    values = values or []
    if len(values) <= cap:
        return values
    return [values[i * len(values) // cap] for i in range(cap)]


def load(path: str) -> object:
    """The export's JSON, walked (``userfiles``: another user's link is refused), read within
    ``bounded.BENCH_EXPORT`` (size, nesting, a regular file, NaN, Infinity and a key named twice
    refused: which one a reader took would be its parser's choice); shape: ``from_json``."""
    try:
        return load_file(path, BENCH_EXPORT, unique_keys=True, opener=open_judged)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read the benchmark {path}: {exc.strerror}") from None
    except InputError as exc:
        raise Failure(Kind.EVENTS_INVALID, str(exc)) from None


def from_json(data, source: str) -> RecordedBench:
    """The export ``data`` (parsed JSON) from the file ``source``, checked; raises Failure (114)."""
    read = _Reader(source)
    top = read.mapping(data, "the file")
    settings = top.get("processkit")
    declared = settings.get("format") if isinstance(settings, dict) else None
    ours = isinstance(declared, str) and declared.startswith("processkit-bench/")
    if settings is not None and not ours:
        settings = read.mapping(settings, "'processkit'")
    settings = settings or {}
    results = read.sequence(top.get("results"), "'results'")
    if len(results) > MAX_COMMANDS:
        raise read.fail("'results'", f"holds {len(results)} commands, more than the {MAX_COMMANDS} a page can show")
    commands = [_command(read, read.mapping(item, f"results[{i}]"), f"results[{i}]") for i, item in enumerate(results)]
    if ours and declared == "processkit-bench/1":  # its memory_usage_byte was the group's peak
        for command in commands:
            command.tree_memory, command.memory = command.memory, []
    if not ours:  # hyperfine runs every command's runs in turn: its order is sequential
        start = 0
        for command in commands:
            command.order = list(range(start, start + len(command.times)))
            start += len(command.times)
    metric = settings.get("metric", "wall")
    if metric not in ("wall", "cpu"):
        raise read.fail("'processkit.metric'", "is neither 'wall' nor 'cpu'")
    cpus = None if settings.get("cpus") is None else read.count_list(settings["cpus"], "'processkit.cpus'")
    order = settings.get("order", "as hyperfine ran them, command by command")
    floor = None
    if ours:  # each command's own floor, or the highest where an earlier export has none per command
        floor = read.count(settings.get("max_rss_floor_byte"), "'processkit.max_rss_floor_byte'", optional=True)
        where = "'processkit.max_rss_floors_byte'"
        floors = read.count_list(settings.get("max_rss_floors_byte", [floor] * len(commands)), where, nulls=True)
        if len(floors) != len(commands):
            raise read.fail(where, f"has {len(floors)} entries for {plural(len(commands), 'result')}")
        for command, own in zip(commands, floors):
            command.rss_floor = own
    return RecordedBench(
        source=source,
        origin=ORIGIN_PROCESSKIT if ours else ORIGIN_HYPERFINE,
        commands=commands,
        order=read.string(order, "'processkit.order'"),
        metric=metric,
        cpus=cpus,
        interval=None
        if settings.get("timed_interval") is None
        else read.string(settings["timed_interval"], "'processkit.timed_interval'"),
        baseline=read_back(read, top.get("baseline")) if ours else None,
        reference=ours and settings.get("reference") is True,
        load=_load(read, settings.get("host_load")) if ours else None,
        max_rss_floor=floor if ours else None,
        timeout_ms=read.count(settings.get("timeout_ms"), "'processkit.timeout_ms'", optional=True) if ours else None,
        joined=declared in ("processkit-bench/1", "processkit-bench/2"),
    )


def _load(read: _Reader, load) -> Load | None:
    """``processkit.host_load``'s shares (0 to 1), CPU quota and affinity's size, where the export
    has them. The affinity is a whole count of CPUs, 1 or more: 1 turns the gate's off-CPU rule on,
    so a crafted 1.0 (or 0, or 1.5) must not pass as one."""
    found = {} if load is None else read.mapping(load, "'processkit.host_load'")
    for key, high in (("others_cpu_share", 1), ("throttled_share", 1), ("steal_share", 1), ("cpu_quota", MAX_COUNT)):
        value, where = found.get(key), f"'processkit.host_load.{key}'"
        if value is not None and not (is_number(value) and 0 <= value <= high):
            raise read.fail(where, f"is not a number {'from 0 to 1' if high == 1 else '0 or more'}")
    where = "'processkit.host_load.affinity_cpus'"
    if read.count(found.get("affinity_cpus"), where, optional=True) == 0:
        raise read.fail(where, "is 0, not a count of CPUs (1 or more)")
    return Load.of(load)


def _command(read: _Reader, record: dict, where: str) -> RecordedCommand:
    command = read.string(record.get("command"), f"{where}.command")
    for key in SUMMARY_KEYS:  # checked as the shape hyperfine writes, then computed again
        read.maybe_seconds(record.get(key), f"{where}.{key}")
    times = read.seconds_list(record.get("times"), f"{where}.times")
    order = list(range(len(times)))
    if "order" in record:
        order = read.same_length(read.count_list(record["order"], f"{where}.order"), times, f"{where}.order")
    memory = _memory(read, record, "memory_usage_byte", times, where)
    if record.get("exit_codes") is not None:
        read.count_list(record["exit_codes"], f"{where}.exit_codes", nulls=True, signed=True)
    summary = summarize(times, [], [], memory) if times else None
    user = read.maybe_seconds(record.get("user"), f"{where}.user")
    system = read.maybe_seconds(record.get("system"), f"{where}.system")
    cpu_times = None
    cpu_recorded = "user_times" in record and "system_times" in record
    if cpu_recorded:  # ours: the CPU time of every run
        users = read.same_length(_cpu_list(read, record["user_times"], f"{where}.user_times"), times, where)
        systems = read.same_length(_cpu_list(read, record["system_times"], f"{where}.system_times"), times, where)
        named = f"{where}.cpu_times"
        given = (
            read.same_length(_cpu_list(read, record["cpu_times"], named), times, named)
            if "cpu_times" in record
            else None
        )
        trees = tree_cpu(given, users, systems)
        # a run whose CPU was not measured (null) leaves the command with no CPU figure to compare
        cpu_times = None if None in trees else trees
        user = _mean([u for u in users if u is not None]) if times else None
        system = _mean([s for s in systems if s is not None]) if times else None
    counters = _counters(read, record.get("counters"), times, where)
    off_cpu = record.get("off_cpu_times")
    if off_cpu is not None:
        off_cpu = read.same_length(_cpu_list(read, off_cpu, f"{where}.off_cpu_times"), times, where)
    return RecordedCommand(
        off_cpu_times=None if off_cpu is None or None in off_cpu else off_cpu,
        instructions=(counters or {}).get("instructions"),
        tree_memory=_memory(read, record, "tree_peak_memory_byte", times, where),
        counters=counters,
        name=read.string(record.get("name", command), f"{where}.name"),
        text=read.string(record.get("text", command), f"{where}.text"),
        times=times,
        order=order,
        warmups=read.seconds_list(record.get("warmup_times") or [], f"{where}.warmup_times", nulls=True),
        user=user,
        system=system,
        cpu_times=cpu_times,
        cpu_recorded=cpu_recorded,
        memory=memory,
        timed_out=read.count(record.get("timed_out"), f"{where}.timed_out", optional=True),
        summary=summary,
        cpu_summary=summarize(cpu_times, [], [], []) if cpu_times else None,
        outliers=outlier_indices(times),
    )


def _memory(read: _Reader, record: dict, key: str, times: list, where: str) -> list:
    """A per-run byte count (``memory_usage_byte``, ``tree_peak_memory_byte``), nulls dropped."""
    if record.get(key) is None:
        return []
    listed = read.count_list(record[key], f"{where}.{key}", nulls=True)
    return [value for value in read.same_length(listed, times, f"{where}.{key}") if value is not None]


def _counters(read: _Reader, value, times: list, where: str) -> dict | None:
    """Our ``counters``: each known counter's per-run counts, or null where the host lacked it."""
    if value is None:
        return None
    from .counters import NAMES

    found = read.mapping(value, f"{where}.counters")
    counted: dict[str, list | None] = {}
    for name in NAMES:
        if found.get(name) is None:
            counted[name] = None
            continue
        key = f"{where}.counters.{name}"
        counted[name] = read.same_length(read.count_list(found[name], key), times, key)
    return counted


def _cpu_list(read: _Reader, value, where: str) -> list:
    """A run's CPU times, null where a run's was not measured (kept in place, one per time)."""
    items = read.sequence(value, where)
    if None not in items:
        return read.seconds_list(items, where)  # the common case, checked at its speed
    return [None if item is None else read.seconds(item, f"{where}[{index}]") for index, item in enumerate(items)]


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0
