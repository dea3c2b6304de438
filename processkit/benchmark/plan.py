"""What a benchmark is asked to do: the commands (parameters expanded) and the options.

Built by the CLI from its flags, and by ``processkit.bench`` from its keywords in the caller's
process, which sends it to the process its runner service starts for the benchmark; the measured
options are read by ``options``, the commands' shape is validated here. A command is an argv
(run shell-free) or a shell string, run as hyperfine runs it: ``SHELL -c TEXT`` (``sh`` unless ``--shell``), or split
as a shell would and run without one (``-N``, ``--shell=none``). Its name is what the summary
and the exports call it: ``--command-name`` where given, else the command as typed. Each command
carries its own untimed steps (setup, prepare, conclude, cleanup) and output policy, resolved here once.
"""

from __future__ import annotations

import itertools
import math

from ..errors import usage
from ..grammar import FLAGS
from ..grammar import values as grammar_values
from ..plain import Constant, Plain
from ..text import cut
from .executed import Given, substitute, to_argv

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import ClassVar

    from ..grammar import Naming


class Order(Constant):
    __slots__ = ()
    INTERLEAVED: ClassVar[Order]
    SEQUENTIAL: ClassVar[Order]


Order.INTERLEAVED = Order("INTERLEAVED", "interleaved")
Order.SEQUENTIAL = Order("SEQUENTIAL", "sequential")
ORDERS = {order.value: order for order in (Order.INTERLEAVED, Order.SEQUENTIAL)}
METRICS = ("wall", "cpu")
DEFAULT_SHELL = ("sh",)
OUTPUTS = ("null", "pipe", "inherit")  # or a file's path, as hyperfine's --output
MAX_SCAN = 100_000
MAX_VALUES = 100_000  # the most combinations of all the parameters' values
SORTS = ("auto", "command", "mean-time")  # hyperfine's --sort
TIME_UNITS = ("microsecond", "millisecond", "second")  # hyperfine's --time-unit


class Command(Plain):
    __slots__ = (
        "name",
        "text",
        "argv",
        "parameters",
        "label",
        "shell",
        "setup",
        "prepare",
        "conclude",
        "cleanup",
        "output",
        "output_chosen",
    )

    def __init__(
        self,
        name: str,
        text: str,
        argv: tuple[str, ...],
        parameters: dict[str, str],
        *,
        label: str | None = None,
        shell: bool = False,
        setup: tuple[str, ...] | None = None,
        prepare: tuple[str, ...] | None = None,
        conclude: tuple[str, ...] | None = None,
        cleanup: tuple[str, ...] | None = None,
        output: str | None = None,
    ):
        self.name = name  # what the exports call it
        self.text = text  # the command as given: the shell string, or the argv joined by spaces
        self.argv = argv  # what is executed
        self.parameters = parameters
        self.label = label if label is not None else name  # on screen: the name, with unused parameters
        self.shell = shell  # run through a shell, so charged the shell's start-up (measured, subtracted)
        self.setup = setup  # once before its runs (an argv, its parameters substituted), untimed
        self.prepare = prepare  # before each of its runs
        self.conclude = conclude  # after each of its runs
        self.cleanup = cleanup  # once after its last run
        self.output = output or "pipe"  # where its output goes: pipe, null, inherit, or a file's path
        self.output_chosen = output is not None  # given (--output), not the default


class Options(Plain):
    """How the commands are measured, as typed values: read and checked by ``options.read``
    (the CLI's flags, the API's keywords) before they are put here."""

    __slots__ = (
        "runs",
        "min_runs",
        "max_runs",
        "warmup",
        "min_time_s",
        "ignore_failure",
        "timeout_ms",
        "order",
        "cpus",
        "jsonl_dir",
        "show_output",
        "metric",
        "input_file",
        "shell",
        "reference",
        "named",
    )

    def __init__(
        self,
        *,
        runs: int | None = None,
        min_runs: int = 10,
        max_runs: int | None = None,
        warmup: int = 0,
        min_time_s: float = 3.0,
        ignore_failure: bool | tuple[int, ...] = False,
        timeout_ms: int | None = None,
        order: Order = Order.INTERLEAVED,
        cpus: tuple[int, ...] | None = None,
        jsonl_dir: str | None = None,
        show_output: bool = False,
        metric: str = "wall",
        input_file: str | None = None,
        shell: tuple[str, ...] | None = DEFAULT_SHELL,
        reference: bool = False,
        named: Naming = FLAGS,
    ):
        self.runs = runs
        self.min_runs = min_runs
        self.max_runs = max_runs
        self.warmup = warmup
        self.min_time_s = min_time_s
        self.ignore_failure = ignore_failure  # True: every non-zero exit; a tuple: those codes only
        self.timeout_ms = timeout_ms
        self.order = order
        self.cpus = cpus
        self.jsonl_dir = jsonl_dir
        self.show_output = show_output
        self.metric = metric  # what the comparison ranks by: wall time, or the tree's user+system CPU
        self.input_file = input_file  # every run's stdin (None: /dev/null)
        self.shell = shell  # what shell commands run through (its start-up is measured); None: -N
        self.reference = reference  # the first command is --reference: the others are compared with it
        self.named = named  # how the session's failures name an option: the CLI's flag or the API's keyword

    def ignores(self, code: int) -> bool:
        """Whether a timed run's exit ``code`` is benchmarked anyway (``--ignore-failure[=CODES]``)."""
        if isinstance(self.ignore_failure, tuple):
            return code in self.ignore_failure
        return self.ignore_failure

    def run_count(self, cycle_s: float) -> int:
        """How many timed runs a command gets when each takes ``cycle_s`` in all: as many whole
        cycles as ``--min-time`` holds, rounded down as hyperfine's count is (3 of 0.3 s in 1 s)."""
        if self.runs is not None:
            return self.runs
        count = max(self.min_runs, int(self.min_time_s / cycle_s) if cycle_s > 0 else self.min_runs)
        return min(count, self.max_runs) if self.max_runs is not None else count


