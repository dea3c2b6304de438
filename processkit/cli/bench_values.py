"""``bench``'s value grammars: a JSON argv (``--command``), a step (``--prepare``/``--setup``/
``--conclude``/``--cleanup``: a JSON argv or a shell string), a CPU list (``--cpus``), the exit
codes ``--ignore-failure`` names, and the ``--input`` file."""

from __future__ import annotations

import os

from ..bounded import loads
from ..errors import usage
from ..text import cut, sanitize, uncarried
from ..grammar import values


def argv_value(text: str, flag: str | None) -> tuple[str, ...]:
    try:
        parsed = loads(text)  # nested at most bounded.MAX_DEPTH: 100k brackets are no RecursionError
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not parsed or not all(isinstance(item, str) for item in parsed):
        raise usage(f"invalid value '{cut(text)}' for '{flag}': expected a JSON array of strings, e.g. '[\"true\"]'")
    for index, item in enumerate(parsed):
        problem = values.text_problem(item)  # JSON text: the text rule, "\udc80" included
        if problem is not None:
            raise usage(f"invalid value for '{flag}': argument {index} holds {problem}, which no argument can carry")
    return tuple(parsed)


def step_value(text: str, flag: str) -> tuple[str, str | tuple[str, ...]]:
    """A ``--prepare``/``--setup``/``--conclude``/``--cleanup`` value: a JSON array of strings
    is an argv, run shell-free (the form these flags took first); anything else is a shell
    command, as in hyperfine (``[ -e f ] || make`` included)."""
    try:
        parsed = loads(text)  # nested at most bounded.MAX_DEPTH
    except ValueError:
        parsed = None
    if isinstance(parsed, list) and parsed and all(isinstance(item, str) for item in parsed):
        return ("argv", argv_value(text, flag))
    problem = uncarried(text)
    if problem is not None:
        raise usage(f"invalid value for '{flag}': it holds {problem}, which no argument can carry")
    return ("shell", text)


MAX_CPU = 8191  # the kernel's largest NR_CPUS: a larger number names no CPU, and bounds a range


def parse_cpus(text: str) -> tuple[int, ...]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not values.is_digits(low) or (high and not values.is_digits(high)) or len(part) > 20:
            raise usage(f"invalid value '{cut(text)}' for '--cpus': expected a CPU list such as 0,2-3")
        first, last = int(low), int(high or low)
        if first > last or last > MAX_CPU:
            raise usage(
                f"invalid value '{cut(text)}' for '--cpus': a range goes up, and CPUs are numbered 0 to {MAX_CPU}"
            )
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def ignored_codes(value: str | bool) -> bool | tuple[int, ...]:
    """``--ignore-failure``: every non-zero exit (no value, ``all-non-zero``), or these codes."""
    if not isinstance(value, str) or value in ("", "all-non-zero"):
        return bool(value) or value == ""
    codes = [code.strip() for code in value.split(",")]
    if not all(values.is_digits(code) and len(code) <= 3 for code in codes):
        raise usage(
            f"invalid value {sanitize(value)!r} for '--ignore-failure': exit codes such as 1,2, or all-non-zero"
        )
    return tuple(int(code) for code in codes)


def input_file(where: str | None) -> str | None:
    if where is None or where == "null":
        return None
    if not os.path.exists(where):
        raise usage(f"the file {sanitize(where)!r} specified as '--input' does not exist")
    return where
