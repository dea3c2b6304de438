"""``processkit-cli batch``: a manifest of jobs run by this one process, each a full run.

The manifest is read and checked whole first (a bad line is a usage error naming it, before
anything starts), and read again as the jobs start (``batching.manifest.Manifest``, so the
batch's memory does not grow with it); the jobs run side by side on one loop (``batching.on_host``), or on a
Dask cluster's workers (``batching.fleet``). The terminal gets one line per finished job, or a
progress bar with counts and an ETA when stderr is a terminal; with ``--show-output`` a job's
captured output follows its line, as one block. Under ``--error-format json`` stderr gets none
of it: a failed or cancelled batch's envelope alone.
"""

from __future__ import annotations

import contextlib
import sys
import time

from ..diagnostics import say
from .parsing import Once, OnceFlag, OncePath, Parser
from ..errors import Failure, Kind, usage
from ..grammar import values
from ..text import cut
from ..batching.failures import CLI_SHELL_WAY, MANIFEST_SHELL_WAY


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli batch",
        usage="processkit-cli batch <MANIFEST> [-j|--jobs N] [--out DIR] [--retries N] [--halt-on-failure] "
        "[--resume] [--show-output] [--keep all|failed] [--timeout DUR|P%%] [--memory-budget SIZE] [--history FILE] [--trace FILE] "
        "[--dask-scheduler ADDRESS] [--group-limit NAME=N]... [--junit FILE] [--retry-delay DUR|exp:DUR] "
        "[--partition [count:|hash:]K/N] [--slow-after DUR]\n       processkit-cli batch [OPTIONS] [--id TEMPLATE] [--dry-run] -- CMD [ARG]... "
        "[::: ARGS | :::: FILES | :::+ ARGS | ::::+ FILES]...",
        description='Run a JSONL manifest of jobs (one {"args": [...], "id": ..., ...} a line), each as a full run; '
        "or a command template after -- run once per argument (GNU parallel's sources and replacement strings "
        "{} {.} {/} {//} {/.} {#} {%} {1}..., put into argv elements, never through a shell).",
    )
    parser.add_argument(
        "manifest",
        metavar="MANIFEST",
        nargs="?",
        action=OncePath,
        help="the JSONL manifest, or - for stdin (none with a template)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        action=Once,
        metavar="N",
        help="jobs run at once: N, 0 (as many as the open-file limit allows), or GNU parallel's +N, -N, "
        "P%% of the CPUs this process may use (default: the CPUs it may use)",
    )
    parser.add_argument(
        "--out",
        action=Once,  # its empty value refused by outdir's words, the API's out='' alike
        metavar="DIR",
        help="where each job's directory and summary.jsonl go (default: batch-out)",
    )
    parser.add_argument(
        "--retries",
        action=Once,
        metavar="N",
        help="N more attempts for a failed job, N+1 in all (GNU parallel's --retries counts all) (default: 0)",
    )
    parser.add_argument("--halt-on-failure", action=OnceFlag, help="start no job after the first failure")
    parser.add_argument("--resume", action=OnceFlag, help="skip the jobs an earlier summary shows exited 0")
    parser.add_argument("--show-output", action=OnceFlag, help="print each job's captured output when it ends")
    parser.add_argument(
        "--keep",
        action=Once,
        metavar="all|failed",
        help="whose stream and capture files are written into --out: every job's, or only those of the "
        "jobs that did not exit 0 (the others' summary lines keep their digests) (default: all)",
    )
    parser.add_argument(
        "--timeout",
        action=Once,
        metavar="DUR|P%",
        help="end a job (106) after DUR, or after P%% of the median duration of the jobs that exited 0 "
        "so far (once 5 have); a job's own timeout wins (default: no limit)",
    )
    parser.add_argument(
        "--memory-budget",
        action=Once,
        metavar="SIZE",
        help="start a job only while the expected peak memory of the running jobs fits in SIZE "
        "(from --history, else max_memory; docs/batch.md) (default: no budget)",
    )
    parser.add_argument(
        "--history",
        action=OncePath,
        metavar="FILE",
        help="an earlier summary.jsonl: start the jobs that took longest there first (new ones before them)",
    )
    parser.add_argument(
        "--trace",
        action=OncePath,
        metavar="FILE",
        help="write the batch as Chrome Trace Event JSON (Perfetto opens it)",
    )
    parser.add_argument(
        "--dask-scheduler", action=Once, metavar="ADDRESS", help="send the jobs to this Dask cluster's workers"
    )
    from .batch_habits import add_flags

    add_flags(parser)
    return parser


