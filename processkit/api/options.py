"""Keyword arguments -> a checked RunSpec, by the run grammar (``processkit.grammar``), before
anything starts.

The keywords are the run table's (``grammar.keywords``); their values are read by the same
grammars as the flags and the RunSpec is built by the same ``grammar.run.build``, with no command
line in between. A bad value is a ValueError naming the keyword (``'capture_keep=' requires
'capture_dir='``), a value of the wrong type or an unknown keyword a TypeError.
"""

from __future__ import annotations

from ..errors import Failure
from ..grammar import KEYWORDS
from ..grammar import keywords as run_keywords
from ..grammar.run import build
from ..spec import RunSpec


def keywords() -> tuple[str, ...]:
    """Every keyword ``run``/``start`` accept for the runner's flags."""
    return tuple(run_keywords.BY_KEYWORD)


def command_args(args) -> list[str]:
    """The program and its arguments (``grammar.keywords.command_args``), a bad one a ValueError."""
    try:
        return run_keywords.command_args(args)
    except Failure as failure:
        raise ValueError(failure.message) from None


def as_text(value, what: str) -> str:
    """``value`` as the text an option takes (``grammar.keywords.as_text``), a bad one a ValueError."""
    try:
        return run_keywords.as_text(value, what)
    except Failure as failure:
        raise ValueError(failure.message) from None


def run_spec(command: list[str], options: dict, *, jsonl: str, function: str, fixed: dict[str, object]) -> RunSpec:
    """The RunSpec of ``command`` under the caller's keyword ``options`` and the options the API
    sets itself (``fixed``, by dest: ``no_echo``, the service's stand-ins), writing to ``jsonl``."""
    try:
        given = run_keywords.options(options, KEYWORDS, function=function)
        return build(tuple(command), {**given, **fixed, "jsonl": jsonl}, KEYWORDS)
    except Failure as failure:
        raise ValueError(failure.message) from None
