"""``processkit.bench``: a benchmark run by its own ``processkit-cli bench`` process (a benchmark
owns its CPUs and memory group for its whole length, unlike a run the runner service carries),
and read back from its JSON export into typed values.

The caller's interpreter is left alone: the runs' signal handlers, the subreaper flag, the CPU
pinning and the memory group all belong to that process.

The keywords are checked here, before that process starts, by the grammars the command reads
its flags with: the measured options by ``benchmark.options``' table, every text by the run
grammar's text rule (``grammar.keywords.as_text``), and the commands expanded by
``benchmark.plan`` as the command will expand them. Units are ``processkit.run``'s: a duration
is seconds (a number) or a duration string (``"500ms"``), a count an int. A bad value is a
ValueError naming the keyword (``'runs=' ...``), a value of the wrong type or an unknown keyword
a TypeError. The checked values become that process's command line, its only use; its
environment says the API started it (``benchmark.options.CALLER_NAMING``), so what it finds
while it runs (too few runs, a ``jsonl_dir`` it cannot make) names the keyword too.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import tempfile
import warnings

from ..benchmark import argvs
from ..benchmark import options as measured_options
from ..benchmark.plan import DEFAULT_SHELL, Auxiliary, expand
from ..benchmark.result import BenchResult
from ..bounded import BENCH_EXPORT, load_file
from ..errors import KINDS, Failure, Kind
from ..grammar.keywords import as_text
from ..grammar import KEYWORDS, REPEAT
from .launch import runner_command

DIAGNOSTICS_LIMIT = 64 * 1024
FUNCTION = "processkit.bench"
# Old keyword -> (its replacement, how an old value is written as the new one).
DEPRECATED = {
    "timeout_ms": ("timeout", lambda value: f"{value}ms" if isinstance(value, int) else value / 1000),
    "min_time_s": ("min_time", lambda value: value),
}
# What each measured keyword takes, for the TypeError of any other type (bool is no number here).
TAKES = {
    "runs": ((int, str), "an int"),
    "min_runs": ((int, str), "an int"),
    "max_runs": ((int, str), "an int"),
    "warmup": ((int, str), "an int"),
    "min_time": ((int, float, str), "a number of seconds or a duration string such as '500ms'"),
    "timeout": ((int, float, str), "a number of seconds or a duration string such as '500ms'"),
    "order": ((str,), "'interleaved' or 'sequential'"),
    "metric": ((str,), "'wall' or 'cpu'"),
    "cpus": ((list, tuple, str), "a list of CPU numbers"),
    "ignore_failure": ((bool, list, tuple), "True, or a list of exit codes"),
    "fail_if_slower": ((int, float), "a percentage"),
    "input_file": ((str, bytes, os.PathLike), "a string or a path"),
    "output": ((str, bytes, os.PathLike), "'null', 'pipe', 'inherit' or a file's path"),
}


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
    arguments = command_line(commands, given)
    fd, export = tempfile.mkstemp(prefix="processkit-bench-", suffix=".json")
    os.close(fd)
    try:
        with tempfile.TemporaryFile() as diagnostics:
            done = subprocess.run(
                [*runner_command(), "bench", "--export-json", export, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=None if show_output else subprocess.DEVNULL,
                stderr=diagnostics,
                close_fds=True,
                env={**os.environ, measured_options.CALLER_NAMING: "keywords"},  # its failures name keywords
            )
            diagnostics.seek(max(0, os.fstat(diagnostics.fileno()).st_size - DIAGNOSTICS_LIMIT))
            message = diagnostics.read().decode("utf-8", "replace").strip()
        if done.returncode != 0:
            kind = next((k for k in KINDS if k.code == done.returncode), Kind.INTERNAL)
            lines = [line for line in message.splitlines() if line.startswith("processkit-cli: ")]
            said = lines[0] if lines else message or f"processkit-cli bench exited {done.returncode}"
            raise Failure(kind, said.removeprefix("processkit-cli: "), code=done.returncode)
        return BenchResult.from_json(load_file(export, BENCH_EXPORT))
    finally:
        os.unlink(export)


def _renamed(key: str, value, given: dict) -> dict:
    """An old keyword's value under its new name, with a DeprecationWarning; any other unknown
    keyword is a TypeError naming it (and the keyword it may have meant)."""
    if key not in DEPRECATED:
        near = difflib.get_close_matches(key, [*given, "commands"], n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise TypeError(f"{FUNCTION}() got an unexpected keyword argument '{key}'{hint}")
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


def command_line(commands: list, given: dict) -> list[str]:
    """The ``bench`` arguments for ``commands`` and the ``given`` keywords, every one checked."""
    try:
        return _arguments(commands, given)
    except Failure as failure:  # a usage error, naming the keyword
        raise ValueError(failure.message) from None


def _arguments(commands: list, given: dict) -> list[str]:
    if isinstance(commands, (str, bytes)) or not isinstance(commands, (list, tuple)):
        raise TypeError(f"commands must be a list (of shell strings or argv lists), not {type(commands).__name__}")
    if not commands:
        raise ValueError("commands must hold at least one command")
    argv: list[str] = []
    planned: list = []  # each command as plan.expand takes it
    for index, command in enumerate(commands):  # a string is one COMMAND, in its place among the argvs
        where = f"commands[{index}]"
        if isinstance(command, str):
            if command.startswith("-"):  # the bench command line takes a COMMAND so written for an option
                raise ValueError(f"{where} starts with '-', which bench reads as an option: give it as an argv list")
            planned.append(("shell", as_text(command, where)))
            argv.append(planned[-1][1])
        else:
            planned.append(("argv", _argv(command, where)))
            argv += ["--command", json.dumps(planned[-1][1], ensure_ascii=False)]  # a byte stays as it is
    names = [as_text(name, f"names[{index}]") for index, name in enumerate(_listed(given["names"], "names"))]
    argv += [item for name in names for item in ("--command-name", name)]
    parameters = _parameters(given["parameters"])
    for name, listed in parameters:  # -L's escapes
        argv += ["--parameter-list", name, ",".join(t.replace("\\", "\\\\").replace(",", "\\,") for t in listed)]
    present = [
        dest for dest, option in measured_options.BY_DEST.items() if given.get(option.keyword) not in (None, False)
    ]
    measured_options.check_given(present, KEYWORDS)
    typed = measured_options.read(_measured(given), KEYWORDS)
    counts = {"--runs": "runs", "--min-runs": "min_runs", "--max-runs": "max_runs", "--warmup": "warmup"}
    argv += [item for flag, key in counts.items() if key in typed for item in (flag, str(typed[key]))]
    argv += [item for key in ("min_time", "timeout") if key in typed for item in (_flag(key), f"{typed[key]}ms")]
    argv += ["--order", typed["order"], "--metric", typed["metric"]]
    if "cpus" in typed:
        argv += ["--cpus", ",".join(str(cpu) for cpu in typed["cpus"])]
    ignored = typed.get("ignore_failure", False)
    if ignored is not False:
        argv += ["--ignore-failure" if ignored is True else "--ignore-failure=" + ",".join(map(str, ignored))]
    if "fail_if_slower" in typed:
        argv += ["--fail-if-slower", repr(typed["fail_if_slower"])]
    steps = {}
    for key in ("prepare", "setup", "cleanup", "conclude"):  # a shell string (or a JSON argv's text), or an argv
        step = given[key]
        if step is not None:
            text = as_text(step, key) if isinstance(step, str) else json.dumps(_argv(step, key), ensure_ascii=False)
            steps[key] = argvs.step_value(text, f"{key}=")
            argv.append(f"{_flag(key)}={text}")
    named = ("reference", "reference_name", "shell", "output", "input_file", "jsonl_dir", "baseline")
    texts = {key: as_text(given[key], key) for key in named if given[key] is not None}
    flags = {"input_file": "--input"}
    argv += [f"{flags.get(key, _flag(key))}={text}" for key, text in texts.items()]
    if not isinstance(given["show_output"], bool):
        raise TypeError(f"show_output must be True or False, not {given['show_output']!r}")
    _expand_here(planned, names, parameters, texts, steps, typed)
    return argv + ["--show-output"] * given["show_output"]


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _expand_here(planned: list, names: list, parameters: list, texts: dict, steps: dict, typed: dict) -> None:
    """The commands expanded in this process as the bench process will expand them, so a
    ``names``, ``prepare`` or ``parameters`` that does not fit the commands is refused here,
    naming the keyword, before that process starts."""
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
    expand(planned, names, parameters, shell=shell, reference=reference, auxiliary=auxiliary, named=named)


def _measured(given: dict) -> dict:
    """The table's keywords by dest, each of a type its grammar reads (else a TypeError naming
    it), a text by the text rule; the one ``output`` stands for every command's."""
    found: dict[str, object] = {}
    for dest, option in measured_options.MEASURED.items():
        key = option.keyword
        value = given[key]
        if value is None or (key == "ignore_failure" and value is False):
            continue
        types, wanted = TAKES[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise TypeError(f"{key} must be {wanted}, not {type(value).__name__}")
        if isinstance(value, (list, tuple)) and any(
            isinstance(item, bool) or not isinstance(item, int) for item in value
        ):
            raise TypeError(f"each item of {key} must be an int")
        if key in ("input_file", "output"):
            value = as_text(value, key)
        found[dest] = [value] if option.kind == REPEAT else value
    return found


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
