"""``batch``'s flags for the peers' habits, kept beside the command (``cli/batch.py``): GNU
parallel's command templates (``--id``, ``--dry-run``, the job keys), make's graph and
nextest's groups (``--group-limit``), and what CI asks (``--junit``, ``--retry-delay``,
``--partition``; the peers' own flags, refused with a pointer, are ``batch_peers``'). ``add_flags`` declares them; ``jobs`` reads a template's jobs or a manifest's
and applies the share and the graph's checks; ``settle`` sets what they give the batch's
``Settings`` (``batch_reports``: the trace and JUnit, checked first, written at the end); ``read_manifest``
opens the manifest (a file, a pipe, stdin) checked whole and held open while its jobs are read again.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

from ..diagnostics import say
from ..errors import Failure, Kind, usage
from ..grammar import values
from ..text import cut
from .parsing import Once, OnceFlag, OncePath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

MAX_GROUP_LIMIT = 4096
DRY_RUN_BLOCK = 1 << 16  # --dry-run writes its lines this much at a time
SLOW_AFTER_MS = 60_000  # nextest's slow-timeout period: a job running on is said once each


def add_flags(parser) -> None:
    parser.add_argument(
        "--group-limit",
        action="append",
        default=[],
        metavar="NAME=N",
        help="at most N jobs of the manifest's group NAME at once, whatever --jobs allows (default: no limit)",
    )
    parser.add_argument(
        "--junit", action=OncePath, metavar="FILE", help="write the batch as JUnit XML, as CI servers read it"
    )
    parser.add_argument(
        "--slow-after",
        action=Once,
        metavar="DUR",
        help="say 'batch: SLOW [> TIME] ID' on stderr as a job runs past each DUR (looked at once a second), "
        "as nextest's slow-timeout; 0: never (default: 60s)",
    )
    parser.add_argument(
        "--retry-delay",
        action=Once,
        metavar="DUR|exp:DUR",
        help="pause before each retry, or exp:DUR doubling from DUR on each one (default: none)",
    )
    parser.add_argument(
        "--partition",
        action=Once,
        metavar="[count:|hash:]K/N",
        help="run only share K of N: every N-th job (count), or by a digest of each id (hash) (default: all)",
    )
    template = parser.add_argument_group("command templates (after --; each becomes every job's manifest key)")
    template.add_argument(
        "--id",
        action=Once,
        metavar="TEMPLATE",
        help="each job's id, with replacement strings, made safe and unique (default: the job's arguments)",
    )
    template.add_argument(
        "--dry-run",
        action=OnceFlag,
        help="print the manifest the template expands to (--partition's share of it), one job a line; run nothing",
    )
    from ..batching.template_flags import JOB_KEY_OPTIONS

    for option in JOB_KEY_OPTIONS:
        words = (option.help or "").replace("; needs --capture-dir", "")  # a job always has its capture
        if option.kind == "switch":
            template.add_argument(option.flag, action=OnceFlag, help=words)
        elif option.kind == "repeat":
            template.add_argument(option.flag, action="append", default=[], metavar=option.metavar, help=words)
        else:  # the choices shown as run's --help shows them, checked by the job's grammar
            shown = option.metavar or ("{" + ",".join(option.choices) + "}" if option.choices else None)
            template.add_argument(option.flag, action=Once, metavar=shown, help=words)


def jobs(args, words: list[str] | None, timeout, read_manifest: Callable[[str], Collection]) -> Collection | None:
    """The batch's jobs: the template's (None after ``--dry-run`` printed them) or the
    manifest's, cut to ``--partition``'s share, their graph checked (a usage Failure before
    anything is made)."""
    from ..batching.graph import check, has_needs

    if words is not None:
        from ..batching.template_flags import job_keys, template_jobs

        keys = job_keys(args, timeout)
        if args.dry_run:  # what would run: --partition's share alone
            from ..batching.ci import parse_partition

            _dry_run(words, args.id, keys, None if args.partition is None else parse_partition(args.partition))
            return None
        # Made as the arguments come, unless a flag needs every job before the first starts.
        whole = args.history or args.memory_budget or args.group_limit or args.partition or args.dask_scheduler
        found: Collection = template_jobs(words, args.id, keys, whole=bool(whole))
    else:
        from ..batching.template_flags import refuse_template_flags

        refuse_template_flags(args)
        found = read_manifest(args.manifest)
    graphed = has_needs(found)
    if graphed:  # held whole from here (the schedule holds a graph's jobs): read once, not per pass
        found = list(found)
        check(found)
    if args.dask_scheduler is not None and (graphed or args.group_limit):
        raise usage("needs and --group-limit order one machine's jobs: they cannot be used with --dask-scheduler")
    if args.partition is not None:
        from ..batching.ci import parse_partition

        if graphed:
            raise usage("--partition cannot split a job graph: a need would be on another machine")
        found = parse_partition(args.partition).share(list(found))
    return found


def nothing_to_run(args, words: list[str] | None) -> str:
    """What a batch with no job says: a template's user gave no inputs (no source after the
    command, so stdin's lines, and stdin had none; or sources that gave no line), not a manifest."""
    if args.partition is not None:
        return f"share {args.partition} holds no job"
    if words is None:
        return "no jobs in the manifest"
    from ..batching.template import SEPARATORS

    if any(word in SEPARATORS for word in words):
        return "no inputs: a :::: source gave no lines, so no job was made"
    return "no inputs: no ::: or :::: source and no lines on stdin (give arguments after :::, or pipe them in)"


