"""The peers' own flags given to ``batch`` (GNU parallel's, xargs', make's, nextest's): a line
argparse refused is read for a habit, and one line says whose flag it is and what stands for it
here, or that nothing does (a usage error, nothing run), instead of argparse's "unrecognized
arguments" and the usage. ``parse`` reads the line (the flags, and the command template after
``--``); ``PEERS_FLAGS`` is the table (docs/batch.md, "Coming from GNU parallel, make or nextest").
"""

from __future__ import annotations

from ..errors import Failure, usage
from ..text import cut
from .batch_parallel_flags import (
    COLUMNS,
    ELSEWHERE,
    JOBLOG,
    LINES,
    NO_QUOTING,
    ONE_ARGUMENT,
    ONE_STRING,
    PARALLELS_OTHERS,
    PARALLELS_SPELLINGS,
    WHOLE_STDIN,
)

# What several of the peers' flags are told, each said once.
NOT_IF_EMPTY = (
    "no input makes no job here already, but a blank line is a job (an empty argument) where parallel's -r "
    "skips it: leave blank lines out first (grep . list.txt | processkit-cli batch -- CMD)"
)
NOT_LIVE = (
    "here no job's output reaches the terminal as it is written: each is kept whole in OUT/ID/capture/ (--out), "
    "and --show-output prints it as the job ends"
)
COMMANDS_SHOWN = (
    "here --dry-run prints each job as a manifest line without running it, and every job's command is in "
    "OUT/summary.jsonl (--out)"
)
AS_RESUME = "here it is --resume (a job that did not exit 0 runs again, the others are skipped)"
ALWAYS_RUN = "here every job runs, unless --resume skips those an earlier summary shows exited 0"
# The peers' flags a batch user types from habit, and what stands for each here: one line that
# points the way, instead of argparse's "unrecognized arguments" and the usage. Each line is
# "WHOSE; WHAT HERE"; an alias (``ALIASES``) names its flag and says that flag's WHAT HERE, and a
# letter two peers use (``TWO_PEERS``) says both.
# GNU parallel's short flags that take a value (its getopt spec, bundling): in a bundle the rest
# is that value (``-dk`` is ``-d k``, ``-Sworker1`` is ``-S worker1``), never more flags.
PARALLELS_VALUED = frozenset("aBCdeEHiIjJLnNPsSUW")
MAKES_J = "make's -j alone, no limit, is -j 0: as many as the open-file limit allows"
_FLAGS = {
    "--halt": "GNU parallel's; here its soon,fail=1 is --halt-on-failure (the running jobs finish) and its never (0) "
    "is the default, as in parallel: drop it; for its now,fail=1, send the batch SIGTERM",
    "--joblog": f"GNU parallel's; {JOBLOG}",
    "--results": "GNU parallel's; here each job's output is kept in OUT/ID/capture/ (--out)",
    "--keep-order": "GNU parallel's; here --show-output prints each job's output whole, in finishing order",
    "--fail-fast": "nextest's; here it is --halt-on-failure",
    "--no-fail-fast": "nextest's; here it is the default (every job runs after a failure)",
    "--keep-going": "make's; here it is the default (every job runs after a failure)",
    "--tag": "GNU parallel's; here --show-output prints each job's output whole under a '==> ID (exit N) <==' header",
    "--line-buffer": "GNU parallel's; here --show-output prints each job's output whole as it ends, "
    "and OUT/ID/capture/ holds each job's lines apart",
    "--group": "GNU parallel's; here it is --show-output (each job's output whole as it ends); "
    "a manifest's groups are limited with --group-limit NAME=N",
    "--ungroup": "GNU parallel's; here --show-output prints each job's output whole as it ends",
    "--bar": "GNU parallel's; here the progress bar is drawn whenever stderr is a terminal (not under TERM=dumb)",
    "--eta": "GNU parallel's; here the progress bar, with its ETA, is drawn whenever stderr is a terminal (not under TERM=dumb)",
    "--progress": "GNU parallel's; here the progress bar is drawn whenever stderr is a terminal (not under TERM=dumb)",
    "--max-procs": "GNU parallel's and xargs'; here it is -j/--jobs",
    "--test-threads": "nextest's; here it is -j/--jobs",
    "--failure-output": "nextest's; here each failed job is named at the end with its last lines "
    "(its whole output: --show-output, or OUT/ID/capture/)",
    "--success-output": "nextest's; here --show-output prints every job's output as it ends",
    "--final-status-level": "nextest's; here each failed job is named at the end with its last lines, "
    "and every job's line is written as it ends",
    "--null": "GNU parallel's and xargs'; here an argument is a line (of a :::: file, of stdin), and a NUL is refused",
    "--will-cite": "GNU parallel's; nothing here asks to be cited: drop it",
    "--colsep": f"GNU parallel's; {COLUMNS}",
    "--arg-file": "GNU parallel's and xargs'; here it is :::: FILE",
    "--quote": f"GNU parallel's; {NO_QUOTING}",
    "--max-args": f"GNU parallel's and xargs'; {ONE_ARGUMENT}",
    "--max-replace-args": f"GNU parallel's; {ONE_ARGUMENT}",
    "--max-lines": f"GNU parallel's and xargs'; {ONE_ARGUMENT}",
    "-X": f"GNU parallel's (as many arguments as fit one command line); {ONE_ARGUMENT}",
    "-m": f"GNU parallel's (as many arguments as fit one command line); {ONE_ARGUMENT}",
    "--xargs": f"GNU parallel's; {ONE_ARGUMENT}",
    "--pipe": f"GNU parallel's; {WHOLE_STDIN}",
    "--replace": f"GNU parallel's and xargs' (-I {{}}); {ONE_STRING}",
    "--delay": "GNU parallel's; none here: a job starts as soon as a slot is free (--retry-delay DUR pauses before a retry)",
    "--load": "GNU parallel's; none here: no job waits for the machine's load (-j/--jobs limits the jobs at once, "
    "-j 50% counted from the CPUs)",
    "--memfree": "GNU parallel's; here --memory-budget SIZE starts a job only while the running jobs' expected "
    "peak memory fits in SIZE (not the free memory)",
    "--nice": "GNU parallel's; none here: run the batch itself under nice (nice -n 10 processkit-cli batch ...), "
    "and its jobs inherit it",
    "--sshlogin": f"GNU parallel's; {ELSEWHERE}",
    "--sshloginfile": f"GNU parallel's; {ELSEWHERE}",
    "--shuf": "GNU parallel's; none here: the jobs start in their input's order (--history FILE: the longest first), "
    "so shuffle the input first (shuf list.txt | processkit-cli batch -- CMD)",
    "--resume-failed": f"GNU parallel's; {AS_RESUME}",
    "--retry-failed": f"GNU parallel's; {AS_RESUME}",
    "--tagstring": "GNU parallel's; here --show-output's header names each job by its id (--id TEMPLATE sets it)",
    "--verbose": f"GNU parallel's and xargs' (xargs' -t: each command on stderr); {COMMANDS_SHOWN}",
    "-t": f"GNU parallel's and xargs' (each command on stderr); {COMMANDS_SHOWN}",
    "--workdir": "GNU parallel's; here it is --cwd DIR (a manifest line's cwd for a job's own)",
    "--no-run-if-empty": f"GNU parallel's and xargs'; {NOT_IF_EMPTY}",
    "--delimiter": f"GNU parallel's and xargs'; {LINES}",
    **PARALLELS_OTHERS,
    # make's and nextest's further habits (after parallel's: a name both use is parallel's above)
    "--just-print": "make's; none for a MANIFEST, whose lines are the jobs already (--dry-run prints a command "
    "template's jobs as manifest lines, and refuses a MANIFEST)",
    "--ignore-errors": "make's; none here: every job runs after a failure by default, and the exit still says "
    "one failed (117)",
    "--always-make": f"make's; {ALWAYS_RUN}",
    "--load-average": "make's; none here: no job waits for the machine's load (-j/--jobs limits the jobs at once)",
    "--file": "make's; here the MANIFEST names the jobs (one JSON line each), and their needs the order",
    "--directory": "make's; here run the batch from DIR (cd DIR first), or give a manifest line a cwd (a command "
    "template's jobs: --cwd DIR)",
    "--output-sync": "make's; here --show-output prints each job's output whole as it ends, never interleaved",
    "--no-capture": f"nextest's; {NOT_LIVE}",
    "--status-level": "nextest's; here every job's line is said as it ends, and each failed job at the end",
    "--hide-progress-bar": "nextest's; here the progress bar is drawn only when stderr is a terminal (TERM=dumb: none)",
    "--show-progress": "nextest's; here the progress bar is drawn whenever stderr is a terminal (not under TERM=dumb)",
    "--message-format": "nextest's; here every job's line is in OUT/summary.jsonl as JSON (--out), and --junit FILE "
    "writes JUnit XML",
    "--max-fail": "nextest's; here --halt-on-failure starts no job after the first failure (no other count)",
    "--run-ignored": "nextest's; none here: every job of the manifest runs (--partition K/N runs a share)",
    "--no-tests": "nextest's; none here: no job to run exits 0, and says so",
}
# Another name of a flag above: whose it is, and the flag it names (its line says that flag's WHAT).
ALIASES = {
    "-u": ("GNU parallel's", "--ungroup"),
    "-P": ("GNU parallel's and xargs'", "--max-procs"),
    "-0": ("GNU parallel's and xargs'", "--null"),
    "-a": ("GNU parallel's and xargs'", "--arg-file"),
    "-q": ("GNU parallel's", "--quote"),
    "--lb": ("GNU parallel's", "--line-buffer"),
    "--res": ("GNU parallel's", "--results"),
    "--halt-on-error": ("GNU parallel's", "--halt"),
    "--jl": ("GNU parallel's", "--joblog"),
    "-N": ("GNU parallel's", "--max-replace-args"),
    "-L": ("GNU parallel's and xargs'", "--max-lines"),
    "--pipepart": ("GNU parallel's", "--pipe-part"),
    "--block": ("GNU parallel's", "--block-size"),
    "-I": ("GNU parallel's and xargs'", "--replace"),
    "-S": ("GNU parallel's", "--sshlogin"),
    "--slf": ("GNU parallel's", "--sshloginfile"),
    "-v": ("GNU parallel's", "--verbose"),
    "--wd": ("GNU parallel's", "--workdir"),
    "-r": ("GNU parallel's and xargs'", "--no-run-if-empty"),
    "-d": ("GNU parallel's and xargs'", "--delimiter"),
    "--recon": ("make's", "--just-print"),
    "-B": ("make's", "--always-make"),
    "-f": ("make's", "--file"),
    "--makefile": ("make's", "--file"),
    "-O": ("make's", "--output-sync"),
    "--nocapture": ("nextest's", "--no-capture"),
    **{spelling: ("GNU parallel's", flag) for spelling, flag in PARALLELS_SPELLINGS.items()},
}
# A letter GNU parallel (and xargs) and make both use, each meaning said: parallel's, then make's.
TWO_PEERS = {
    "-k": ("GNU parallel's", "--keep-order", "--keep-going"),
    "-n": ("GNU parallel's and xargs'", "--max-args", "--just-print"),
    "-l": ("GNU parallel's and xargs'", "--max-lines", "--load-average"),
    "-i": ("GNU parallel's and xargs'", "--replace", "--ignore-errors"),
    "-C": ("GNU parallel's", "--colsep", "--directory"),
}


def _here(flag: str) -> str:
    """What stands for ``flag`` here: its line past the WHOSE."""
    return _FLAGS[flag].partition("; ")[2]


PEERS_FLAGS = {
    **_FLAGS,
    **{alias: f"{whose} {flag}; {_here(flag)}" for alias, (whose, flag) in ALIASES.items()},
    **{
        letter: f"{whose} {flag} or make's {makes}: as {flag}, {_here(flag)}; as {makes}, {_here(makes)}"
        for letter, (whose, flag, makes) in TWO_PEERS.items()
    },
}


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
            raise usage(f"{took} took '{cut(args.jobs)}' as its count, leaving no MANIFEST ({MAKES_J})")
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
