"""How a batch names its failed jobs: at the end, each with its exit and its captures' last
lines (as make and parallel leave the compiler's error last on the screen), on the CLI's terminal
and in the API's ``BatchError``, and in the one line of ``--error-format json``'s envelope; and
how a job's line says it was killed or its capture cut. ``cli/batch.py`` draws the terminal and
asks this module for these words."""

from __future__ import annotations

from ..events.render import size as size_words
from ..spawn_words import shell_line_hint
from ..text import escape_unsafe, killed_by, plural, sanitize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..report.why_lines import Shown
    from ..summary_line import EarlierAttempt, JobLine

TAIL_LINES = 5  # of a capture shown at the end, its last lines
WHY_LINES = 10  # of a capture's lines that say why (``why_lines``) shown above them, the first
LINE_CHARS = 200  # of each line shown
ENVELOPE_NAMED = 5  # failed jobs named in --error-format json's one line and in a BatchError
FAILURES_NAMED = 20  # failed jobs named at the end with their captures' last lines; the rest counted
# the outcomes (job_lines.outcome) named at the end: a job lost with its Dask task too (it may have
# run; nextest names every test that did not pass), with the reason its line's message gives
NAMED_AT_THE_END = ("failed", "timed_out", "task_failed")
ATTEMPTS_NAMED = 5  # a retried job's earlier attempts named at the end, each with how it ended


def named(failed: list[JobLine], count: int, out: str) -> str:
    """The first failed, timed-out or lost jobs in one clause (``; failed f1: exit 3; f2: exit 4;
    see OUT/summary.jsonl``), for ``--error-format json``, whose one envelope line is all a
    reader gets of stderr: without it the envelope says how many failed, never which. Led by how
    those named ended (``failed``, ``timed out``, ``failed or timed out``), each in its line's
    words (``f2: timed out (exit 106)``; a job lost with its Dask task with its line's message, the
    reason, which no warning says in that form)."""
    if not failed:
        return ""
    from .job_lines import WORDS, outcome

    shown = failed[:ENVELOPE_NAMED]
    kinds = {outcome(line) for line in shown}
    leads = [WORDS[kind] for kind in NAMED_AT_THE_END if kind in kinds]
    lead = " or ".join(leads) if len(leads) < 3 else f"{', '.join(leads[:-1])} or {leads[-1]}"
    said = [f"{sanitize(line.id)}: {how(line)}{_why_lost(line)}" for line in shown]
    more = count - len(said)
    return f"; {lead} {'; '.join(said)}{f'; and {more} more' if more else ''}; see {out}/summary.jsonl"


def _why_lost(line: JobLine) -> str:
    """A job lost with its Dask task: why, from its line's message (`` (its Dask task failed:
    ...)``); nothing for another."""
    return f" ({sanitize(line.message)})" if line.exit_code is None and line.message else ""


# The way out of a shell line given as the program, in the words of who gave it: the CLI's
# template (as GNU parallel's shell would split it), the CLI's manifest (a line's ``"args"``), or
# the API's (``args=``).
CLI_SHELL_WAY = (
    "batch: the program '{}' is one word with spaces, and no shell runs a job (GNU parallel's runs one): "
    "give its words apart, or write -- sh -c '...' sh {{}} (the argument as \"$1\")\n"
)
MANIFEST_SHELL_WAY = (
    "batch: the program '{}' is one word with spaces, and no shell runs a job: give its words apart in its "
    '"args", or run one: "args": ["sh", "-c", "..."]\n'
)
API_SHELL_WAY = (
    "the program '{}' is one word with spaces, and no shell runs a job: give its words apart in args=, "
    'or run one: args=["sh", "-c", "..."]\n'
)


def closing(
    failed: list[JobLine], count: int, out: str, shown: int = FAILURES_NAMED, shell_way: str = CLI_SHELL_WAY
) -> str:
    """The failed jobs named at the end (the first ``shown`` of ``count``: a terminal's 20, an
    exception's text fewer), the rest counted, and ``shell_way`` when a program was a shell line."""
    from ..report.why_lines import SEARCH_BYTES

    text, said, searched = "", None, [SEARCH_BYTES]
    for line in failed[:shown]:
        text += failure_lines(line, out, searched, said)
        said = line.message if line.exit_code is None else None  # "(as above)": the job named just before
    return text + _more(count - min(len(failed), shown), out) + _shell_line(failed, shell_way)


