"""The ``run`` command line a set of API keywords spells: the test's own model of the keyword
grammar (seconds to ``ms``, ints to digits, a mapping to ``K=V`` items), so the keywords' RunSpec
can be checked against the one ``cli.run.parse`` builds from the flags."""

from __future__ import annotations

from collections.abc import Mapping

from processkit.grammar.run import RUN_OPTIONS
from processkit.grammar import REPEAT, SWITCH

BY_KEYWORD = {option.keyword: option for option in RUN_OPTIONS}


def spelled(value, metavar: str | None) -> str:
    if metavar == "DUR" and isinstance(value, (int, float)):
        return f"{round(value * 1000)}ms"
    if metavar == "CORES" and isinstance(value, (int, float)):
        return repr(float(value))
    return str(value)


def run_argv(keywords: Mapping, *, jsonl: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The options part of a ``run`` argv (before ``--``) for ``keywords``."""
    argv = list(extra)
    for key, value in keywords.items():
        option = BY_KEYWORD[key]
        if value is None or value is False:
            continue
        if option.kind == SWITCH:
            argv.append(option.flag)
        elif option.kind == REPEAT:
            items = [f"{k}={v}" for k, v in value.items()] if isinstance(value, Mapping) else list(value)
            argv += [f"{option.flag}={item}" for item in items]
        else:  # --flag=VALUE: a value that starts with "-" is still the flag's
            argv.append(f"{option.flag}={spelled(value, option.metavar)}")
    return argv + [f"--jsonl={jsonl}"]