PARSERS = {"batch": build_parser}


def _keep(text: str | None) -> bool:
    if text in (None, "all", "failed"):
        return text == "failed"
    raise usage(f"invalid value '{cut(text)}' for '--keep <all|failed>': expected all or failed")


def _count(text: str | None, flag: str, default: int, low: int, high: int) -> int:
    return default if text is None else values.parse_count(text, f"{flag} <N>", low=low, high=high)


def _run(args, jobs, settings, progress):
    """The jobs run, here or on a Dask cluster (not for an empty share: nothing to send); their tally."""
    if args.dask_scheduler is not None and jobs:
        from ..batching.fleet import run_on_dask

        return run_on_dask(args.dask_scheduler, jobs, settings, on_recorded=progress.finished)[1]
    from ..fdlimit import raise_soft_limit
    from ..batching.on_host import run_batch

    raise_soft_limit()  # the jobs' children get the caller's limit back
    return run_batch(
        jobs, settings, progress.finished, collect_lines=False, on_tick=progress.tick, output=progress.output
    )[1]


def main(argv: list[str], invocation) -> int:
    from . import batch_habits, batch_peers

    args, words = batch_peers.parse(build_parser(), argv)
    from ..batching.on_host import Settings
    from ..batching.outdir import out_named
    from ..batching.limits import MAX_RETRIES, parse_budget, parse_jobs, parse_timeout

    timeout = None if args.timeout is None else parse_timeout(args.timeout)
    budget = None if args.memory_budget is None else parse_budget(args.memory_budget)
    if args.dask_scheduler is not None and (budget is not None or (timeout and timeout.percent is not None)):
        flag = "--memory-budget" if budget is not None else "--timeout P%"
        raise usage(f"{flag} decides on one machine's jobs: it cannot be used with --dask-scheduler")
    if args.dask_scheduler is not None and args.slow_after is not None and batch_habits.slow_after_ms(args):
        raise usage(
            "--slow-after watches the jobs running on this machine: with --dask-scheduler no SLOW line is said "
            "(the client does not see when a job starts on a worker; --slow-after 0 asks for none)"
        )
    settings = Settings(
        out="batch-out" if args.out is None else out_named(args.out, "--out <DIR>"),
        jobs=None if args.jobs is None else parse_jobs(args.jobs),
        retries=_count(args.retries, "--retries", 0, 0, MAX_RETRIES),
        halt_on_failure=args.halt_on_failure,
        resume=args.resume,
        timeout=timeout,
        memory_budget=budget,
        keep_failed_only=_keep(args.keep),
    )
    batch_habits.check_early(args, settings.out)
    from ..engine.stop_raise import Stopped

    with contextlib.ExitStack() as held:
        try:
            jobs = batch_habits.jobs(
                args, words, timeout, lambda path: held.enter_context(batch_habits.read_manifest(path))
            )
            return 0 if jobs is None else _batch(args, invocation, settings, jobs, words)  # None: --dry-run
        except Stopped as stop:  # a FIFO's wait for its writer, a Dask client's set-up: before their watch
            return batch_habits.stopped_waiting(stop, invocation)


