"""``processkit.run`` and ``run_async``: one runner process per call, and what it leaves behind read back.

Facts about running the runner as a child of the caller's interpreter:
- Each run is a separate ``processkit-cli run`` process. Signal handlers, the subreaper flag and
  the containment all belong to that process; the caller's interpreter gets none of them, and
  the runner gets none of the caller's descriptors beyond 0-2 (``close_fds``).
- The runner stays in the caller's process group, as a ``subprocess`` child does: a Ctrl-C on
  the caller's terminal reaches it too, and it cancels its run (107) instead of leaking it.
- Without ``echo`` the runner's stdout is /dev/null and its stderr (its diagnostics, nothing of
  the child's) goes to a file: a file never fills up and blocks the runner the way an unread
  pipe would.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from typing import BinaryIO

from ..spec import RunSpec, StdinMode
from . import options as keyword_options
from .follow import read_all
from .result import RunResult, build, captures, read_usage
from .streams import Streams

DIAGNOSTICS_LIMIT = 64 * 1024
SCRATCH_JSONL = "\0scratch"  # stands in for the scratch stream's path until the checks passed
SCRATCH_USAGE = "\0usage"  # likewise for the file the runner writes the run's whole usage to


def runner_command() -> list[str]:
    """The console script installed beside this interpreter, else ``python -m processkit``."""
    global _RUNNER
    if _RUNNER is None:
        script = os.path.join(os.path.dirname(sys.executable), "processkit-cli")
        _RUNNER = [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "processkit"]
    return _RUNNER


_RUNNER: list[str] | None = None


@dataclasses.dataclass
class Prepared:
    """A validated run that has not started: its command line, where its events go, how its
    standard streams are wired, and the scratch files this call must remove."""

    args: list[str]
    command_line: list[str]
    spec: RunSpec
    jsonl: str
    keep_jsonl: bool
    echo: bool
    stdio: Streams  # subprocess's stream keywords: what to read back, the scratch files serving them
    usage_file: str | None = None
    scratch: list[str] = dataclasses.field(default_factory=list)
    _diagnostics: BinaryIO | None = None

    def streams(self) -> dict:
        """The runner's stdin/stdout/stderr for Popen or asyncio."""
        stdin = None if self.spec.stdin is StdinMode.INHERIT else subprocess.DEVNULL
        if self.spec.inherit_stdio or self.echo:
            return {"stdin": stdin, "stdout": None, "stderr": None}
        fd, path = tempfile.mkstemp(prefix="processkit-api-", suffix=".stderr")
        self.scratch.append(path)
        self._diagnostics = os.fdopen(fd, "w+b")
        return {"stdin": stdin, "stdout": subprocess.DEVNULL, "stderr": self._diagnostics}

    def popen(self) -> subprocess.Popen:
        try:
            return subprocess.Popen(self.command_line, close_fds=True, **self.streams())
        except BaseException:
            self.cleanup()
            raise

    def finish(self, returncode: int, runner_pid: int) -> RunResult:
        """Read back what the runner left and remove this run's scratch files."""
        try:
            events = read_all(self.jsonl)
            diagnostics = self._read_diagnostics()
            usage = read_usage(self.usage_file) if self.usage_file is not None else None
            outputs = self.stdio.collect(captures(events))
        finally:
            self.cleanup()
        return build(
            self.args,
            returncode,
            self.spec.run_id,
            events,
            jsonl=self.jsonl if self.keep_jsonl else None,
            diagnostics=diagnostics,
            runner_pid=runner_pid,
            usage=usage,
            stdout=outputs["stdout"],
            stderr=outputs["stderr"],
        )

    def cleanup(self) -> None:
        if self._diagnostics is not None:
            self._diagnostics.close()
            self._diagnostics = None
        self.stdio.cleanup()
        for path in self.scratch:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.scratch.clear()

    def _read_diagnostics(self) -> str:
        if self._diagnostics is None:
            return ""
        handle = self._diagnostics
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - DIAGNOSTICS_LIMIT))
        return handle.read().decode("utf-8", "replace")


def prepare(args, options: dict, *, echo: bool, function: str) -> Prepared:
    """Check everything the caller gave (TypeError/ValueError) before any file is made."""
    command = keyword_options.command_args(args)
    if not isinstance(echo, bool):
        raise TypeError(f"echo must be True or False, not {echo!r}")
    streams = Streams(options, echo=echo)  # takes subprocess's stream keywords out of options
    jsonl = options.get("jsonl")
    extra = [] if echo or options.get("inherit_stdio") else ["--no-echo"]
    extra += ["--usage-file", SCRATCH_USAGE]
    extra += streams.flags(options)
    path = SCRATCH_JSONL if jsonl is None else os.path.abspath(keyword_options.as_text(jsonl, "jsonl"))
    argv, spec = keyword_options.runner_argv(command, options, jsonl=path, function=function, extra=extra)
    scratch: list[str] = []
    if jsonl is None:  # the runner truncates and writes the file this call owns
        path = _scratch_file(".jsonl", scratch)
        argv[argv.index(SCRATCH_JSONL)] = path
    usage_path = _scratch_file(".usage.json", scratch)
    argv[argv.index(SCRATCH_USAGE)] = usage_path
    try:
        streams.materialize(argv)
    except BaseException:
        streams.cleanup()
        for made in scratch:
            os.unlink(made)
        raise
    error_format = [] if echo or spec.inherit_stdio else ["--error-format", "json"]
    return Prepared(
        args=command,
        command_line=runner_command() + error_format + ["run"] + argv,
        spec=spec,
        jsonl=path,
        keep_jsonl=jsonl is not None,
        usage_file=usage_path,
        echo=echo,
        stdio=streams,
        scratch=scratch,
    )


def _scratch_file(suffix: str, scratch: list[str]) -> str:
    """An empty private file this call owns and removes; the runner truncates and writes it."""
    fd, path = tempfile.mkstemp(prefix="processkit-api-", suffix=suffix)
    os.close(fd)
    scratch.append(path)
    return path


def stop_runner(process: subprocess.Popen) -> None:
    """The caller is leaving (an exception, Ctrl-C): ask the runner to cancel its run, and wait
    for it, so the run's tree is torn down and nothing is left behind."""
    if process.poll() is None:
        try:
            process.terminate()
        except ProcessLookupError:
            pass
        process.wait()


def _concluded(result: RunResult, check: bool) -> RunResult:
    if check:
        result.check_returncode()
    return result


def run(args, *, check: bool = False, echo: bool = False, **options) -> RunResult:
    """Run ``args`` to completion in its own runner; see the module documentation of processkit.api."""
    prepared = prepare(args, options, echo=echo, function="run")
    process = prepared.popen()
    try:
        returncode = process.wait()
    except BaseException:
        stop_runner(process)
        prepared.cleanup()
        raise
    return _concluded(prepared.finish(returncode, process.pid), check)


async def run_async(args, *, check: bool = False, echo: bool = False, **options) -> RunResult:
    """``run`` for asyncio: the runner is awaited, not waited for; cancelling the task cancels the run."""
    import asyncio

    prepared = prepare(args, options, echo=echo, function="run_async")
    try:
        process = await asyncio.create_subprocess_exec(*prepared.command_line, close_fds=True, **prepared.streams())
    except BaseException:
        prepared.cleanup()
        raise
    try:
        returncode = await process.wait()
    except BaseException:
        if process.returncode is None:
            process.terminate()
            await asyncio.shield(process.wait())
        prepared.cleanup()
        raise
    return _concluded(prepared.finish(returncode, process.pid), check)
