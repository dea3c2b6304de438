"""``processkit.batch``: the batch engine from Python, in a process of its own that this
process's runner service starts for the batch (``service.batch``), so the batch's signal
handlers, subreaper flag and reaping are never the caller's. This module is the caller's side
(named apart from the ``api`` package, which it uses for the service's connection)."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterable, Mapping

from ..callwarning import CallWarning
from ..refusal import refused
from ..errors import BATCH_FAILED, Failure
from .on_host import Settings
from .manifest import jobs_from
from .where import ITEM
from .outdir import out_named, prepare_out
from ..spec import callers_cwd
from ..text import plural


def _count(value: int | None, name: str, high: int) -> int | None:
    """``jobs=`` or ``retries=`` checked as the CLI's ``--jobs N`` and ``--retries N`` are (a
    Failure naming the keyword): out of range, the batch would record every job ``halted``.
    None stays None, the default (the CPUs, no retry), as it was before they were checked."""
    from ..grammar.values import parse_count

    if value is None:
        return None
    if type(value) is not int:  # no bool, no float
        raise TypeError(f"{name}= must be an int, not {type(value).__name__}")
    return parse_count(value, f"{name}=", low=0, high=high)


def _refuse_no_job_list(manifest) -> None:
    """A path (``processkit-cli batch``'s manifest file) or one job's mapping is refused as what it
    is: read as a list, a path's characters were each a bad job (``jobs[0]: ... not str``), and an
    empty path ran no job and returned ``[]``."""
    hint = ": give [job]" if isinstance(manifest, Mapping) else ""
    if isinstance(manifest, (str, bytes, os.PathLike)):
        hint = ": a manifest file is processkit-cli batch's (or json.loads each of its lines)"
    if hint or not isinstance(manifest, Iterable):
        raise TypeError(
            f"manifest must be a list of jobs (mappings shaped as manifest lines), not {type(manifest).__name__}{hint}"
        )


class BatchError(subprocess.CalledProcessError):
    """A batch run with ``check=True`` in which a job did not exit 0 (or never started):
    ``returncode`` is the CLI's 117, ``cmd`` the ids of those jobs, ``lines`` every summary line;
    its text names the first failed jobs' exits and captures' last lines, as the CLI's batch
    ends, and counts the rest."""

    def __init__(self, lines: list[dict], said: str = ""):
        failed = [line["id"] for line in lines if line["exit_code"] != 0]
        super().__init__(BATCH_FAILED, failed)
        self.lines = lines
        self.said = said  # the failed jobs' words, read from ``out`` once the batch ended

    def __reduce__(self):
        return (type(self), (self.lines, self.said))

    def __str__(self) -> str:
        head = f"{len(self.cmd)} of {plural(len(self.lines), 'job')} did not exit 0: {', '.join(self.cmd[:10])}"
        return f"{head}\n{self.said.rstrip()}" if self.said else head


class BatchWarning(CallWarning):
    """A warning the batch gave as the CLI's batch prints it on stderr (an ``out`` holding job
    directories an earlier batch wrote, a ``resume`` summary keeping jobs this list no longer
    has, a page that could not be drawn, ...): said at the caller's line once the batch is over,
    holding its summary lines (``result``; None for a batch that could not run)."""


# Where the batch's process puts its warnings in each reply it writes (``service.batch``); the
# service's own refusal to start it (``spawned.refuse``) has none.
_SAID_AT = {"lines": 3, "failure": 5, "error": 3}


def _warned(reply: tuple, lines: list[dict] | None) -> None:
    from ..api.warned import warn

    at = _SAID_AT.get(reply[0], len(reply))
    for text in reply[at] if len(reply) > at else ():
        warn(text, BatchWarning, lines)


# The summary fields a batch's caller is warned of, each once for the batch: a leak (the CLI's
# LEAK), and a leak that could not be counted (its members unread: no ``leaked`` is no word of none).
_LEAK_WARNINGS = (
    ("leaked", "left processes running when the child exited, ended by the teardown"),
    ("leaked_unknown", "could not be checked for processes left running when the child exited"),
)


def batch(
    manifest,
    /,
    *,
    out: str | bytes | os.PathLike,
    jobs: int | None = None,
    retries: int | None = 0,
    halt_on_failure: bool = False,
    resume: bool = False,
    check: bool = False,
    **unknown,
) -> list[dict]:
    """Run the jobs of ``manifest`` (mappings shaped as its lines: ``args``, an optional ``id``,
    API keywords) at most ``jobs`` at once (default: the CPUs), each a full run with its stream
    and capture under ``out``; returns the summary lines in finishing order (``summary.jsonl``).

    ``jobs`` is a count only: 0 runs as many at once as the open-file limit allows (``--jobs 0``),
    and a negative one is refused (the CLI's ``-j -1``, the CPUs less one, has no keyword form).
    ``retries`` is the further attempts a failed job gets, ``--retries N``'s: N+1 attempts in all.
    A bad job, ``jobs`` or ``retries`` or an ``out`` that cannot be used raises ValueError before anything starts, a
    batch that could not run (its open-file limit) RuntimeError; with ``check=True`` a job that did not
    exit 0 raises BatchError once the batch is over. The batch's warnings are BatchWarnings, given
    before it returns or raises. A KeyboardInterrupt stops the batch through each run's release,
    then propagates."""
    if unknown:  # Python's own TypeError, with the keyword it may have meant (as run()'s and bench()'s)
        from ..grammar.keywords import unexpected

        import inspect

        key = next(iter(unknown))
        keyword_only = inspect.Parameter.KEYWORD_ONLY
        known = [name for name, given in inspect.signature(batch).parameters.items() if given.kind is keyword_only]
        raise unexpected(key, known, "batch")
    from ..api import shared
    from ..api.dask_task import one_reply
    from ..api import caller_env
    from ..grammar.keywords import as_text

    _refuse_no_job_list(manifest)
    try:
        from .limits import MAX_JOBS_IN_FLIGHT, MAX_RETRIES

        jobs = _count(jobs, "jobs", MAX_JOBS_IN_FLIGHT)
        retries = _count(retries, "retries", MAX_RETRIES) or 0
        out = out_named(as_text(out, "out=", os_form=True), "out=")  # before the manifest, as the CLI's --out
        checked = jobs_from(manifest, ITEM, os_form=True)  # args as run's (subprocess's rule), named jobs[N]
    except Failure as failure:
        raise refused(failure.message) from None
    if not checked:
        return []
    here = callers_cwd()  # a removed one named as ``run``'s is (never a raw FileNotFoundError)
    out = os.path.join(here, os.fspath(out))
    if not here.startswith("/proc/"):  # through the /proc entry, "../o" is the kernel's to resolve
        out = os.path.normpath(out)
    try:
        prepare_out(out, "out=")  # here first, so a directory that cannot be used names the keyword
    except Failure as failure:  # the caller's argument: said as one, never the runner's Failure
        raise refused(failure.message) from None
    settings = Settings(out, jobs, retries, halt_on_failure, resume)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sent = caller_env.whole()  # the caller's environment and umask, the batch process's own
        # as every call: a spare service when re-entered (a signal handler's batch inside a call)
        connection, rid = shared.send("batch", checked, settings, here, sent, fds=[theirs.fileno()])
    except BaseException:  # the service could not start, say: neither end is left open
        mine.close()
        raise
    finally:
        theirs.close()
    try:  # the batch answers on its own connection; its box open till then, so its service is not idle
        with mine:
            reply = one_reply(mine, "the batch's", connection, rid)  # a Dask task's: stopped once Dask lets it go
    finally:
        connection.forget(rid)
    # the caller gets summary.jsonl's objects, on a warning raised as an error (-W error) too
    lines = [line.to_json() for line in reply[2]] if reply[0] == "lines" else None
    _warned(reply, lines)
    from ..api.warned import warn

    for field, words in _LEAK_WARNINGS:  # as run's LeftRunning, once for the batch (the CLI says each job's)
        named = [line["id"] for line in lines or () if line.get(field)]
        if named:
            said = f"{plural(len(named), 'job')} {words} (`{field}` in the summary)"
            warn(f"{said}: {', '.join(named[:10])}", BatchWarning, lines)
    if reply[0] == "failure":  # the batch could not run (its limit, its out= changed since)
        raise RuntimeError(f"the batch could not run: {reply[3]}")
    if lines is None:
        raise RuntimeError(f"the batch failed: {reply[2]}")
    if check and any(line["exit_code"] != 0 for line in lines):
        from .failures import API_SHELL_WAY, ENVELOPE_NAMED, NAMED_AT_THE_END, closing
        from .job_lines import outcome

        failed = [line for line in reply[2] if outcome(line) in NAMED_AT_THE_END]  # as the CLI's end names
        said = closing(failed, len(failed), out, ENVELOPE_NAMED, API_SHELL_WAY)  # a few: a traceback's text
        raise BatchError(lines, said)
    return lines