def _batch(args, invocation, settings, jobs, words: list[str] | None) -> int:
    from . import batch_habits, batch_reports

    # as GNU parallel with no input: nothing to do is no failure. It still writes an empty
    # summary, page and JUnit where a CI would read what an earlier batch left there, and says
    # so on its one closing line.
    nothing = None if jobs else batch_habits.nothing_to_run(args, words)
    batch_reports.check_job_directories(args, settings.out, jobs)  # with no job too, as an unwritable report always was
    if nothing is not None and not batch_reports.leaves_reports(args, settings.out):
        if invocation.error_format != "json":
            say(sys.stderr, f"batch: {nothing}\n")  # a failed write dropped
        return 0
    took, started_ns = None, time.time_ns()  # the batch's start: its JUnit's, when no job starts
    if args.history is not None:
        from ..report.batch_model import history
        from ..batching.schedule import longest_first

        took, settings.peaks = history(args.history)
        jobs = longest_first(list(jobs), took)  # ordered: these jobs are held, not read as they start
    batch_habits.settle(args, settings, took)
    # Under --error-format json stderr carries the envelope alone: no job lines, bar or summary.
    # a template's jobs: counted from its ::: arguments, or once its pipe has ended (``Streamed.total``)
    count = None if getattr(jobs, "as_they_come", False) else len(jobs)
    total = jobs.total if count is None else (lambda: count)
    from .batch_progress import Progress

    quiet = invocation.error_format == "json"
    progress = Progress(total, settings.out, args.show_output, quiet=quiet, slow_ms=batch_habits.slow_after_ms(args))
    progress.attempts_allowed = settings.retries + 1
    from ..batching.index import PageProcess

    from ..containment.leftovers import inherited

    spare = inherited()  # before the page's process and the first job: the caller's, no job's
    page = PageProcess(settings.out)
    progress.output.route()  # every warning of the batch's takes the bar's row, on either path
    try:
        try:
            tally = _run(args, jobs, settings, progress)
        except BaseException:
            page.abandon()
            _end_escapees(args, spare)  # a batch that failed (111) left them as well
            raise
        page.draw(tally.gone)  # its process gone: every descendant left is a job's
        _end_escapees(args, spare)
        unreported, written = batch_reports.write_reports(args, settings.out, started_ns, tally.gone, tally.own)
        said = None if nothing is None else f"{nothing}; {batch_reports.emptied(args, settings.out, written)}"
        progress.end(tally, CLI_SHELL_WAY if words is not None else MANIFEST_SHELL_WAY, said)  # a shell line's way out
    finally:
        progress.abandon()  # a failure's line (said next) straight to stderr, on a row of its own
    if unreported is not None and tally.cancelled_by is None and not tally.unsuccessful:  # the last word
        return invocation.fail(unreported)
    if unreported is not None:  # a stop's exit stands, and failed jobs' 117 (it says more than 111)
        from ..diagnostics import warn

        warn(unreported.message)
    if tally.cancelled_by == "ctrl_c":  # the summary says cancelled; the shell sees SIGINT
        from .commands import DIE_BY_SIGINT

        return DIE_BY_SIGINT
    if tally.cancelled_by is not None:
        kind = Kind.CANCELLED
    elif tally.unsuccessful:
        kind = Kind.BATCH_FAILED
    else:
        return 0
    if progress.quiet:  # the summary line, as the envelope's message, and whom it counts as failed
        unsaid = "" if unreported is None else f"; {unreported.message}"  # the warning json drops
        return invocation.fail(Failure(kind, tally.sentence() + progress.failures_named() + unsaid))
    return kind.code


def _end_escapees(args, spare) -> None:
    """A job's escapee (a setsid daemon under process-group containment, a process that moved
    itself out of its cgroup v2 group), ended and said (not on Dask's workers, whose processes
    are not this one's). Its job's stream cannot list it: jobs run side by side, and nothing
    tells which one an orphan came from. Said under ``--error-format json`` too (``end_escapees``)."""
    if args.dask_scheduler is None:
        from ..containment.escaped import LEFT_EITHER, end_escapees

        end_escapees(spare, "this batch's jobs", "their job's", left=LEFT_EITHER)
