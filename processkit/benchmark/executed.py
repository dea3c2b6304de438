"""What a benchmark's given command executes: its parameters' ``{NAME}`` substituted, then run
through the shell (``SHELL -c TEXT``) or split as a shell would and run without one (``-N``), or
an argv as it is.

Apart from the plan (``benchmark/plan.py``), which decides which commands and steps there are
and what they are called; this is how each of them, and each step, becomes the argv run.
"""

from __future__ import annotations

import re

from ..errors import usage
from ..text import cut
from . import words


def substitute(text: str, values: dict[str, str]) -> str:
    """Every ``{NAME}`` replaced in one pass, so a value holding ``{OTHER}`` stays as it is."""
    if not values:
        return text
    pattern = re.compile("|".join(re.escape("{" + name + "}") for name in values))
    return pattern.sub(lambda found: values[found.group()[1:-1]], text)


Given = tuple[str, "str | tuple[str, ...]"]  # ("shell", text) or ("argv", arguments)


def to_argv(given: Given, values: dict[str, str], shell: tuple[str, ...] | None) -> tuple[tuple[str, ...], bool]:
    """What a given command executes, its parameters substituted, and whether it runs through
    the shell: a shell string is ``SHELL -c TEXT``, or split as a shell would (``-N``)."""
    kind, value = given
    if kind == "argv":
        assert isinstance(value, tuple)
        return tuple(substitute(arg, values) for arg in value), False
    assert isinstance(value, str)
    text = substitute(value, values)
    if shell is not None:
        return (*shell, "-c", text), True
    try:
        argv = tuple(words.split(text))
    except ValueError as exc:
        raise usage(f"cannot split the command '{cut(text)}' without a shell: {exc}") from None
    if not argv:
        raise usage("an empty command cannot run without a shell")
    return argv, False
