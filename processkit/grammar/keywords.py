"""A run described by Python values: the API's keywords and a manifest line's keys, read into
the options ``run.build`` takes, without a command line in between.

The keywords are the run table's own (``Option.keyword``), so every ``run`` flag has one and a
new flag gets one without touching this module: a switch is a bool, a repeatable option takes an
iterable (a ``K=V`` one also a mapping), a ``DUR`` also a number of seconds, a ``SIZE`` or ``N``
also an int, ``CORES`` also a number; text may also be bytes or a path object. A value
of the wrong type is a TypeError naming the keyword, as Python's own are; a value of the right
type goes through the same grammar as the flag's text, and a bad one is a usage ``Failure``
naming the option as the caller's ``Naming`` does.

Text and bytes differ as in ``os``: a str is text, refused with a NUL or a lone surrogate
(``values.text_problem``); bytes and path objects are the OS's own form, where an undecodable
byte is U+DC80-U+DCFF after ``os.fsdecode`` and only a NUL (or a character no encoding has) is
refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from ..errors import usage
from ..text import uncarried
from . import FLAGS, REPEAT, SWITCH, Naming, values
from .run import RUN_OPTIONS

# Flags the API leaves out, and what to use instead.
NOT_KEYWORDS = {
    "no_echo": "pass echo=False (the default) instead",
    "detach": "use processkit.start() for a run that outlives the call",
    "usage_file": "RunResult.resources and RunResult.usage carry every figure",
}
BY_KEYWORD = {option.keyword: option for option in RUN_OPTIONS if option.dest not in NOT_KEYWORDS}

# What a keyword of each metavar takes, as its TypeError says.
WANTED = {
    "DUR": "a number of seconds or a duration string such as '90s'",
    "SIZE": "a number of bytes or a size string such as '32m'",
    "N": "an int",
    "CORES": "a number of cores",
    "FILE": "a string or a path",
    "DIR": "a string or a path",
}
NUMBERS = {"DUR": (int, float), "SIZE": (int,), "N": (int,), "CORES": (int, float)}
# Options whose own grammar refuses every NUL and lone surrogate (a run id and a label are
# terminal-safe text): their values are only typed here, so a refusal reads the same from every
# describer, the command line's included.
OWN_TEXT_RULE = ("run_id", "label")
# Options that name what the OS is given (a directory, the environment's entries): with the
# API's ``os_form`` a str is read as ``os.fsencode`` reads it, as ``args`` items are.
OS_FORM = ("cwd", "env")
OWN, OS, TEXT = "own", "os", "text"  # how an option's str is read (``_rule``)


def options(
    keywords: Mapping[str, object],
    name: Naming,
    *,
    function: str | None = None,
    near_to: Callable[[], Iterable[str]] | None = None,
    os_form: bool = False,
) -> dict[str, object]:
    """``keywords`` as ``run.build``'s options (by dest); None and False leave an option out.
    ``function`` prefixes the TypeError of a keyword that is not one (``run() got ...``);
    ``near_to``: the keys its "did you mean" may suggest, when not the run keywords (a manifest
    line's: ``jobkeys.line_keys``); ``os_form``: ``OS_FORM``'s str as ``os.fsencode`` reads them (the API's)."""
    given: dict[str, object] = {}
    prefix = f"{function}() " if function else ""
    for key, value in keywords.items():
        if key in NOT_KEYWORDS:
            raise TypeError(f"{prefix}does not take '{key}': {NOT_KEYWORDS[key]}")
        option = BY_KEYWORD.get(key)
        if option is None:
            known = BY_KEYWORD if near_to is None else near_to()
            raise unexpected(key, known, function)
        if value is None:
            continue
        if option.kind == SWITCH:
            if not isinstance(value, bool):
                raise TypeError(f"{key} must be True or False, not {value!r}")
            if value:
                given[option.dest] = True
        elif option.kind == REPEAT:
            items = _items(key, option.metavar or "", value, _rule(option.dest, os_form))
            if items:
                given[option.dest] = items
        else:
            given[option.dest] = _single(key, option.metavar or "", value, _rule(option.dest, os_form))
    return given


def unexpected(key: object, known: Iterable[str], function: str | None = None) -> TypeError:
    """Python's own TypeError for a keyword that is none of ``known``, with the one it may have
    meant (``near``): ``run() got an unexpected keyword argument 'timout' (did you mean
    'timeout'?)``, or without ``function`` the words a manifest line's refusal frames."""
    prefix = f"{function}() " if function else ""
    return TypeError(f"{prefix}got an unexpected keyword argument '{key}'{near(key, known)}")


def near(key: object, known: Iterable[str]) -> str:
    """The keyword of ``known`` one typo away from ``key`` (``timout``: ``timeout``), as the
    refusal's tail: a manifest's writer reads the refusal in a CI log, far from any list."""
    import difflib

    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _rule(dest: str, os_form: bool) -> str:
    """How an option's str is read: ``OWN`` (its grammar's), ``OS`` (``as_text``'s os_form) or the text rule."""
    return OWN if dest in OWN_TEXT_RULE else OS if os_form and dest in OS_FORM else TEXT


def _items(key: str, metavar: str, value, rule: str) -> list:
    """A repeatable keyword's items: ``KEY=VALUE`` texts, or (key, value) pairs of a mapping. A
    path's (``env_file``) may be one path alone, a one-item list: a path is never a list of them."""
    if metavar == "FILE" and isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    if isinstance(value, Mapping):
        if metavar != "K=V":
            raise TypeError(f"{key} takes a list, not a mapping")
        return [
            (_text(name, f"each {key} key", "a string", rule), _mapped(key, name, item, rule))
            for name, item in value.items()
        ]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{key} takes a list{' or a mapping' if metavar == 'K=V' else ''}, not {type(value).__name__}")
    return [_text(item, f"each item of {key}", WANTED.get(metavar, "a string"), rule) for item in value]


def mapping_items(key: str, value: Mapping) -> list[tuple[str, str]]:
    """A ``K=V`` keyword's mapping as (name, value) texts, each refused naming ``key``: the API's
    ``env`` and ``env_add``, read into the one ``env`` option, a str as ``os.fsencode`` reads it."""
    return _items(key, "K=V", value, OS)


def _mapped(key: str, name, value, rule: str) -> str:
    """A mapping keyword's value, refused with the key it belongs to (``env={"A": 1}``), naming
    its type, never the value: an environment value may be a secret (a numeric PIN or token in a
    manifest's ``env``), and the error lands on stderr, in CI logs, as ``args`` items' never do."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return _text(value, f"the value of {name!r} in {key}", "a string", rule)
    raise TypeError(f"the value of {name!r} in {key} must be a string, not {type(value).__name__}")


def _single(key: str, metavar: str, value, rule: str) -> object:
    if isinstance(value, bool):
        raise TypeError(f"{key} takes a value, not {value!r}")
    if isinstance(value, NUMBERS.get(metavar, ())):  # the option's grammar reads a number as the text
        return plain_value(value)
    return _text(value, key, WANTED.get(metavar, "a string"), rule)


def _text(value, what: str, wanted: str, rule: str = TEXT) -> str:
    """``as_text``, with the TypeError saying what ``what`` takes; by ``rule`` (``_rule``) a str
    is left to the option's grammar (``OWN_TEXT_RULE``) or read in the OS's form (``OS_FORM``)."""
    if rule == OWN and isinstance(value, str):
        return plain(value)
    if rule == OS and type(value) is str and value.isascii() and "\0" not in value:
        return value  # ``as_text``'s answer at a fraction of its cost: each item of a large env goes here twice
    if isinstance(value, (str, bytes, os.PathLike)):
        return as_text(value, what, rule == OS)
    raise TypeError(f"{what} must be {wanted}, not {type(value).__name__}")


def as_text(value, what: str, os_form: bool = False) -> str:
    """``value`` as the text an option takes: a str by the text rule; bytes and path objects
    in the OS's form (``os.fsdecode``), refused only with a NUL or a character with no bytes.
    ``os_form``: a str in the OS's form too (``os.fsencode``'s rule, subprocess's: an undecoded
    byte, U+DC80-U+DCFF, is that byte)."""
    if isinstance(value, str) and not os_form:
        return plain(values.checked_text(value, what))
    if isinstance(value, (str, bytes, os.PathLike)):
        text = os.fsdecode(value)
        problem = uncarried(text)
        if problem is not None:
            raise usage(f"{what} holds {problem}, which no argument, environment or path can carry")
        return plain(text)
    raise TypeError(f"{what} must be a string or a path, not {type(value).__name__}")


def plain(text: str) -> str:
    """``text`` as a ``str`` itself: a subclass's (an enum's member, a class of the caller's own)
    is its string, never its name. The API sends its spec to the runner service as a pickle, which
    names a subclass by its module: one the service cannot import (the caller's ``__main__``) left
    the call waiting for a reply that never came."""
    return text if type(text) is str else str.__str__(text)


def plain_value(value):
    """``value`` (text, a number, or a list or tuple of them) as the built-in types themselves,
    for ``plain``'s reason: a subclass of the caller's own (a benchmark's ``runs=``) does not
    unpickle in the runner service, and the call would end in a bare RuntimeError, no code."""
    if isinstance(value, (list, tuple)):
        return [plain_value(item) for item in value]
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__int__(value)
    return float.__float__(value) if isinstance(value, float) else value


def command_args(args, os_form: bool = False) -> list[str]:
    """The program and its arguments: a non-empty list or tuple of str, bytes or path objects
    (``os_form``: the API's, whose str are taken as ``subprocess.run`` takes them, ``as_text``)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list of strings (no shell is involved), not {type(args).__name__}")
    if not args:
        raise usage("args must name a program to run")
    return [as_text(arg, f"args item {index}", os_form) for index, arg in enumerate(args)]


def reworded(message: str, name: Naming) -> str:
    """A runner's failure message with each of run's flags it names (``cannot open a
    pseudo-terminal for --pty: ...``, written by the engine for the CLI) named as ``name`` names
    it, a value that follows joined to it (``pty=True``): the API hands its callers the message
    in their own vocabulary (a switch as ``pty=True``); the stream keeps the engine's words."""
    import re

    if name is FLAGS:
        return message

    by_flag = {option.flag: option for option in RUN_OPTIONS}

    def named(found: re.Match) -> str:
        option = by_flag.get(found.group(1))
        if option is None:
            return found.group(0)
        if option.kind == SWITCH:  # it takes no value: a word after it is the message's own
            return name.given(option, "True") + (found.group(2) or "")
        return name.given(option, "") if found.group(2) else name(option)

    return re.sub(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?![\w-])( (?=\S))?", named, message)
