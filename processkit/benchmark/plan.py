"""What a benchmark is asked to do: the commands (parameters expanded) and the options.

Built by the CLI and by ``processkit.bench``; validated here so both report the same usage
errors. A command is an argv (run shell-free) or a shell string (``sh -c``); its name is what
the summary and the exports call it: ``--command-name`` where given, else the command as typed.
"""

from __future__ import annotations

import itertools
import math

from ..errors import usage
from ..plain import Constant, Plain
from ..text import cut

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import ClassVar


class Order(Constant):
    __slots__ = ()
    INTERLEAVED: ClassVar[Order]
    SEQUENTIAL: ClassVar[Order]


Order.INTERLEAVED = Order("INTERLEAVED", "interleaved")
Order.SEQUENTIAL = Order("SEQUENTIAL", "sequential")
ORDERS = {order.value: order for order in (Order.INTERLEAVED, Order.SEQUENTIAL)}
METRICS = ("wall", "cpu")
MAX_VALUES = 100_000  # the most values one scan holds, and the most combinations of all of them


class Command(Plain):
    __slots__ = ("name", "text", "argv", "parameters")

    def __init__(self, name: str, text: str, argv: tuple[str, ...], parameters: dict[str, str]):
        self.name = name  # what the summary and exports call it
        self.text = text  # the command as given: the shell string, or the argv joined by spaces
        self.argv = argv  # what is executed
        self.parameters = parameters


class Options(Plain):
    __slots__ = (
        "runs",
        "min_runs",
        "max_runs",
        "warmup",
        "min_time_s",
        "prepare",
        "setup",
        "cleanup",
        "ignore_failure",
        "timeout_ms",
        "order",
        "cpus",
        "jsonl_dir",
        "show_output",
        "metric",
    )

    def __init__(
        self,
        *,
        runs: int | None = None,
        min_runs: int = 10,
        max_runs: int | None = None,
        warmup: int = 0,
        min_time_s: float = 3.0,
        prepare: tuple[str, ...] | None = None,
        setup: tuple[str, ...] | None = None,
        cleanup: tuple[str, ...] | None = None,
        ignore_failure: bool = False,
        timeout_ms: int | None = None,
        order: Order = Order.INTERLEAVED,
        cpus: tuple[int, ...] | None = None,
        jsonl_dir: str | None = None,
        show_output: bool = False,
        metric: str = "wall",
    ):
        if runs is not None and runs < 1:
            raise usage("--runs must be at least 1")
        if min_runs < 1 or (max_runs is not None and max_runs < min_runs):
            raise usage("--min-runs must be at least 1 and at most --max-runs")
        if metric not in METRICS:
            raise usage(f"--metric is one of {', '.join(METRICS)}, not {metric!r}")
        if warmup < 0 or min_time_s < 0:
            raise usage("--warmup and --min-time cannot be negative")
        self.runs = runs
        self.min_runs = min_runs
        self.max_runs = max_runs
        self.warmup = warmup
        self.min_time_s = min_time_s
        self.prepare = prepare
        self.setup = setup
        self.cleanup = cleanup
        self.ignore_failure = ignore_failure
        self.timeout_ms = timeout_ms
        self.order = order
        self.cpus = cpus
        self.jsonl_dir = jsonl_dir
        self.show_output = show_output
        self.metric = metric  # what the comparison ranks by: wall time, or the tree's user+system CPU

    def run_count(self, cycle_s: float) -> int:
        """How many timed runs a command gets when each takes ``cycle_s`` in all."""
        if self.runs is not None:
            return self.runs
        wanted = self.min_time_s / cycle_s if cycle_s > 0 else self.min_runs
        count = max(self.min_runs, int(wanted) + (wanted > int(wanted)))
        return min(count, self.max_runs) if self.max_runs is not None else count


def substitute(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def expand(
    given: Sequence[tuple[str, str | tuple[str, ...]]],
    names: list[str],
    parameters: list[tuple[str, list[str]]],
) -> list[Command]:
    """``given``: ``("argv", tuple)`` or ``("shell", str)`` in order; each combination of the
    parameters' values makes one command per given one, the values substituted in its argv."""
    if not given:
        raise usage("no command to benchmark: give one after '--', or --command / --shell")
    if len(names) > len(given):
        raise usage(f"{len(names)} --command-name values for {len(given)} commands")
    seen = set()
    for name, listed in parameters:
        if name in seen:
            raise usage(f"the parameter {name!r} is given twice")
        if not listed:
            raise usage(f"the parameter {name!r} has no values")
        seen.add(name)
    counts = [len(listed) for _, listed in parameters]
    if math.prod(counts) > MAX_VALUES:  # before a single combination is made
        raise usage(
            f"the parameters' values make {math.prod(counts)} combinations ({' x '.join(map(str, counts))}), "
            f"more than {MAX_VALUES}"
        )
    combinations = [
        dict(zip((n for n, _ in parameters), combo)) for combo in itertools.product(*(v for _, v in parameters))
    ]
    commands = []
    for index, (kind, value) in enumerate(given):
        for values in combinations:
            if kind == "shell":
                assert isinstance(value, str)
                text = substitute(value, values)
                argv: tuple[str, ...] = ("sh", "-c", text)
            else:
                assert isinstance(value, tuple)
                argv = tuple(substitute(arg, values) for arg in value)
                text = " ".join(argv)
            name = substitute(names[index], values) if index < len(names) else text
            commands.append(Command(name, text, argv, values))
    return commands


def scan_values(low: str, high: str) -> list[str]:
    """``--parameter-scan NAME MIN MAX``: the integers from MIN to MAX inclusive."""
    try:
        first, last = int(low), int(high)
    except ValueError:
        raise usage(f"--parameter-scan takes integers, got {cut(repr(low))} and {cut(repr(high))}") from None
    if last < first or last - first > MAX_VALUES:
        raise usage(f"--parameter-scan needs MIN <= MAX and at most {MAX_VALUES} values")
    return [str(value) for value in range(first, last + 1)]
