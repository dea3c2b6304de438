"""A command or step given as text: a JSON argv (``--command``), or a step (``--prepare``/
``--setup``/``--conclude``/``--cleanup``, and the API's string steps: a JSON argv or a shell
string), each string under the text rule where JSON made it (``grammar.values.text_problem``).
"""

from __future__ import annotations

from ..bounded import loads
from ..errors import usage
from ..text import cut, uncarried
from ..grammar import values


def argv_value(text: str, flag: str | None) -> tuple[str, ...]:
    try:
        parsed = loads(text)  # nested at most bounded.MAX_DEPTH: 100k brackets are no RecursionError
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not parsed or not all(isinstance(item, str) for item in parsed):
        raise usage(f"invalid value '{cut(text)}' for '{flag}': expected a JSON array of strings, e.g. '[\"true\"]'")
    for index, item in enumerate(_as_written(text, parsed)):
        problem = values.text_problem(item)
        if problem is not None:
            raise usage(f"invalid value for '{flag}': argument {index} holds {problem}, which no argument can carry")
    return tuple(parsed)


def _as_written(text: str, parsed: list[str]) -> list[str]:
    """The array's strings as JSON's escapes make them, for the text rule: a character the
    command line gave as it is (an undecodable byte, U+DC80-U+DCFF, passed on as that byte) is
    the OS's and stands in as ``x``; one an escape made (``"\\udc80"``) is JSON's text."""
    if text.isascii():
        return parsed
    return loads("".join("x" if "\ud800" <= ch <= "\udfff" else ch for ch in text))


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