def _shell_line(failed: list[JobLine], way: str) -> str:
    """The way, said once, when a job's program was a shell line given whole (``'gzip {} > {}.gz'``):
    a program with spaces, its first word no path, not found (a program of that name on the
    child's PATH runs, so nothing is refused before)."""
    for line in failed:
        program = line.command[0] if line.command else ""
        if shell_line_hint(program, line.message or "") is not None:  # the same test as run's relayed hint
            return way.format(sanitize(program))
    return ""


def output_kept(out: str) -> str:
    """Where the jobs' output went, said on the closing line (human form only) when a job named
    nowhere above it printed something and ``--show-output`` was not given: GNU parallel shows
    each job's output, this batch keeps it in files (a failed job's path is in its block)."""
    return f"; each job's output is in {escape_unsafe(out)}/<id>/capture/ (--show-output prints it)"


def _more(count: int, out: str) -> str:
    """The jobs of a block past those named, counted."""
    return f"  ... and {count} more (see {escape_unsafe(out)}/summary.jsonl)\n" if count > 0 else ""


def flaky_block(flaky: list[JobLine], count: int, out: str) -> str:
    """The flaky jobs (failed, then exited 0 on a retry) at the end, the first of ``count`` each
    with how its earlier attempts ended, as nextest lists its FLAKY tests in its final summary:
    the job's line and ``--show-output`` show only the attempt that passed."""
    if not count:
        return ""
    text = f"batch: {plural(count, 'flaky job')}:\n"
    text += "".join(
        f"  {sanitize(line.id)}: exit 0 on attempt {line.attempts}\n" + _earlier(line, out) for line in flaky
    )
    return text + _more(count - len(flaky), out)


def _earlier(line: JobLine, out: str) -> str:
    """A retried job's earlier attempts (the first ``ATTEMPTS_NAMED``), each with how it ended and
    where its stream and capture are: the lines shown below them are the last attempt's."""
    named = line.earlier_attempts[:ATTEMPTS_NAMED]
    where = f"{out}/{line.id}/"
    text = "".join(f"    attempt {ran.attempt}: {ended(ran)}, in {escape_unsafe(where + ran.dir)}/\n" for ran in named)
    more = len(line.earlier_attempts) - len(named)
    return text + (f"    ... and {more} more earlier attempts (earlier_attempts in summary.jsonl)\n" if more else "")


def failure_lines(line: JobLine, out: str, searched: list[int], said: str | None = None) -> str:
    """One failed job at the end: its exit, then each capture that holds something, named
    (stream and path) above what of it is shown: a test runner's failure is on stdout, a
    compiler's on stderr. A capture too large to show whole shows the lines that say why
    (``why_lines``: a pytest shard's ``E   assert ...`` near the head of a 2 MB capture, a
    compiler's first error), or where none does its first lines, then its last lines, each
    stretch left out counted on a line of its own, and the path's line saying what is shown of
    how much: five last lines read as all a job printed otherwise. A job that captured nothing
    shows the runner's message, when there is one. A job lost with its Dask task whose reason
    is ``said``, that of the lost job named just before it (a scheduler lost, a cluster
    restarted: every task's), says ``(as above)`` rather than the same line again. ``searched``:
    what is left of the bytes the block may search (``why_lines.SEARCH_BYTES``)."""
    from ..report.why_lines import shown as what_is_shown

    text = f"  {sanitize(line.id)}: {how(line)}\n" + _earlier(line, out)
    any_shown = False
    for name, info in (("stdout", line.stdout), ("stderr", line.stderr)):
        if info is None or not info.bytes or not info.path:
            continue
        found = what_is_shown(info.path, WHY_LINES, TAIL_LINES, searched)
        any_shown = any_shown or bool(found and found.items)
        cut = capture_cut(name, info, line.run_id)
        if found is not None and found.items and not found.whole:
            part = f"{found.said()} of {size_words(found.size)} shown"
            cut = f"{cut[:-1]}; {part})" if cut else f" ({part})"
        text += f"    {name}: {escape_unsafe(info.path)}{cut}\n" + (_shown_lines(found) if found else "")
    if not any_shown and line.message:
        again = line.exit_code is None and line.message == said
        text += f"    | {'(as above)' if again else sanitize(line.message, LINE_CHARS)}\n"
    return text