def settle(args, settings, took: dict[str, float] | None) -> None:
    """What the flags give the batch's settings (``--history``'s times are used only by a job
    graph, which the batch itself knows: ``run_batch``)."""
    settings.group_limits = _group_limits(args.group_limit)
    if args.retry_delay is not None:
        from ..batching.ci import parse_retry_delay

        settings.retry_delay = parse_retry_delay(args.retry_delay)
    settings.took = took


def slow_after_ms(args) -> int:
    """``--slow-after``'s period in milliseconds (0: no SLOW line), nextest's 60 s by default."""
    if args.slow_after is None:
        return SLOW_AFTER_MS
    return values.parse_duration_ms(args.slow_after, "--slow-after <DUR>", positive=False)


def check_early(args, out: str) -> None:
    """The values checked before any job is read (a bad one is 100 with nothing read), the
    host's ``/proc`` where the jobs run here (102), and the reports' places (111)."""
    _group_limits(args.group_limit)
    slow_after_ms(args)
    if args.retry_delay is not None:
        from ..batching.ci import parse_retry_delay

        parse_retry_delay(args.retry_delay)
    if args.partition is not None:
        from ..batching.ci import parse_partition

        parse_partition(args.partition)
    if not args.dry_run and args.dask_scheduler is None:  # jobs run here: a /proc of their namespace
        from ..mountinfo import refuse_foreign_proc

        refuse_foreign_proc()
    if not args.dry_run:
        from .batch_reports import check_reports

        check_reports(args, out)


def _group_limits(given: list[str]) -> dict[str, int]:
    """``--group-limit NAME=N``, each NAME once."""
    from ..batching.manifest import JOB_ID

    limits: dict[str, int] = {}
    for text in given:
        name, equals, count = text.partition("=")
        if not equals or not JOB_ID.fullmatch(name):
            raise usage(f"invalid value '{cut(text)}' for '--group-limit <NAME=N>': expected a group name, =, a count")
        if name in limits:
            raise usage(f"--group-limit names the group {name} twice")
        limits[name] = values.parse_count(count, "--group-limit <NAME=N>", low=1, high=MAX_GROUP_LIMIT)
    return limits


def _dry_run(words: list[str], id_template: str | None, keys: dict, share) -> None:
    """The manifest the template expands to on stdout (``share``: ``--partition``'s lines of it),
    each line checked as the batch would (a bad one ends it, 100); nothing is made, nothing runs."""
    from ..batching.template_flags import manifest_lines
    from . import output

    block = bytearray()
    for line in manifest_lines(words, id_template, keys, share):
        block += line
        if len(block) >= DRY_RUN_BLOCK:
            output.raw(bytes(block))  # every byte, on a non-blocking pipe too; a reader gone ends it (141)
            block.clear()
    output.raw(bytes(block))


@contextlib.contextmanager
def read_manifest(path: str):
    """The manifest, from stdin (``-``) or the file or pipe named (``bounded.MANIFEST``),
    checked whole, and open while the batch reads its jobs again as they start."""
    from ..bounded import MANIFEST, InputError, WrongKind
    from ..userfiles import open_judged
    from ..batching.manifest import read
    from ..batching.piped import in_order
    from ..engine.stop_raise import stops_raise

    handle: contextlib.AbstractContextManager
    if path == "-":
        handle, path = contextlib.nullcontext(sys.stdin.buffer), "stdin"
    else:
        try:
            handle = os.fdopen(in_order(open_judged(path, MANIFEST)), "rb")
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot read the manifest {path}: {exc.strerror}") from None
        except WrongKind as exc:
            raise Failure(Kind.SETUP, str(exc)) from None
        except InputError as exc:  # over its total by its size alone
            raise usage(str(exc)) from None
    with handle as stream:
        try:
            with _no_collection(), stops_raise():  # a stop while its writer is slow: the batch's stop
                manifest = read(stream, path)
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot read the manifest {path}: {exc.strerror}") from None
        try:
            yield manifest
        finally:
            manifest.close()


@contextlib.contextmanager
def _no_collection():
    """The cyclic collector paused while a manifest is parsed: a million lines make millions of
    long-lived, acyclic objects, which it would walk again and again for nothing."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def stopped_waiting(stop, invocation) -> int:
    """A stop while an input (or a Dask scheduler) was awaited, before any job: a batch's stop all
    the same (107, or death by SIGINT for Ctrl-C), said as its closing line says one; no job's
    line is in ``--out`` yet. Its line waits at most ``OWN_STALL_SECONDS`` for a stderr whose
    reader takes nothing, as a batch's lines after a stop are bounded: it once waited for ever."""
    from ..writeall import doubt

    with contextlib.suppress(OSError):  # a closed stderr: nothing of ours goes there
        found = os.fstat(2)
        doubt((found.st_dev, found.st_ino))
    sentence = stop.sentence()
    if stop.source == "ctrl_c":
        from .commands import DIE_BY_SIGINT

        if invocation.error_format != "json":
            say(sys.stderr, f"batch: {sentence}\n")
        return DIE_BY_SIGINT
    if invocation.error_format == "json":
        return invocation.fail(Failure(Kind.CANCELLED, sentence))
    say(sys.stderr, f"batch: {sentence}\n")
    return Kind.CANCELLED.code
