"""``bench``'s measured options (run counts, durations, order, metric, CPUs, the exit codes to
ignore, the percentage gate, where input comes from and output goes) as one table, read for
``plan.Options`` by the run grammar's value functions whoever gives them: the CLI's text
(``bench --runs 10 --timeout 500ms``, ``read``) or the API's typed values
(``processkit.bench(runs=10, timeout=0.5)``, a duration in seconds or as the same text,
``from_keywords``, which first checks each keyword's Python type, ``TAKES``). Every failure is a
usage ``Failure`` naming the option as its caller spells it (``grammar.Naming``: ``--runs`` or
``runs=``), and so are the rules between options (``check_given``) and, through the one
``plan.Options`` both build (``session_options``, its ``named``), what the session finds while it
runs: the caller's naming travels with the options, wherever the session runs.
"""

from __future__ import annotations

import os

from ..errors import Failure, Kind, usage
from ..text import cut
from ..grammar import values
from ..grammar import KEYWORDS, REPEAT, SWITCH, VALUE, Option
from . import words
from .plan import DEFAULT_SHELL, METRICS, ORDERS, OUTPUTS, Options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection
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
        raise usage(f"the file '{value}' specified as '{name}' does not exist")
    return value


def _output(value, name: str) -> str:
    """Where a command's output goes: null, pipe, inherit, or a file's path (holding a ``/``)."""
    if value not in OUTPUTS and "/" not in value:
        raise usage(f"unknown '{name}' '{value}': use './{value}' for a file of that name")
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
    Option(
        "--min-time",
        VALUE,
        metavar="DUR",
        help="make as many runs as fit in this time (3s), within --min-runs and --max-runs",
        read=_duration,
    ),
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
    Option("--metric", VALUE, choices=METRICS, help="compare by wall or CPU time (the whole tree's)", read=_metric),
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
CONFLICTS = (("output", "show_output"), ("runs", "min_runs"), ("runs", "max_runs"))  # hyperfine's clap conflicts


def shell_of(text: str, name: str) -> tuple[str, ...] | None:
    """hyperfine's ``-S``: a shell's name or command line, ``default`` (sh) or ``none`` (no shell:
    a command is split as a shell would split it)."""
    if text == "default":
        return DEFAULT_SHELL
    if text == "none":
        return None
    try:
        shell = tuple(words.split(text))
    except ValueError as exc:
        raise usage(f"cannot read '{name}' '{cut(text)}' as a command line: {exc}") from None
    if not shell or not shell[0]:
        raise usage(f"an empty command has been given for '{name}'")
    return shell


def switched_on(name: Naming, dest: str) -> str:
    """What to give to turn a switch on, as the caller names it: ``--ignore-failure`` or
    ``ignore_failure=True`` (to benchmark failing runs anyway; ``show_output``: to see them)."""
    option = BY_DEST[dest]
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
    high = typed.get("max_runs")
    if high is not None and "min_runs" not in typed:  # hyperfine: an implicit minimum yields to the maximum
        typed["min_runs"] = min(DEFAULT_MIN_RUNS, high)
    elif high is not None and high < typed["min_runs"]:
        raise usage(
            f"'{name(BY_DEST['max_runs'])}' ({high}) cannot be below '{name(BY_DEST['min_runs'])}' ({typed['min_runs']})"
        )
    return typed


DURATION = "a number of seconds or a duration string such as '500ms'"
# What each measured option takes as an API keyword (by dest), for the TypeError of any other
# type (bool is no number here); a value of the right type then goes through the option's grammar.
TAKES = {
    "runs": ((int, str), "an int"),
    "min_runs": ((int, str), "an int"),
    "max_runs": ((int, str), "an int"),
    "warmup": ((int, str), "an int"),
    "min_time": ((int, float, str), DURATION),
    "timeout": ((int, float, str), DURATION),
    "order": ((str,), "'interleaved' or 'sequential'"),
    "metric": ((str,), "'wall' or 'cpu'"),
    "cpus": ((list, tuple, str), "a list of CPU numbers"),
    "ignore_failure": ((bool, list, tuple), "True, or a list of exit codes"),
    "fail_if_slower": ((int, float), "a percentage"),
    "input": ((str, bytes, os.PathLike), "a string or a path"),
    "output": ((str, bytes, os.PathLike), "'null', 'pipe', 'inherit' or a file's path"),
}


def from_keywords(keywords: dict[str, Any]) -> dict[str, Any]:
    """The API's keywords (by keyword; None, and False for a switch: not given) checked against
    each other and read by the table's grammars, by dest, as ``read`` gives the CLI's; a value of
    a type no grammar reads is a TypeError naming the keyword, a text one by the text rule."""
    from ..grammar.keywords import as_text, plain_value  # the API's alone: not on the CLI's start-up

    present = [dest for dest, option in BY_DEST.items() if keywords.get(option.keyword) not in (None, False)]
    check_given(present, KEYWORDS)
    found: dict[str, object] = {}
    for dest, option in MEASURED.items():
        key, value = option.keyword, keywords.get(option.keyword)
        if value is None or (dest == "ignore_failure" and value is False):
            continue
        types, wanted = TAKES[dest]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise TypeError(f"{key} must be {wanted}, not {type(value).__name__}")
        if isinstance(value, (list, tuple)) and any(
            isinstance(item, bool) or not isinstance(item, int) for item in value
        ):
            raise TypeError(f"each item of {key} must be an int")
        value = as_text(value, key) if dest in ("input", "output") else plain_value(value)
        found[dest] = [value] if option.kind == REPEAT else value
    return read(found, KEYWORDS)


def session_options(
    typed: dict[str, Any],
    *,
    shell: tuple[str, ...] | None,
    reference: bool,
    jsonl_dir: str | None,
    show_output: bool,
    named: Naming,
) -> Options:
    """The session's options from ``typed`` (the measured options as ``read`` or
    ``from_keywords`` gave them) and the ones taken as they are; ``named``: how the session's
    failures name an option, the caller's way."""
    return Options(
        runs=typed.get("runs"),
        min_runs=typed.get("min_runs", DEFAULT_MIN_RUNS),
        max_runs=typed.get("max_runs"),
        warmup=typed.get("warmup", 0),
        min_time_s=typed.get("min_time", DEFAULT_MIN_TIME_MS) / 1000,
        input_file=typed.get("input"),
        shell=shell,
        reference=reference,
        ignore_failure=typed.get("ignore_failure", False),
        timeout_ms=typed.get("timeout"),
        order=ORDERS[typed.get("order", "interleaved")],
        cpus=typed.get("cpus"),
        jsonl_dir=jsonl_dir,
        show_output=show_output,
        metric=typed.get("metric", "wall"),
        named=named,
    )


def make_jsonl_dir(options: Options) -> None:
    """``jsonl_dir`` made before the first run, and checked as a capture directory is: no other
    user's link or open directory (a failure names it as the caller spells it)."""
    if options.jsonl_dir is None:
        return
    from ..safepath import open_directory

    try:
        os.close(open_directory(options.jsonl_dir)[0])
    except OSError as exc:
        shown = options.named.given(BY_DEST["jsonl_dir"], options.jsonl_dir)
        raise Failure(Kind.SETUP, f"cannot make {shown}: {exc.strerror}") from None
