"""Keyword arguments -> the ``run`` command line, checked by the CLI's own parser before anything starts.

The keywords are derived from ``processkit.cli.run``'s options table, so every ``run`` flag has one and a
new flag gets one without touching this module: a switch is a bool, a repeatable flag takes an
iterable (a ``K=V`` flag also a mapping), a ``DUR`` also a number of seconds, a ``SIZE`` or ``N``
also an int, ``CORES`` also a number. The resulting argv goes through ``cli.run.parse`` in this
process, so a bad value is the same one-line message the CLI would print, raised as ValueError.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from ..errors import Failure
from ..spec import U64_MAX, RunSpec
from ..plain import Frozen
from ..text import uncarried

# Keyword names that differ from the flag's dest; flags the API spells differently or leaves out.
RENAMED = {"label": "labels"}
NOT_KEYWORDS = {
    "no_echo": "pass echo=False (the default) instead",
    "detach": "use processkit.start() for a run that outlives the call",
    "usage_file": "RunResult.resources and RunResult.usage carry every figure",
}


class Flag(Frozen):
    option: str  # "--timeout"
    kind: str  # "switch", "repeat" or the metavar of a single value (DUR, SIZE, N, CORES, FILE, ...)
    metavar: str | None


def _flags() -> dict[str, Flag]:
    """keyword -> Flag, read once from the run options table (cli/options.py's ``Option``s)."""
    global _FLAGS
    if _FLAGS is None:
        from ..cli.options import REPEAT, SWITCH
        from ..cli.run import RUN_OPTIONS

        table = {}
        for option in RUN_OPTIONS:
            if option.dest in NOT_KEYWORDS:
                continue
            kinds = {SWITCH: "switch", REPEAT: "repeat"}
            table[RENAMED.get(option.dest, option.dest)] = Flag(
                option.flag, kinds.get(option.kind) or option.metavar or "TEXT", option.metavar
            )
        _FLAGS = table
    return _FLAGS


_FLAGS: dict[str, Flag] | None = None


def keywords() -> tuple[str, ...]:
    """Every keyword ``run``/``start`` accept for the runner's flags."""
    return tuple(_flags())


def command_args(args) -> list[str]:
    """The program and its arguments: a non-empty list or tuple of str, bytes or path objects."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list of strings (no shell is involved), not {type(args).__name__}")
    if not args:
        raise ValueError("args must name a program to run")
    try:
        return [as_text(arg, "args item") for arg in args]
    except (TypeError, ValueError):
        for index, arg in enumerate(args):  # again, to name the item
            as_text(arg, f"args item {index}")
        raise


def runner_argv(
    command: list[str], options: dict, *, jsonl: str, function: str, extra: list[str]
) -> tuple[list[str], RunSpec]:
    """The ``run`` argv for ``command`` under ``options`` (plus the ``extra`` flags the API sets
    itself), and the RunSpec the CLI parses from it.

    The run id is always explicit, so the caller knows it before the runner starts."""
    table = _flags()
    argv: list[str] = list(extra)
    for key, value in options.items():
        if key in NOT_KEYWORDS:
            raise TypeError(f"{function}() does not take '{key}': {NOT_KEYWORDS[key]}")
        flag = table.get(key)
        if flag is None:
            raise TypeError(f"{function}() got an unexpected keyword argument '{key}'")
        if key in ("jsonl", "run_id") or value is None or (value is False and flag.kind == "switch"):
            continue
        argv += _flag_argv(key, flag, value)
    argv += ["--jsonl", jsonl]
    if options.get("run_id") is not None:
        argv += ["--run-id", _text(options["run_id"], "run_id", "a string")]
    from ..cli.run import parse

    try:
        spec = parse(argv + ["--", *command])
    except Failure as failure:
        raise ValueError(failure.message) from None
    if options.get("run_id") is None:
        argv += ["--run-id", spec.run_id]
    return argv + ["--", *command], spec


def _flag_argv(key: str, flag: Flag, value) -> list[str]:
    if flag.kind == "switch":
        if value is not True:
            raise TypeError(f"{key} must be True or False, not {value!r}")
        return [flag.option]
    if flag.kind == "repeat":
        return [part for item in _items(key, flag, value) for part in (flag.option, item)]
    return [flag.option, _single(key, flag.kind, value)]


def _items(key: str, flag: Flag, value) -> list[str]:
    if isinstance(value, Mapping):
        if flag.metavar != "K=V":
            raise TypeError(f"{key} takes a list, not a mapping")
        pairs = [(_text(k, f"each {key} key", "a string"), _mapped_text(key, k, v)) for k, v in value.items()]
        for name, _ in pairs:
            if "=" in name:  # K=V would read it as another key and value
                raise ValueError(f"{key} key {name!r} holds '=', which no {key} key may")
        return [f"{name}={item}" for name, item in pairs]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{key} takes a list{' or a mapping' if flag.metavar == 'K=V' else ''}, not {type(value).__name__}"
        )
    return [_text(item, f"each item of {key}", WANTED.get(flag.metavar or "", "a string")) for item in value]


def _mapped_text(key: str, name, value) -> str:
    """A mapping keyword's value, refused with the key it belongs to (``env={"A": 1}``)."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return as_text(value, f"the value of {name!r} in {key}")
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise TypeError(f"the value of {name!r} in {key} must be a string, not {type(value).__name__} ({shown})")


def _single(key: str, kind: str, value) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{key} takes a value, not {value!r}")
    if isinstance(value, int) and not -U64_MAX <= value <= U64_MAX:  # str() of 4,300+ digits raises
        raise ValueError(f"invalid value for '{key}': {value.bit_length()} bits is too large")
    if kind == "DUR" and isinstance(value, (int, float)):
        return _seconds(key, value)
    if kind in ("SIZE", "N") and isinstance(value, int):
        return str(value)
    if kind == "CORES" and isinstance(value, (int, float)):
        return repr(float(value))
    return _text(value, key, WANTED.get(kind, "a string"))


# What a keyword of each metavar takes, as its TypeError says.
WANTED = {
    "DUR": "a number of seconds or a duration string such as '90s'",
    "SIZE": "a number of bytes or a size string such as '32m'",
    "N": "an int",
    "CORES": "a number of cores",
    "FILE": "a string or a path",
    "DIR": "a string or a path",
}


def _text(value, what: str, wanted: str) -> str:
    """``as_text``, with the TypeError saying what ``what`` takes."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return as_text(value, what)
    raise TypeError(f"{what} must be {wanted}, not {type(value).__name__}")


def _seconds(key: str, value: float) -> str:
    """A number of seconds as whole milliseconds, the CLI's finest unit."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"invalid value {value!r} for '{key}': expected a finite number of seconds, not negative")
    milliseconds = value * 1000
    if not math.isfinite(milliseconds):  # a float near its maximum: no whole number of ms to round to
        raise ValueError(f"invalid value {value!r} for '{key}': duration is too large")
    return f"{round(milliseconds)}ms"


def as_text(value, what: str) -> str:
    """``value`` as the text a flag takes; a str must be one the OS can take (``text.unencodable``)."""
    if isinstance(value, (bytes, os.PathLike)):
        value = os.fsdecode(value)
    if isinstance(value, str):
        problem = uncarried(value)
        if problem is not None:
            raise ValueError(f"{what} holds {problem}, which no argument, environment or path can carry")
        return value
    raise TypeError(f"{what} must be a string or a path, not {type(value).__name__}")
