"""A direct parser for a subcommand's common case, from its options table (``grammar.Option``).

The table is the single description of the flags: the argparse parser (``--help``, usage
errors, completion, man pages, ``probe``) is built from it (``parsing.Parser.add_options``),
and ``parse_common`` reads a well-formed argv from it without importing argparse, whose import
(with ``re``, ``gettext`` and ``locale``) costs more than a short run's own work. Anything
unusual, from ``--help`` to a repeated flag, is left to argparse, so every message and exit
code is argparse's. tests/test_cli_options.py proves both parsers agree wherever the direct
one answers.
"""

from __future__ import annotations

import os
import stat
import sys

from ..grammar import REPEAT, SWITCH

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..grammar import Option

# The global option every subcommand accepts (main takes it out of argv before dispatching).
ERROR_FORMATS = ("human", "json")
ERROR_FORMAT_HELP = "how a runner-own failure is reported on stderr: human (default) or json, one envelope line"

# Not an option but the copy's side channel of ``run --detach``: the launcher (detach.py) names its
# readiness pipe in this variable, and the copy (run.py) takes it out of the environment at once,
# so the child never sees it.
READY_FD_VARIABLE = "PROCESSKIT_DETACH_READY_FD"


_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def named_fd(path: str | None) -> int | None:
    """The descriptor an input path (``--stdin-file``, ``--env-file``) names: ``/dev/stdin`` 0
    (``/dev/stdout`` 1, ``/dev/stderr`` 2), ``/dev/fd/N`` and ``/proc/self/fd/N`` N (a pipe, a
    process substitution); None for any other."""
    if path in _STANDARD:
        return _STANDARD[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        digits = path[len(prefix) :] if path is not None and path.startswith(prefix) else ""
        if digits.isascii() and digits.isdigit() and len(digits) <= 9:
            return int(digits)
    return None


def stdin_named(path: str | None) -> bool:
    """``path`` opens this process's stdin: ``/dev/stdin``, ``/dev/fd/0``, or any other name of
    the same stream (a link to ``/dev/stdin``, ``/proc/PID/fd/0``, the FIFO ``< FIFO`` redirected).
    A regular file or block device stdin is not: opened again by another name it has its own
    offset, so what is read from fd 0 takes nothing from it (``--stdin-file F < F``)."""
    if path is None:
        return False
    if named_fd(path) == 0:
        return True
    try:
        ours = os.fstat(0)
        if stat.S_ISREG(ours.st_mode) or stat.S_ISBLK(ours.st_mode):
            return False
        named = os.stat(path)  # a stat opens nothing: a FIFO there never waits
    except (OSError, ValueError):
        return False
    return (ours.st_dev, ours.st_ino) == (named.st_dev, named.st_ino)


# What ``parse_common`` answers with: the attributes argparse's namespace would have, each
# option's ``dest`` with its value, and ``_seen_<dest>`` for each once-only option that was given
# (see ``flag_given``). The interpreter's own namespace type (``types.SimpleNamespace``, taken as
# ``types`` takes it, without importing it): a class of this module's would be made on every start.
if TYPE_CHECKING:
    from types import SimpleNamespace as ParsedOptions
else:
    ParsedOptions = type(sys.implementation)


def flag_given(namespace: object, dest: str) -> bool:
    return getattr(namespace, f"_seen_{dest}", False)


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``(options, command)`` around the first ``--``; command is None when there is none."""
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], argv[index + 1 :]
    return argv, None


def parse_common(table: tuple[Option, ...], argv: list[str]) -> ParsedOptions | None:
    """``argv`` (the options before ``--``) parsed as argparse would, or None where argparse
    must answer: a token that is no known ``--flag`` (help, a stray word, an abbreviation), a
    once-only flag given again, a switch given a value, a missing value, a value that is empty
    or starts with ``-`` (argparse's rules there depend on the other tokens), a value outside
    the choices."""
    by_flag = {option.flag: option for option in table}
    parsed = ParsedOptions()
    found = vars(parsed)
    for declared in table:
        found[declared.dest] = declared.default()
    index = 0
    while index < len(argv):
        flag, equals, value = argv[index].partition("=")
        option = by_flag.get(flag)
        if option is None:
            return None
        index += 1
        if option.kind == SWITCH:
            if equals:
                return None
            value_given: object = True
        else:
            if not equals:
                if index == len(argv):
                    return None
                value = argv[index]
                index += 1
            if not value or value[0] == "-" or (option.choices is not None and value not in option.choices):
                return None
            value_given = value
        if option.kind == REPEAT:
            found[option.dest] = [*found[option.dest], value_given]
            continue
        seen = f"_seen_{option.dest}"
        if seen in found:
            return None
        found[seen] = True
        found[option.dest] = value_given
    return parsed
