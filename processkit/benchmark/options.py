"""``bench``'s measured options (run counts, durations, order, metric, CPUs, the exit codes to
ignore, the percentage gate, where input comes from and output goes) as one table, read for
``plan.Options`` by the run grammar's value functions whoever gives them: the CLI's text
(``bench --runs 10 --timeout 500ms``) or the API's typed values (``processkit.bench(runs=10,
timeout=0.5)``, a duration in seconds or as the same text). Every failure is a usage ``Failure``
naming the option as its caller spells it (``grammar.Naming``: ``--runs`` or ``runs=``), and so
are the rules between options (``check_given``) and, through ``plan.Options.named``, what the
bench process finds while it runs (``caller_naming``: keywords when ``processkit.bench`` started it).
"""

from __future__ import annotations

import os
import shlex

from ..errors import usage
from ..text import cut, sanitize
from ..grammar import values
from ..grammar import REPEAT, SWITCH, VALUE, Option
from .plan import DEFAULT_SHELL, METRICS, ORDERS, OUTPUTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, MutableMapping
    from typing import Any

    from ..grammar import Naming

DEFAULT_MIN_RUNS = 10
DEFAULT_MIN_TIME_MS = 3000  # hyperfine's --min-time


def _at_least_one(value, name: str) -> int:
    return values.parse_count(value, name, low=1)


def _count(value, name: str) -> int:
    return values.parse_count(value, name)


def _duration(value, name: str) -> int:
    return values.parse_duration_ms(value, name, positive=False)


def _positive_duration(value, name: str) -> int:
    return values.parse_duration_ms(value, name, positive=True)


MAX_CPU = 8191  # the kernel's largest NR_CPUS: a larger number names no CPU, and bounds a range


def _cpus(value, name: str) -> tuple[int, ...]:
    """A CPU list: ``0,2-3`` as text, or the CPUs' numbers."""
    if not isinstance(value, str):
        cpus = [values.parse_count(cpu, name, high=MAX_CPU) for cpu in value]
        if not cpus:
            raise usage(f"invalid value for '{name}': expected at least one CPU")
        return tuple(sorted(set(cpus)))
    found: set[int] = set()
    for part in value.split(","):
        low, _, high = part.partition("-")
        if not values.is_digits(low) or (high and not values.is_digits(high)) or len(part) > 20:
            raise usage(f"invalid value '{cut(value)}' for '{name}': expected a CPU list such as 0,2-3")
        first, last = int(low), int(high or low)
        if first > last or last > MAX_CPU:
            raise usage(
                f"invalid value '{cut(value)}' for '{name}': a range goes up, and CPUs are numbered 0 to {MAX_CPU}"
            )
        found.update(range(first, last + 1))
    return tuple(sorted(found))


def _ignored(value, name: str) -> bool | tuple[int, ...]:
    """Every non-zero exit (True; the flag alone, ``all-non-zero``), or these exit codes (``1,2``
    as text, or the codes)."""
    if isinstance(value, bool) or value in ("", "all-non-zero"):
        return value is not False
    if isinstance(value, str):
        codes = [code.strip() for code in value.split(",")]
        if not all(values.is_digits(code) for code in codes):
            raise usage(f"invalid value '{cut(value)}' for '{name}': exit codes such as 1,2, or all-non-zero")
        value = codes
    return tuple(values.parse_count(code, name, high=255) for code in value)


MAX_PERCENT = 1e6


def _percent(value, name: str) -> float:
    """A percentage: ``5`` or ``2.5%`` as text, or a number; 0 to a million."""
    if isinstance(value, str):
        digits = value.removesuffix("%")
        number = float(digits) if len(digits) <= 20 and values.is_decimal(digits) else None
    else:
        number = float(value) if not isinstance(value, int) or value.bit_length() <= 64 else None
    if number is None or not 0 <= number <= MAX_PERCENT:
        shown = f"'{cut(value)}'" if isinstance(value, str) else repr(value)
        raise usage(f"invalid value {shown} for '{name}': expected a percentage such as 5 or 2.5%")
    return number


def _input(value, name: str) -> str | None:
    """Every run's stdin: ``null`` (None, /dev/null) or a file that exists."""
    if value == "null":
        return None
    if not os.path.exists(value):
        raise usage(f"the file {sanitize(value)!r} specified as '{name}' does not exist")
    return value


def _output(value, name: str) -> str:
    """Where a command's output goes: null, pipe, inherit, or a file's path (holding a ``/``)."""
    if value not in OUTPUTS and "/" not in value:
        raise usage(f"unknown '{name}' {sanitize(value)!r}: use './{sanitize(value)}' for a file of that name")
    return value


def _order(value, name: str) -> str:
    return values.parse_choice(value, tuple(ORDERS), name)


def _metric(value, name: str) -> str:
    return values.parse_choice(value, METRICS, name)


