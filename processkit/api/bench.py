"""``processkit.bench``: a benchmark run by its own ``processkit-cli bench`` process (a benchmark
owns its CPUs and memory group for its whole length, unlike a run the runner service carries),
and read back from its JSON export into typed values.

The caller's interpreter is left alone: the runs' signal handlers, the subreaper flag, the CPU
pinning and the memory group all belong to that process.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

from ..bounded import BENCH_EXPORT, load_file
from ..benchmark.result import BenchResult
from ..errors import KINDS, Failure, Kind, usage
from .launch import runner_command

DIAGNOSTICS_LIMIT = 64 * 1024


def _json_argv(value, name: str) -> str:
    if isinstance(value, str) or not value:
        raise usage(f"{name} takes an argv (a non-empty list of strings), not {value!r}")
    return json.dumps([str(item) for item in value])


def _step(value, name: str) -> str:
    """A string is a shell command (as hyperfine's), a list an argv (run shell-free)."""
    return value if isinstance(value, str) else _json_argv(value, name)


def command_line(
    commands: list,
    *,
    names: list[str] | None = None,
    parameters: dict[str, list] | None = None,
    order: str = "interleaved",
    runs: int | None = None,
    min_runs: int | None = None,
    max_runs: int | None = None,
    warmup: int | None = None,
    min_time_s: float | None = None,
    prepare: str | list[str] | None = None,
    setup: str | list[str] | None = None,
    cleanup: str | list[str] | None = None,
    conclude: str | list[str] | None = None,
    reference: str | None = None,
    reference_name: str | None = None,
    shell: str | None = None,
    output: str | None = None,
    input_file: str | None = None,
    ignore_failure: bool | list[int] = False,
    timeout_ms: int | None = None,
    cpus: list[int] | None = None,
    jsonl_dir: str | None = None,
    show_output: bool = False,
    metric: str = "wall",
    baseline: str | os.PathLike | None = None,
    fail_if_slower: float | None = None,
) -> list[str]:
    """The ``bench`` arguments for these keywords (validated by the command itself)."""
    argv: list[str] = []
    for command in commands:  # a string is one COMMAND (a shell command), in its place among the argvs
        argv += [command] if isinstance(command, str) else ["--command", _json_argv(command, "a command")]
    for name in names or ():
        argv += ["--command-name", str(name)]
    for name, values in (parameters or {}).items():
        listed = [str(value).replace("\\", "\\\\").replace(",", "\\,") for value in values]  # -L's escapes
        argv += ["--parameter-list", str(name), ",".join(listed)]
    counts = {"--runs": runs, "--min-runs": min_runs, "--max-runs": max_runs, "--warmup": warmup}
    argv += [item for flag, value in counts.items() if value is not None for item in (flag, str(value))]
    if min_time_s is not None:
        argv += ["--min-time", f"{round(min_time_s * 1000)}ms"]
    if timeout_ms is not None:
        argv += ["--timeout", f"{timeout_ms}ms"]
    steps = (("--prepare", prepare), ("--setup", setup), ("--cleanup", cleanup), ("--conclude", conclude))
    argv += [item for flag, value in steps if value is not None for item in (f"{flag}={_step(value, flag)}",)]
    named = [("--reference", reference), ("--reference-name", reference_name), ("--shell", shell), ("--output", output)]
    named.append(("--input", None if input_file is None else os.fspath(input_file)))
    argv += [f"{flag}={value}" for flag, value in named if value is not None]
    if cpus is not None:
        argv += ["--cpus", ",".join(str(cpu) for cpu in cpus)]
    if jsonl_dir is not None:
        argv += ["--jsonl-dir", os.fspath(jsonl_dir)]
    argv += ["--order", order, "--metric", metric]
    if ignore_failure is True:
        argv += ["--ignore-failure"]
    elif ignore_failure:  # the exit codes to ignore
        argv += ["--ignore-failure=" + ",".join(str(int(code)) for code in ignore_failure)]
    argv += ["--show-output"] * bool(show_output)
    if baseline is not None:  # an earlier export: the comparison is on the result (``result.baseline``)
        argv += ["--baseline", os.fspath(baseline)]
    if fail_if_slower is not None:
        argv += ["--fail-if-slower", str(fail_if_slower)]
    return argv


def bench(commands: list, **keywords) -> BenchResult:
    """Benchmark ``commands`` (each an argv list, run shell-free, or a string, a shell command
    as hyperfine runs it) and return the typed result. Keywords: ``names``, ``parameters``
    (name -> values), ``order``, ``runs``, ``min_runs``, ``max_runs``, ``warmup``,
    ``min_time_s``, ``prepare``, ``setup``, ``cleanup``, ``conclude`` (a shell string or an
    argv list), ``reference``, ``reference_name``, ``shell`` (``"none"``: no shell),
    ``output``, ``input_file``, ``ignore_failure`` (True, or the exit codes), ``timeout_ms``, ``cpus``, ``jsonl_dir``,
    ``show_output``, ``metric`` (``wall`` or ``cpu``), ``baseline`` (an earlier export:
    ``result.baseline`` compares each command with it) and ``fail_if_slower`` (a percentage: a
    significant slowdown beyond it raises ``Failure`` 119). A failed benchmark raises ``Failure``
    with the CLI's code."""
    arguments = command_line(commands, **keywords)
    fd, export = tempfile.mkstemp(prefix="processkit-bench-", suffix=".json")
    os.close(fd)
    try:
        with tempfile.TemporaryFile() as diagnostics:
            done = subprocess.run(
                [*runner_command(), "bench", "--export-json", export, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=None if keywords.get("show_output") else subprocess.DEVNULL,
                stderr=diagnostics,
                close_fds=True,
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
