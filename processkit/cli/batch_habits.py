"""``batch``'s flags for the peers' habits, kept beside the command (``cli/batch.py``): GNU
parallel's command templates (``--id``, ``--dry-run``, the job keys), make's graph and
nextest's groups (``--group-limit``), and what CI asks (``--junit``, ``--retry-delay``,
``--partition``). ``add_flags`` declares them; ``jobs`` reads a template's jobs or a manifest's
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
from ..engine.endings import stop_named
from ..errors import Failure, Kind, usage
from ..grammar import values
from ..text import sanitize
from .parsing import Once, OnceFlag, OncePath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

MAX_GROUP_LIMIT = 4096
DRY_RUN_BLOCK = 1 << 16  # --dry-run writes its lines this much at a time
# The peers' flags a batch user types from habit, and what stands for each here: one line that
# points the way, instead of argparse's "unrecognized arguments" and the usage.
# GNU parallel's short flags that take a value (its getopt spec, bundling): in a bundle the rest
# is that value (``-dk`` is ``-d k``, ``-Sworker1`` is ``-S worker1``), never more flags.
PARALLELS_VALUED = frozenset("aBCdeEHiIjJLnNPsSUW")
MAKES_J = "make's -j alone, no limit, is -j 0: as many as the open-file limit allows"
PEERS_FLAGS = {
    "--halt": "GNU parallel's; here it is --halt-on-failure (the running jobs finish; for parallel's --halt now,fail=1, send the batch SIGTERM)",
    "--joblog": "GNU parallel's; here every job's line is in OUT/summary.jsonl (--out)",
    "--results": "GNU parallel's; here each job's output is kept in OUT/ID/capture/ (--out)",
    "--keep-order": "GNU parallel's; here --show-output prints each job's output whole, in finishing order",
    "-k": "GNU parallel's --keep-order or make's --keep-going; here --show-output prints each job's "
    "output whole, in finishing order, and every job runs after a failure by default",
    "--fail-fast": "nextest's; here it is --halt-on-failure",
    "--no-fail-fast": "nextest's; here it is the default (every job runs after a failure)",
    "--keep-going": "make's; here it is the default (every job runs after a failure)",
    "--tag": "GNU parallel's; here --show-output prints each job's output whole under a '==> ID (exit N) <==' header",
    "--line-buffer": "GNU parallel's; here --show-output prints each job's output whole as it ends, "
    "and OUT/ID/capture/ holds each job's lines apart",
    "--group": "GNU parallel's; here it is --show-output (each job's output whole as it ends); "
    "a manifest's groups are limited with --group-limit NAME=N",
    "--ungroup": "GNU parallel's; here --show-output prints each job's output whole as it ends",
    "--bar": "GNU parallel's; here the progress bar is drawn whenever stderr is a terminal",
    "--eta": "GNU parallel's; here the progress bar, with its ETA, is drawn whenever stderr is a terminal",
    "--progress": "GNU parallel's; here the progress bar is drawn whenever stderr is a terminal",
    "--max-procs": "GNU parallel's and xargs'; here it is -j/--jobs",
    "-P": "GNU parallel's and xargs' --max-procs; here it is -j/--jobs",
    "--test-threads": "nextest's; here it is -j/--jobs",
    "--failure-output": "nextest's; here each failed job is named at the end with its last lines "
    "(its whole output: --show-output, or OUT/ID/capture/)",
    "--success-output": "nextest's; here --show-output prints every job's output as it ends",
    "--final-status-level": "nextest's; here each failed job is named at the end with its last lines, "
    "and every job's line is written as it ends",
    "--null": "GNU parallel's and xargs'; here an argument is a line (of a :::: file, of stdin), and a NUL is refused",
    "-0": "GNU parallel's and xargs' --null; here an argument is a line (of a :::: file, of stdin), and a NUL is refused",
    "--will-cite": "GNU parallel's; nothing here asks to be cited: drop it",
    "--colsep": "GNU parallel's; here a line is one argument: give each column as a file, linked with ::::+",
    "--arg-file": "GNU parallel's and xargs'; here it is :::: FILE",
    "-a": "GNU parallel's and xargs' --arg-file; here it is :::: FILE",
    "-q": "GNU parallel's --quote; here no shell runs a job, so an argument is never split: nothing to quote",
}


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
        "--dry-run", action=OnceFlag, help="print the manifest the template expands to, one job a line; run nothing"
    )
    from ..batching.template_flags import JOB_KEY_OPTIONS

    for option in JOB_KEY_OPTIONS:
        words = (option.help or "").replace("; needs --capture-dir", "")  # a job always has its capture
        if option.kind == "switch":
            template.add_argument(option.flag, action=OnceFlag, help=words)
        elif option.kind == "repeat":
            template.add_argument(option.flag, action="append", default=[], metavar=option.metavar, help=words)
        else:
            template.add_argument(option.flag, action=Once, metavar=option.metavar, help=words)


def parse(parser, argv: list[str]):
    """The flags before ``--``, and the command template after it (None: a MANIFEST is named).
    A peer's habit is pointed out only where argparse refused the line: a line that parses (a
    flag's value ``-P dir`` or ``:::``) is never refused for looking like one."""
    from .options import split_command

    argv, words = split_command(argv)
    try:
        args = parser.parse(argv)
    except Failure:
        pointer = _pointer(parser, argv, words)
        if pointer is None:
            raise
        raise usage(pointer) from None
    if args.manifest in PEERS_FLAGS:  # ``-0``: a negative number to argparse, so the MANIFEST
        raise usage(f"{args.manifest} is {PEERS_FLAGS[args.manifest]}")
    if words is not None and args.manifest is not None:
        raise usage("give a MANIFEST or a command template after --, not both")
    if words is None and args.manifest is None:
        took = _jobs_flag(argv, args.jobs)
        if took is not None and not _jobs_form(args.jobs):  # make's ``-j m.jsonl``: the manifest taken for a count
            raise usage(f"{took} took '{sanitize(args.jobs)}' as its count, leaving no MANIFEST ({MAKES_J})")
        raise usage("a MANIFEST (- for stdin) or a command template after -- is required")
    return args, words