OPTIONS = (
    Option("--runs", VALUE, metavar="N", help="exactly N timed runs per command", read=_at_least_one),
    Option("--min-runs", VALUE, metavar="N", help="at least N timed runs (default 10)", read=_at_least_one),
    Option("--max-runs", VALUE, metavar="N", help="at most N timed runs", read=_at_least_one),
    Option("--warmup", VALUE, metavar="N", help="N untimed runs per command first", read=_count),
    Option("--min-time", VALUE, metavar="DUR", help="time each command at least this long (3s)", read=_duration),
    Option(
        "--timeout",
        VALUE,
        metavar="DUR",
        help="end a run (and its tree) after DUR; left out of the statistics",
        read=_positive_duration,
    ),
    Option(
        "--order",
        VALUE,
        choices=tuple(ORDERS),
        help="interleaved (A B A B, the default) or sequential (all of A, then B, as hyperfine)",
        read=_order,
    ),
    Option("--metric", VALUE, choices=METRICS, help="compare by wall or CPU time", read=_metric),
    Option("--cpus", VALUE, metavar="LIST", help="pin every run to these CPUs (e.g. 0,2-3)", read=_cpus),
    Option(
        "--ignore-failure",
        VALUE,
        metavar="CODES",
        help="keep benchmarking commands that exit non-zero (=1,2: those codes only)",
        read=_ignored,
    ),
    Option(
        "--fail-if-slower",
        VALUE,
        metavar="PCT",
        help="with --baseline: exit 119 when a command is significantly slower than the baseline by more than PCT %%",
        read=_percent,
    ),
    Option(
        "--input",
        VALUE,
        metavar="WHERE",
        keyword="input_file",
        help="every run's stdin: null (default) or FILE",
        read=_input,
    ),
    Option(
        "--output",
        REPEAT,
        metavar="WHERE",
        help="null, pipe (default), inherit or FILE; once or per command",
        read=_output,
    ),
)
# Options given as they are, named here for the rules between options.
NAMED = (
    Option("--command-name", REPEAT, metavar="NAME", keyword="names"),
    Option("--prepare", REPEAT, metavar="CMD"),
    Option("--conclude", REPEAT, metavar="CMD"),
    Option("--reference", VALUE, metavar="CMD"),
    Option("--reference-name", VALUE, metavar="NAME"),
    Option("--show-output", SWITCH),
    Option("--baseline", VALUE, metavar="FILE"),
    Option("--jsonl-dir", VALUE, metavar="DIR"),
)
MEASURED = {option.dest: option for option in OPTIONS}
BY_DEST = {option.dest: option for option in OPTIONS + NAMED}
BY_FLAG = {option.flag: option for option in OPTIONS}
REQUIRES = (("reference_name", "reference"), ("fail_if_slower", "baseline"))
CONFLICTS = (("output", "show_output"),)


def shell_of(text: str, name: str) -> tuple[str, ...] | None:
    """hyperfine's ``-S``: a shell's name or command line, ``default`` (sh) or ``none`` (no shell:
    a command is split as a shell would split it)."""
    if text == "default":
        return DEFAULT_SHELL
    if text == "none":
        return None
    try:
        shell = tuple(shlex.split(text))
    except ValueError as exc:
        raise usage(f"cannot read '{name}' {sanitize(text)!r} as a command line: {exc}") from None
    if not shell or not shell[0]:
        raise usage(f"an empty command has been given for '{name}'")
    return shell


# Set by ``processkit.bench`` on the bench process it starts, so that process's own failures
# (a run that failed, too few runs, an unwritable --output) name the API's keywords, not flags.
CALLER_NAMING = "PROCESSKIT_BENCH_NAMING"


def caller_naming(environ: MutableMapping[str, str]) -> Naming:
    """How this bench process names options: by keyword when ``processkit.bench`` started it
    (``CALLER_NAMING`` taken out of ``environ``, so no benchmarked command sees it), else by flag."""
    from ..grammar import FLAGS, KEYWORDS

    return KEYWORDS if environ.pop(CALLER_NAMING, None) == "keywords" else FLAGS


def ignoring(name: Naming) -> str:
    """What to give to benchmark failing runs anyway: ``--ignore-failure`` or ``ignore_failure=True``."""
    option = BY_DEST["ignore_failure"]
    shown = name(option)
    return shown if shown == option.flag else name.given(option, "True")


def naming(name: Naming) -> Callable[[str], str]:
    """``name`` by an option's dest, as ``plan.expand`` takes it."""
    return lambda dest: name(BY_DEST[dest])


def check_given(given: Collection[str], name: Naming) -> None:
    """Which options were given (by dest), checked against each other."""
    for dest, needed in REQUIRES:
        if dest in given and needed not in given:
            raise usage(f"the argument '{name(BY_DEST[dest])}' requires '{name(BY_DEST[needed])}'")
    for dest, other in CONFLICTS:
        if dest in given and other in given:
            raise usage(f"the argument '{name(BY_DEST[dest])}' cannot be used with '{name(BY_DEST[other])}'")


def read(given: dict[str, Any], name: Naming) -> dict[str, Any]:
    """Each given option (by dest; None: not given; a list for a repeatable one) through its
    grammar, then the ones that bound each other checked together."""
    typed = {}
    for dest, value in given.items():
        option = MEASURED[dest]
        if value is None or option.read is None:  # not given (every measured option has its grammar)
            continue
        shown = name(option)
        typed[dest] = (
            [option.read(item, shown) for item in value] if option.kind == REPEAT else option.read(value, shown)
        )
    low, high = typed.get("min_runs", DEFAULT_MIN_RUNS), typed.get("max_runs")
    if high is not None and high < low:
        raise usage(
            f"'{name(BY_DEST['max_runs'])}' ({high}) cannot be below '{name(BY_DEST['min_runs'])}' ({low})"
            + ("" if "min_runs" in typed else ", 10 unless given")
        )
    return typed
