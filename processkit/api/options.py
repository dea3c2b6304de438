"""Keyword arguments -> a checked RunSpec, by the run grammar (``processkit.grammar``), before
anything starts.

The keywords are the run table's (``grammar.keywords``); their values are read by the same
grammars as the flags and the RunSpec is built by the same ``grammar.run.build``, with no command
line in between. A bad value is a ValueError naming the keyword (``'capture_keep=' requires
'capture_dir='``), a value of the wrong type or an unknown keyword a TypeError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import Failure
from ..grammar import KEYWORDS
from ..grammar import keywords as run_keywords
from ..grammar.run import build
from ..spec import RunSpec
from ..refusal import refused


def keywords() -> tuple[str, ...]:
    """Every keyword ``run``/``start`` accept for the runner's flags (``env`` as subprocess's,
    ``env_add`` the CLI's ``--env``)."""
    return (*run_keywords.BY_KEYWORD, "env_add")


def command_args(args) -> list[str]:
    """The program and its arguments (``grammar.keywords.command_args``, a str in the OS's form as
    subprocess takes it: ``"\\udcff"`` is the byte 0xFF), a bad one a ValueError. A str, bytes or
    path object alone is the program, as subprocess takes it on POSIX (``run("true")``; ``"ls -l"``
    names a program of that name: no shell splits it)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    try:
        return run_keywords.command_args(args, os_form=True)
    except Failure as failure:
        raise refused(failure.message) from None


def as_text(value, what: str) -> str:
    """``value`` as the text an option takes (``grammar.keywords.as_text``), a bad one a ValueError."""
    try:
        return run_keywords.as_text(value, what)
    except Failure as failure:
        raise refused(failure.message) from None


def shell_args(args, shell) -> object:
    """``shell=True`` as subprocess's: ``/bin/sh -c`` with ``args`` (a string; a sequence's
    first item is the command, the rest the shell's ``$0``, ``$1``, ...)."""
    if not isinstance(shell, bool):
        raise TypeError(f"shell must be True or False, not {shell!r}")
    if not shell:
        return args
    if isinstance(args, (str, bytes, os.PathLike)):
        return ["/bin/sh", "-c", args]
    if isinstance(args, (list, tuple)):
        return ["/bin/sh", "-c", *args]
    raise TypeError(f"args must be a string with shell=True, not {type(args).__name__}")


def environment(options: dict) -> None:
    """subprocess's ``env=`` in ``options`` as the runner's flags: the child's whole environment
    (``env_clear`` and the variables given); ``env_add=`` adds to the caller's (the CLI's and a
    manifest's ``env``), after ``env`` when both are given."""
    replaced, added = options.pop("env", None), options.pop("env_add", None)
    pairs: list = []
    for key, value in (("env", replaced), ("env_add", added)):
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise TypeError(f"{key} must be a mapping of names to values, not {type(value).__name__}")
        pairs += run_keywords.mapping_items(key, value)
    if replaced is not None:
        options["env_clear"] = True
    if pairs:
        options["env"] = dict(pairs)  # read again by the env option's grammar (its key rules)


def run_spec(command: list[str], options: dict, *, jsonl: str, function: str, fixed: dict[str, object]) -> RunSpec:
    """The RunSpec of ``command`` under the caller's keyword ``options`` and the options the API
    sets itself (``fixed``, by dest: ``no_echo``, the service's stand-ins), writing to ``jsonl``."""
    try:
        environment(options)
        given = run_keywords.options(options, KEYWORDS, function=function, os_form=True)
        empty_cwd = given.get("cwd") == ""  # no bad value: subprocess's FileNotFoundError, at the spawn
        if empty_cwd:
            del given["cwd"]
        spec = build(tuple(command), {**given, **fixed, "jsonl": jsonl}, KEYWORDS)
    except Failure as failure:
        raise refused(failure.message) from None
    return spec.replace(cwd="") if empty_cwd else spec