def _flag(dest: str) -> str:
    """An option as the command line names it, the default way ``expand`` names options."""
    return "--" + dest.replace("_", "-")


def _per_command(flag: str, listed: Sequence, count: int) -> list:
    """hyperfine's rule for ``--prepare``, ``--conclude``, ``--output``: once for all, or once each."""
    if len(listed) > 1 and len(listed) != count:
        raise usage(
            f"the '{flag}' option has to be provided just once or N times, where N={count} is the "
            "number of benchmark commands (including a potential reference)"
        )
    return list(listed) * count if len(listed) == 1 else list(listed) or [None] * count


class Auxiliary(Plain):
    """The untimed commands around the runs, each as given: once for all, or (prepare,
    conclude, output) once per command; the outputs as ``options`` read them."""

    __slots__ = ("setup", "cleanup", "prepare", "conclude", "outputs")

    def __init__(
        self,
        *,
        setup: Given | None = None,
        cleanup: Given | None = None,
        prepare: Sequence[Given] = (),
        conclude: Sequence[Given] = (),
        outputs: Sequence[str] = (),
    ):
        self.setup = setup
        self.cleanup = cleanup
        self.prepare = prepare
        self.conclude = conclude
        self.outputs = outputs


def expand(
    given: Sequence[Given],
    names: list[str],
    parameters: list[tuple[str, list[str]]],
    *,
    shell: tuple[str, ...] | None = DEFAULT_SHELL,
    reference: tuple[Given, str | None] | None = None,
    auxiliary: Auxiliary | None = None,
    named: Callable[[str], str] = _flag,
) -> list[Command]:
    """``given``: ``("argv", tuple)`` or ``("shell", str)`` in order. As hyperfine does, each
    combination of the parameters' values (the first parameter varying fastest) makes one
    command per given one; ``--reference`` (never parameterised) comes first. ``named``: how
    the caller names an option (by its dest) in a usage error (``--prepare`` or ``prepare=``)."""
    if not given:
        raise usage("no command to benchmark: give one (a shell command), or --command, or one after '--'")
    planned = _named(given, names, _combinations(parameters), bool(parameters), named)
    if reference is not None:
        planned.insert(0, (reference[0], reference[1], {}))
    aux, count = auxiliary or Auxiliary(), len(planned)
    prepares = _per_command(named("prepare"), aux.prepare, count)
    concludes = _per_command(named("conclude"), aux.conclude, count)
    outputs = _per_command(named("output"), aux.outputs, count)
    return [
        _command(command, chosen, values, (aux.setup, prepare, conclude, aux.cleanup), output, shell)
        for (command, chosen, values), prepare, conclude, output in zip(planned, prepares, concludes, outputs)
    ]