def _pointer(parser, argv: list[str], words: list[str] | None) -> str | None:
    """What a line argparse refused meant by a peer's habit, read from its flags (the values
    of ours skipped): a peer's flag, a template with no ``--``, make's ``-j`` with no count."""
    from ..batching.template import SEPARATORS

    flags = list(_flag_words(parser, argv))
    for at, word in flags:
        flag = _peers_flag(parser, word)
        if flag is not None:  # a template's ::: after it, with no --: the flag may be the command's
            hint = any(later in SEPARATORS for later in argv[at + 1 :])
            mistake = f" (if {flag} is your command's, put -- before the command)" if hint else ""
            return f"{flag} is {PEERS_FLAGS[flag]}{mistake}"
    source = next((word for _, word in flags if word in SEPARATORS), None)
    if words is None and source is not None:  # ``batch echo {} ::: a b``, as GNU parallel takes it
        return (
            f"{source} follows a command template, which goes after --: processkit-cli batch [OPTIONS] -- CMD "
            f"[ARG]... {source} ... (GNU parallel takes the command without --; here its first word is the MANIFEST)"
        )
    for at, word in flags:
        if word in ("-j", "--jobs") and (at + 1 == len(argv) or _a_flag(argv[at + 1])):
            return f"{word} needs a count here ({MAKES_J})"
    return None


def _flag_words(parser, argv: list[str]):
    """``(index, word)`` of each word argparse reads as a flag or a positional, not the value a
    flag of ours takes (``--id '-P {}'``, ``--out :::``): the next word, unless it is a flag."""
    value_next = False
    for at, word in enumerate(argv):
        if value_next and not _a_flag(word):
            value_next = False
            continue
        value_next = parser.takes_value(word)
        yield at, word


