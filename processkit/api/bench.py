"""``processkit.bench``: a typed call on this process's runner service, as ``run`` and ``batch``
are. The keywords are read here into the benchmark's typed plan: the measured options by
``benchmark.options``' table (the one the CLI's flags read, ``from_keywords``), every text by the
run grammar's text rule (``grammar.keywords.as_text``), and the commands expanded by
``benchmark.plan``. The plan (``Benchmark``: the ``Command`` values and ``plan.Options``, whose
``named`` is the keywords) goes to the service, which starts a process of its own for it
(``service.bench``: why a process, not a group on the service's host), and the answer is the
session's ``BenchResult`` itself: no command line, no export file read back, no environment
variable saying who asked, so a failure the session finds while it runs names the keyword too.

Units are ``processkit.run``'s: a duration is seconds (a number) or a duration string
(``"500ms"``), a count an int. A bad value is a ValueError naming the keyword (``'runs=' ...``),
a value of the wrong type or an unknown keyword a TypeError, before anything is sent. A failed
benchmark raises ``Failure`` with the CLI's code; a Ctrl-C (KeyboardInterrupt in the caller, or
SIGINT to the benchmark's process) stops it through each run's release and propagates as the
caller's KeyboardInterrupt, as ``run``'s and ``batch``'s do.
"""

from __future__ import annotations

import os
import socket
import warnings

from ..benchmark import argvs
from ..benchmark import options as measured_options
from ..benchmark.plan import DEFAULT_SHELL, Auxiliary, Options, expand
from ..errors import Failure, Kind, internal_failure, kind_labelled
from ..grammar import KEYWORDS
from ..grammar.keywords import as_text, unexpected
from ..plain import Plain
from ..spec import callers_cwd
from . import caller_env
from ..refusal import refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..benchmark.result import BenchResult
    from .service import Connection

FUNCTION = "processkit.bench"
# Old keyword -> (its replacement, how an old value is written as the new one).
DEPRECATED = {
    "timeout_ms": ("timeout", lambda value: f"{value}ms" if isinstance(value, int) else value / 1000),
    "min_time_s": ("min_time", lambda value: value),
}
STEPS = ("prepare", "setup", "cleanup", "conclude")
TEXTS = ("reference", "reference_name", "shell", "jsonl_dir", "baseline")  # taken as they are, as text


class Benchmark(Plain):
    """What the service's bench process is asked to run: the commands as the plan expanded
    them, the session's options, the baseline (a path) and its gate, and the caller's working
    directory, environment and umask, which that process takes as its own."""

    commands: list
    options: Options
    caller: caller_env.CallerEnv  # no default: a request that forgot it would run under a umask its caller never had
    baseline: str | None = None
    fail_if_slower: float | None = None
    cwd: str = "/"


def bench(
    commands: list,
    *,
    names: list[str] | None = None,
    parameters: dict[str, list] | None = None,
    order: str = "interleaved",
    runs: int | None = None,
    min_runs: int | None = None,
    max_runs: int | None = None,
    warmup: int | None = None,
    min_time: float | str | None = None,
    prepare: str | list[str] | None = None,
    setup: str | list[str] | None = None,
    cleanup: str | list[str] | None = None,
    conclude: str | list[str] | None = None,
    reference: str | None = None,
    reference_name: str | None = None,
    shell: str | None = None,
    output: str | None = None,
    input_file: str | os.PathLike | None = None,
    ignore_failure: bool | list[int] = False,
    timeout: float | str | None = None,
    cpus: list[int] | None = None,
    jsonl_dir: str | os.PathLike | None = None,
    show_output: bool = False,
    metric: str = "wall",
    baseline: str | os.PathLike | None = None,
    fail_if_slower: float | None = None,
    **deprecated,
) -> BenchResult:
    """Benchmark ``commands`` (each an argv list, run shell-free, or a string, a shell command
    as hyperfine runs it) and return the typed result. ``names``: the commands' names;
    ``parameters``: name -> values (hyperfine's ``-L``); ``order``: ``interleaved`` or
    ``sequential``; ``runs``, ``min_runs``, ``max_runs``, ``warmup``: counts; ``min_time`` and
    ``timeout`` (each run's): seconds, or a duration string such as ``"500ms"``; ``prepare``,
    ``setup``, ``cleanup``, ``conclude``: a shell string or an argv list; ``reference``,
    ``reference_name``; ``shell`` (``"none"``: no shell); ``output``; ``input_file``;
    ``ignore_failure`` (True, or the exit codes); ``cpus``; ``jsonl_dir``; ``show_output``;
    ``metric`` (``wall`` or ``cpu``); ``baseline`` (an earlier export: ``result.baseline``
    compares each command with it) and ``fail_if_slower`` (a percentage: a significant slowdown
    beyond it raises ``Failure`` 119). A bad keyword raises TypeError or ValueError before
    anything runs; a failed benchmark raises ``Failure`` with the CLI's code."""
    given = {key: value for key, value in locals().items() if key not in ("commands", "deprecated")}
    for key, value in deprecated.items():
        given.update(_renamed(key, value, given))
    request = planned(commands, given)
    through = show_output or any(command.output == "inherit" for command in request.commands)
    connection, rid, sock = _sent(request, outputs_through=through)
    try:  # its box open till the answer, so its service is not idle (retired) while it runs
        return _answered(sock, connection, rid)
    finally:
        connection.forget(rid)


