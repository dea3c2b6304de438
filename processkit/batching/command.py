"""``processkit-cli batch``: a manifest of jobs run by this one process, each a full run.

The manifest is read and checked whole first (a bad line is a usage error naming it, before
anything starts); then the jobs run side by side on one loop (``carrier``). (The command lives
here, not in ``cli``, because it sits on top of the API's keyword translation, which sits on top
of ``cli``; ``cli/main.py`` names it like every command, by module.) The
terminal gets one line per finished job, or a progress bar with counts and an ETA when stderr is
a terminal; with ``--show-output`` a job's captured output follows its line, as one block.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time

from ..bounded import RUN_FILE, open_input
from ..cli.parsing import Once, OnceFlag, Parser
from ..errors import Failure, Kind, usage
from ..text import cut, sanitize

MAX_JOBS_IN_FLIGHT = 4096


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli batch",
        usage="processkit-cli batch <MANIFEST> [--jobs N] [--out DIR] [--retries N] [--halt-on-failure] "
        "[--resume] [--show-output] [--dask-scheduler ADDRESS]",
        description='Run a JSONL manifest of jobs (one {"args": [...], "id": ..., ...} a line), each as a full run.',
    )
    parser.add_argument("manifest", metavar="MANIFEST", help="the JSONL manifest, or - for stdin")
    parser.add_argument("--jobs", action=Once, metavar="N", help="jobs run at once (default: the number of CPUs)")
    parser.add_argument("--out", action=Once, metavar="DIR", help="where each job's directory and summary.jsonl go")
    parser.add_argument("--retries", action=Once, metavar="N", help="run a failed job again, up to N more times")
    parser.add_argument("--halt-on-failure", action=OnceFlag, help="start no job after the first failure")
    parser.add_argument("--resume", action=OnceFlag, help="skip the jobs an earlier summary shows exited 0")
    parser.add_argument("--show-output", action=OnceFlag, help="print each job's captured output when it ends")
    parser.add_argument(
        "--dask-scheduler", action=Once, metavar="ADDRESS", help="send the jobs to this Dask cluster's workers"
    )
    return parser


PARSERS = {"batch": build_parser}


def _count(text: str | None, flag: str, default: int, low: int, high: int) -> int:
    if text is None:
        return default
    if not (text.isdigit() and len(text) <= 7) or not low <= int(text) <= high:
        raise usage(
            f"invalid value '{cut(sanitize(text, len(text)))}' for '{flag} <N>': expected a whole number from {low} to {high}"
        )
    return int(text)


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    from .carrier import Settings

    settings = Settings(
        out=args.out if args.out is not None else "batch-out",
        jobs=None if args.jobs is None else _count(args.jobs, "--jobs", 1, 1, MAX_JOBS_IN_FLIGHT),
        retries=_count(args.retries, "--retries", 0, 0, 1000),
        halt_on_failure=args.halt_on_failure,
        resume=args.resume,
    )
    jobs = _read_manifest(args.manifest)
    progress = Progress(len(jobs), settings.out, args.show_output)
    from .index import Index

    index = Index(settings.out)  # fed as jobs end here; a Dask batch's streams are all read at the end
    try:
        if args.dask_scheduler is not None:
            from .fleet import run_on_dask

            _, tally = run_on_dask(args.dask_scheduler, jobs, settings, on_finished=progress.finished)
        else:
            from .carrier import run_batch

            _, tally = run_batch(jobs, settings, progress.finished, keep_lines=False, index=index)
    except BaseException:  # no page, and no index process left behind
        index.abandon()
        raise
    index.finish(jobs)
    progress.end(tally.line())
    if tally.cancelled_by is not None:
        return Kind.CANCELLED.code
    if tally.finished - tally.succeeded or tally.not_started:
        return Kind.BATCH_FAILED.code
    return 0


def _read_manifest(path: str) -> list:
    """The manifest's jobs, from stdin (``-``) or the file or pipe named (``bounded.MANIFEST``)."""
    from ..bounded import MANIFEST, InputError, WrongKind, blocking, open_input
    from .manifest import read

    if path == "-":
        with _no_collection():
            return read(sys.stdin.buffer, "stdin")
    try:
        handle = os.fdopen(blocking(open_input(path, MANIFEST)), "rb")
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read the manifest {sanitize(path)}: {exc.strerror}") from None
    except WrongKind as exc:
        raise Failure(Kind.SETUP, str(exc)) from None
    except InputError as exc:  # over its total by its size alone
        raise usage(str(exc)) from None
    with handle, _no_collection():
        try:
            return read(handle, path)
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot read the manifest {sanitize(path)}: {exc.strerror}") from None


@contextlib.contextmanager
def _no_collection():
    """The cyclic collector paused while a manifest is parsed: a million lines make millions of
    long-lived, acyclic objects, which it would walk again and again for nothing."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# A job ended with one of these sources never ran its child: its line says why, since no
# stream and no capture does (a timeout or a cancellation is in the stream, and needs no words).
UNSTARTED_CHILD = ("setup", "spawn_error", "container_error", "internal")
SHOW_CHUNK = 1 << 20  # --show-output copies a capture file this much at a time


class Progress:
    """The batch's terminal: a line per finished job; on a terminal, a bar redrawn below them."""

    def __init__(self, total: int, out: str, show_output: bool):
        self._total = total
        self._out = out
        self._show = show_output
        self._bar = sys.stderr.isatty()
        self._started = time.monotonic()
        self._done = 0

    def finished(self, line: dict, tally) -> None:
        self._done += 1
        code = line["exit_code"]
        state = "not started" if code is None else f"exit {code}"
        took = "" if line["duration_ms"] is None else f" in {line['duration_ms']} ms"
        tries = f", {line['attempts']} attempts" if line["attempts"] > 1 else ""
        why = f": {sanitize(line['message'])}" if line["source"] in UNSTARTED_CHILD and line["message"] else ""
        self._write(f"batch: {sanitize(line['id'])}: {state}{took}{tries}{why}", tally)
        if self._show and code is not None:
            self._print_captured(line)

    @staticmethod
    def _print_captured(line: dict) -> None:
        """The job's captured stdout then stderr, as the child wrote them, as one block: nothing
        else is written meanwhile (the batch's one thread does it), and a chunk at a time, so a
        job with no cap on its capture costs no more memory than one with."""
        out = sys.stdout.buffer
        last = b""
        for name in ("stdout", "stderr"):
            info = line["capture"].get(name)
            if isinstance(info, dict) and info.get("bytes"):
                try:
                    with os.fdopen(open_input(info["path"], RUN_FILE), "rb") as handle:
                        while chunk := handle.read(SHOW_CHUNK):
                            out.write(chunk)
                            last = chunk[-1:]
                except (OSError, ValueError):  # ValueError: bounded.InputError, not a regular file
                    continue
        if last:
            out.write(b"" if last == b"\n" else b"\n")
            out.flush()

    def _write(self, text: str, tally) -> None:
        stream = sys.stderr
        if self._bar:
            stream.write("\r\x1b[K")
        stream.write(text.rstrip("\n") + "\n")
        if self._bar:
            stream.write(self._bar_text(tally))
        stream.flush()

    def _bar_text(self, tally) -> str:
        done, total = self._done, self._total
        width = 30
        filled = width * done // total if total else width
        elapsed = time.monotonic() - self._started
        eta = elapsed / done * (total - done) if done else 0.0
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            f"ok {tally.succeeded} failed {tally.failed + tally.timed_out} ETA {eta:.0f}s"
        )

    def end(self, summary: str) -> None:
        if self._bar:
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(f"batch: {summary}\n")
        sys.stderr.flush()