def _combinations(parameters: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination of the parameters' values, the first varying fastest; a name given twice,
    a parameter without values, or more than MAX_VALUES combinations (before one is made) refused."""
    seen = set()
    for name, listed in parameters:
        if name in seen:
            raise usage(f"duplicate parameter names: {name}")
        if not listed:
            raise usage(f"the parameter {name!r} has no values")
        seen.add(name)
    counts = [len(listed) for _, listed in parameters]
    if math.prod(counts) > MAX_VALUES:
        raise usage(
            f"the parameters' values make {math.prod(counts)} combinations ({' x '.join(map(str, counts))}), "
            f"more than {MAX_VALUES}"
        )
    order = [name for name, _ in reversed(parameters)]  # product varies the last fastest
    found = (dict(zip(order, combo)) for combo in itertools.product(*(listed for _, listed in reversed(parameters))))
    return [{name: values[name] for name, _ in parameters} for values in found]


def _named(
    given: Sequence[Given],
    names: list[str],
    combinations: list[dict[str, str]],
    parameterised: bool,
    named: Callable[[str], str],
) -> list[tuple[Given, str | None, dict[str, str]]]:
    """Each command of each combination with its ``--command-name``, by hyperfine's rule: with
    parameters, one name for all (its placeholders filled per command) or one per command; without,
    at most one per command given (those beyond the names have none)."""
    total = len(given) * len(combinations)
    if parameterised and len(names) > 1 and len(names) != total:
        raise usage(
            f"'{named('command_name')}' has been specified {len(names)} times. It has to appear exactly once, "
            f"or exactly {total} times (number of benchmarks)"
        )
    if not parameterised and len(names) > len(given):
        raise usage(f"too many {named('command_name')} options: expected {len(given)} at most")  # hyperfine's words
    planned: list[tuple[Given, str | None, dict[str, str]]] = []
    for values in combinations:
        for command in given:
            index = len(planned)
            chosen = names[index] if index < len(names) else (names[0] if parameterised and names else None)
            planned.append((command, chosen, values))
    return planned


def _joined(argv: tuple[str, ...]) -> str:
    """An argv command's text, quoted as a shell would read it back (``sh -c 'echo a b'``):
    a word with a space in it is one word on the screen and in the exports, as it ran."""
    import shlex  # an argv command's name only

    return shlex.join(argv)


def _command(
    command: Given,
    chosen: str | None,
    values: dict[str, str],
    steps: tuple[Given | None, Given | None, Given | None, Given | None],
    output: str | None,
    shell: tuple[str, ...] | None,
) -> Command:
    """One command of the plan and its ``steps`` (setup, prepare, conclude, cleanup) with its
    parameters' ``values``; its label names the values its text does not show."""
    argv, charged = to_argv(command, values, shell)
    value = command[1]
    text = substitute(value, values) if isinstance(value, str) else _joined(argv)
    shown = substitute(chosen, values) if chosen is not None else text
    pattern = value if isinstance(value, str) else " ".join(value)
    unused = [f"{key} = {val}" for key, val in values.items() if "{" + key + "}" not in pattern]
    setup, prepare, conclude, cleanup = (None if step is None else to_argv(step, values, shell)[0] for step in steps)
    return Command(
        shown,
        text,
        argv,
        values,
        label=f"{shown} ({', '.join(unused)})" if unused else shown,
        shell=charged,
        setup=setup,
        prepare=prepare,
        conclude=conclude,
        cleanup=cleanup,
        output=output,
    )


def parameter_list(text: str) -> list[str]:
    """``-L NAME VALUES``: split at commas; ``\\,`` is a comma and ``\\\\`` a backslash, as hyperfine."""
    values, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append(ch if ch in ",\\" else "\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            values.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    values.append("".join(current))
    return values


def _numbers(low: str, high: str, step: str | None) -> list:
    """MIN, MAX and the step as integers, else (a step given) as decimals, as hyperfine reads them:
    ASCII digits only (``int()`` and ``Decimal`` would also take ``1_0`` and other scripts' digits)."""
    longest = max((value for value in (low, high, step or "") if value), key=len)
    if len(longest) > 64:  # past any scan's bound, and past int()'s digit limit: never converted
        raise usage(f"--parameter-scan takes numbers of at most 64 characters, got {cut(repr(longest))}")
    texts = (low, high, step if step is not None else "1")
    if all(grammar_values.is_digits(text[1:] if text[:1] in ("+", "-") else text) for text in texts):
        return [int(text) for text in texts]
    if step is None:
        raise usage(
            "a step size is required when the range bounds are not integers: give it with "
            "'-D/--parameter-step-size DELTA'"
        )
    if not all(grammar_values.is_decimal(text) for text in texts):  # Rust's f64 syntax, as hyperfine reads them
        raise usage(f"--parameter-scan takes numbers, got {cut(repr(low))}, {cut(repr(high))} and {cut(repr(step))}")
    import decimal  # a decimal scan's only (its C module: ~1.3 ms of every bench's start-up)

    return [decimal.Decimal(text) for text in texts]


def scan_values(low: str, high: str, step: str | None = None) -> list[str]:
    """``--parameter-scan NAME MIN MAX`` (``-D STEP``): MIN, MIN+STEP, ... up to MAX inclusive."""
    first, last, delta = _numbers(low, high, step)
    if delta <= 0:
        raise usage("--parameter-step-size must be above zero")
    if last < first or (last - first) / delta >= MAX_SCAN:
        raise usage(f"--parameter-scan needs MIN <= MAX and at most {MAX_SCAN} values")
    values, value = [], first
    while value <= last:
        values.append(str(value))
        value += delta
    return values