def _renamed(key: str, value, given: dict) -> dict:
    """An old keyword's value under its new name, with a DeprecationWarning; any other unknown
    keyword is a TypeError naming it (and the keyword it may have meant)."""
    if key not in DEPRECATED:
        raise unexpected(key, [*given, "commands"], FUNCTION)
    new, convert = DEPRECATED[key]
    if given[new] is not None:
        raise TypeError(f"{FUNCTION}() takes '{new}' or the deprecated '{key}', not both")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{key} must be a number, not {type(value).__name__}")
    warnings.warn(
        f"{FUNCTION}({key}=) is deprecated: pass {new}= (seconds, or a duration string such as '500ms')",
        DeprecationWarning,
        stacklevel=3,
    )
    return {new: convert(value)}


def planned(commands: list, given: dict) -> Benchmark:
    """The benchmark ``commands`` and the ``given`` keywords ask for, every one checked (a usage
    error as a ValueError naming the keyword)."""
    try:
        return _planned(commands, given)
    except Failure as failure:
        raise refused(failure.message) from None


def _planned(commands: list, given: dict) -> Benchmark:
    asked = _commands(commands)
    names = [as_text(name, f"names[{index}]") for index, name in enumerate(_listed(given["names"], "names"))]
    parameters = _parameters(given["parameters"])
    typed = measured_options.from_keywords(given)
    steps = {key: _step(given[key], key) for key in STEPS if given[key] is not None}
    texts = {key: as_text(given[key], key) for key in TEXTS if given[key] is not None}
    if not isinstance(given["show_output"], bool):
        raise TypeError(f"show_output must be True or False, not {given['show_output']!r}")
    shell = measured_options.shell_of(texts["shell"], "shell=") if "shell" in texts else DEFAULT_SHELL
    reference = (("shell", texts["reference"]), texts.get("reference_name")) if "reference" in texts else None
    auxiliary = Auxiliary(
        setup=steps.get("setup"),
        cleanup=steps.get("cleanup"),
        prepare=[steps["prepare"]] if "prepare" in steps else [],
        conclude=[steps["conclude"]] if "conclude" in steps else [],
        outputs=typed.get("output", []),
    )
    named = measured_options.naming(KEYWORDS)
    expanded = expand(asked, names, parameters, shell=shell, reference=reference, auxiliary=auxiliary, named=named)
    options = measured_options.session_options(
        typed,
        shell=shell,
        reference=reference is not None,
        jsonl_dir=texts.get("jsonl_dir"),
        show_output=given["show_output"],
        named=KEYWORDS,
    )
    return Benchmark(
        commands=expanded,
        options=options,
        baseline=texts.get("baseline"),
        fail_if_slower=typed.get("fail_if_slower"),
        cwd=callers_cwd(),  # a removed one named as ``run``'s is
        caller=caller_env.whole(),
    )