def _shown_lines(found: Shown) -> str:
    """A capture's lines shown, each stretch not shown counted on a line of its own; a line that
    says why (or a first line) by its start, a last line by its end."""
    text = ""
    first_of_tail = len(found.items) - found.tail
    for index, item in enumerate(found.items):
        if item is None or isinstance(item, int):
            text += f"    ... {found.gap(item)}\n"
        else:
            text += f"    | {_end_of(item[1]) if index >= first_of_tail else sanitize(item[1], LINE_CHARS - 3)}\n"
    return text


def how(line: JobLine) -> str:
    """How a failed job ended, in its own line's words: ``exit 3``, ``timed out (exit 106)``,
    ``killed by signal 9 (SIGKILL), exit 137``."""
    return ended(line) + line.notes()


def ended(attempt: JobLine | EarlierAttempt) -> str:
    """How one attempt ended, in ``how``'s words (a retried job's earlier ones have no notes): an
    outcome of its own (``job_lines.RAN``: timed out, cancelled) first, as the job's line says it."""
    from .job_lines import NEVER_RAN, RAN, WORDS

    if attempt.exit_code is None:  # a job lost with its Dask task: its line alone has no exit
        return WORDS[NEVER_RAN.get(attempt.source, "not_started")]
    if attempt.signal is not None:
        return f"{killed_by(attempt.signal)}, exit {attempt.exit_code}"
    if attempt.source in RAN:
        return f"{WORDS[RAN[attempt.source]]} (exit {attempt.exit_code})"
    return f"exit {attempt.exit_code}" + ("" if attempt.source == "child_exit" else f" ({attempt.source})")


# The end block's heading counts its jobs as the closing sentence does (failed, timed out) and
# says how many of the failed were killed by a signal, as nextest's final summary counts FAIL,
# SIGSEGV and TIMEOUT apart and as each job's line below says it.
SIGNALLED = "killed by a signal"


def ending(line: JobLine, kind: str) -> tuple[str, ...]:
    """What a job named at the end (``kind``: ``job_lines.outcome``'s) counts under."""
    if kind != "failed":
        return (kind,)
    return ("failed", SIGNALLED) if line.signal is not None else ("failed",)


def heading(counts: dict[str, int]) -> str:
    """``batch: 1 job timed out:``, ``batch: 2 jobs failed (1 killed by a signal), 1 timed out:``,
    ``batch: 1 Dask task failed (its job may have run, and may be running still):``, counted in
    the closing line's words (``1 task failed``)."""
    failed, signalled, timed_out, lost = (
        counts.get(name, 0) for name in ("failed", SIGNALLED, "timed_out", "task_failed")
    )
    parts = []
    if failed:
        how_many = "" if signalled == failed == 1 else ("each " if signalled == failed else f"{signalled} ")
        parts.append(f"{plural(failed, 'job')} failed" + (f" ({how_many}{SIGNALLED})" if signalled else ""))
    if timed_out:
        parts.append(f"{timed_out} timed out" if parts else f"{plural(timed_out, 'job')} timed out")
    if lost:  # a lost scheduler's or a killed worker's job runs on past the batch's end
        whose = "its job" if lost == 1 else "their jobs"
        parts.append(f"{plural(lost, 'Dask task')} failed ({whose} may have run, and may be running still)")
    return f"batch: {', '.join(parts)}:\n"


def capture_cut(name: str, info, run_id: str | None) -> str:
    """A capture cut at its cap, said beside its path: the lines below it are the file's last,
    which with the default ``capture_keep`` (head) are not the stream's (the error a job printed
    last may be in the bytes dropped)."""
    import processkit.events.dropped as dropped  # twice a job's line: not ``from ..`` (``containment._lender``)

    note = dropped.cut_note(name, info, run_id)
    return f" ({note})" if note else ""


def _end_of(text: str) -> str:
    """A line shown, at most LINE_CHARS long: a longer one's end, marked ``...`` as the cut line
    of the read is, since the error of a long line (a log line, a progress line) is at its end."""
    clean = sanitize(text, len(text))
    return clean if len(clean) <= LINE_CHARS else "..." + clean[-(LINE_CHARS - 3) :]