def _a_flag(word: str) -> bool:
    """Whether argparse reads ``word`` as a flag, not a value: a dash and more, no space, no
    negative number."""
    return word[:1] == "-" and len(word) > 1 and " " not in word and not word[1:2].isdigit()


def _jobs_flag(argv: list[str], count: str | None) -> str | None:
    """The ``-j``/``--jobs`` that took ``count`` (``-j m.jsonl``, ``--jobs=m.jsonl``, ``-jm.jsonl``)."""
    for word, after in zip(argv, [*argv[1:], None]):
        flag, equals, value = word.partition("=")
        if flag in ("-j", "--jobs") and (value if equals else after) == count:
            return flag
        if word.startswith("-j") and word[2:] == count:
            return "-j"
    return None


def _jobs_form(text: str) -> bool:
    from ..batching.limits import parse_jobs

    try:
        parse_jobs(text)
    except Failure:
        return False
    return True


def _peers_flag(parser, word: str) -> str | None:
    """The peer's flag ``word`` is (``--halt=soon,fail=1``'s ``--halt``) or holds among short flags
    bundled as getopt reads them (``-kj2``: ``-k``, then ``-j2``), letter by letter up to one of
    ours (``parser.takes_value``) or parallel's that takes a value (the rest is that value:
    ``-j2k`` is ``-j 2k``, ``-dk`` is ``-d k``)."""
    flag = word.partition("=")[0]
    if flag in PEERS_FLAGS:
        return flag
    if word[:1] != "-" or word[1:2] in ("", "-"):
        return None
    for letter in word[1:]:
        short = "-" + letter
        if short in PEERS_FLAGS:
            return short
        if not letter.isalpha() or letter in PARALLELS_VALUED or parser.takes_value(short):
            return None
    return None


def jobs(args, words: list[str] | None, timeout, read_manifest: Callable[[str], Collection]) -> Collection | None:
    """The batch's jobs: the template's (None after ``--dry-run`` printed them) or the
    manifest's, cut to ``--partition``'s share, their graph checked (a usage Failure before
    anything is made)."""
    from ..batching.graph import check, has_needs

    if words is not None:
        from ..batching.template_flags import job_keys, template_jobs

        keys = job_keys(args, timeout)
        if args.dry_run:
            _dry_run(words, args.id, keys)
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


def check_early(args, out: str) -> None:
    """The values checked before any job is read (a bad one is 100 with nothing read), the
    host's ``/proc`` where the jobs run here (102), and the reports' places (111)."""
    _group_limits(args.group_limit)
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
            raise usage(
                f"invalid value '{sanitize(text)}' for '--group-limit <NAME=N>': expected a group name, =, a count"
            )
        if name in limits:
            raise usage(f"--group-limit names the group {name} twice")
        limits[name] = values.parse_count(count, "--group-limit <NAME=N>", low=1, high=MAX_GROUP_LIMIT)
    return limits


def _dry_run(words: list[str], id_template: str | None, keys: dict) -> None:
    """The manifest the template expands to on stdout, each line checked as the batch would
    (a bad one ends it, 100); nothing is made, nothing runs."""
    from ..batching.template_flags import manifest_lines
    from . import output

    block = bytearray()
    for line in manifest_lines(words, id_template, keys):
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
    from ..engine.signals import stops_raise

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


def stopped_waiting(source: str, invocation) -> int:
    """A stop while an input was awaited, before any job: a batch's stop all the same (107, or
    death by SIGINT for Ctrl-C), said as its closing line says one; nothing is in ``--out`` yet."""
    sentence = f"no job started, cancelled by {stop_named(source)} (its input awaited)"
    if source == "ctrl_c":
        from .commands import DIE_BY_SIGINT

        if invocation.error_format != "json":
            say(sys.stderr, f"batch: {sentence}\n")
        return DIE_BY_SIGINT
    if invocation.error_format == "json":
        return invocation.fail(Failure(Kind.CANCELLED, sentence))
    say(sys.stderr, f"batch: {sentence}\n")
    return Kind.CANCELLED.code