def _commands(commands: list) -> list[tuple]:
    """Each command as ``plan.expand`` takes it: a string a shell command, a list an argv."""
    if isinstance(commands, (str, bytes)) or not isinstance(commands, (list, tuple)):
        raise TypeError(f"commands must be a list (of shell strings or argv lists), not {type(commands).__name__}")
    if not commands:
        raise ValueError("commands must hold at least one command")
    asked: list[tuple] = []
    for index, command in enumerate(commands):
        where = f"commands[{index}]"
        if not isinstance(command, str):
            asked.append(("argv", _argv(command, where)))
        elif command.startswith("-"):  # one meaning for a command list: the CLI would read it as an option
            raise ValueError(f"{where} starts with '-', which bench reads as an option: give it as an argv list")
        else:
            asked.append(("shell", as_text(command, where)))
    return asked


def _step(step, key: str) -> tuple:
    """A ``prepare``/``setup``/``conclude``/``cleanup`` keyword: an argv list, or a string read
    as the flag's text is (a JSON argv, else a shell command)."""
    if isinstance(step, str):
        return argvs.step_value(as_text(step, key), f"{key}=")
    return ("argv", _argv(step, key))


def _sent(request: Benchmark, outputs_through: bool) -> tuple[Connection, int, socket.socket]:
    """``request`` sent to this process's runner service with a connection of its own, on which
    the bench process answers; the caller's stdout and stderr beside it (as they are now,
    /dev/null for one that is closed) when the commands' output goes through to them. The
    service's connection and the request's id come back with it, its box still open."""
    from . import shared
    from .launch import _standard_streams

    stdio, opened = _standard_streams() if outputs_through else ([], [])
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection, rid = shared.send("bench", request, len(stdio[1:]), fds=[theirs.fileno(), *stdio[1:]])
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
        for fd in opened:
            os.close(fd)
    return connection, rid, mine


def _answered(sock: socket.socket, connection: Connection, rid: int) -> BenchResult:
    """The bench process's one frame as the call's result, or its failure raised: a stop by
    Ctrl-C as KeyboardInterrupt, any other stop signal as ``Failure`` 107, as the CLI exits."""
    from .dask_task import one_reply  # a Dask task's: stopped once Dask lets it go

    with sock:
        reply = one_reply(sock, "the benchmark's", connection, rid)
    if reply[0] == "result":
        return reply[2]
    if reply[0] == "stopped":
        if reply[2] == "ctrl_c":
            raise KeyboardInterrupt
        raise Failure(Kind.CANCELLED, reply[3])
    if reply[0] == "failure":
        kind = reply[2] if isinstance(reply[2], Kind) else kind_labelled(reply[2], reply[4])
        raise Failure(kind, reply[3], code=reply[4])
    raise internal_failure(reply[2])


def _listed(value, key: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{key} must be a list, not {type(value).__name__}")
    return list(value)


def _argv(value, where: str) -> tuple[str, ...]:
    """An argv: a non-empty list, each item checked by the text rule (``as_text``: an undecodable
    byte of bytes or a path stays the OS's character)."""
    items = _listed(value, where)
    if not items:
        raise ValueError(f"{where} must name a program to run")
    return tuple(as_text(item, f"{where}[{index}]") for index, item in enumerate(items))


def _parameters(parameters) -> list[tuple[str, list[str]]]:
    """hyperfine's ``-L NAME VALUES`` for each name -> values, each value as text."""
    if parameters is None:
        return []
    if not isinstance(parameters, dict):
        raise TypeError(f"parameters must be a dict of name -> values, not {type(parameters).__name__}")
    found = []
    for name, listed in parameters.items():
        key = as_text(name, "each parameters key")
        texts = []
        for index, value in enumerate(_listed(listed, f"parameters[{key!r}]")):
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise TypeError(
                    f"parameters[{key!r}][{index}] must be a string or a number, not {type(value).__name__}"
                )
            texts.append(as_text(str(value), f"parameters[{key!r}][{index}]"))
        found.append((key, texts))
    return found
