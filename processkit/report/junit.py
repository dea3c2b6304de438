"""``batch --junit FILE``: the batch as JUnit XML, the shape Jenkins, GitLab and GitHub's test
reporters read (the Ant/Surefire convention): ``testsuites`` > one ``testsuite`` for the batch
(``tests``, ``failures``, ``errors``, ``skipped``, ``time``, ``timestamp``, ``hostname``) > a
``testcase`` per job (the id as its name, its duration). A job that did not exit 0 has a
``failure`` (the child's exit, a timeout) or an ``error`` (the runner's own: setup, spawn),
with its exit and its captures' last lines; a job skipped by a need, halted or cancelled before it
started has ``skipped``. A flaky job passed with a ``flakyFailure`` per failed attempt, a job
that failed on every attempt a ``rerunFailure`` per earlier one (Surefire's elements, which
nextest writes too), each with its attempt's ``system-out``/``system-err``. ``system-out``/``system-err`` hold each stream's last ``TAIL_BYTES``, and
the bytes of all tails together at most ``TAILS_BYTES``, as the file holds them (escaped, with their notes): the jobs nextest keeps output for (failed, in error,
retried) take their share of it first, and a tail that starts past the file's start, or that the
budget left out of such a job, says so in its text. A leaky job (its summary line's ``leaked``)
has a ``leaked`` property, which no JUnit element names (``unknown`` where its members could not be read). Drawn from the summary, as the page and the trace are.

XML 1.0 cannot carry most control characters or lone surrogates, even escaped: they become
U+FFFD, so any parser reads the file.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import datetime, timedelta, timezone
from xml.sax.saxutils import escape, quoteattr

from ..capture_layout import FILE_NAMES
from ..events.dropped import cut_note
from ..events.render import size as size_words
from ..summary_line import attempt_dir
from ..text import shown_lines, whole_chars
from .batch_model import Batch, Job
from .why_lines import SEARCH_BYTES, TAIL_BYTES, opened, shown

TAILS_BYTES = 64 << 20
KEPT_BYTES = 1 << 20  # of each stream of a failed, errored or flaky job: its whole output up to this, else its ends
WHY_LINES = 50  # of a failed job's capture's lines that say why (``why_lines``) in its ``failure``
LEFT_OUT = "[left out: "  # how a tail the budget left out begins
RUNNER_SOURCES = ("setup", "spawn_error", "container_error", "internal", "task_failed")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LAST = 253402300799.0  # 9999-12-31T23:59:59 UTC: a later start is no datetime
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return escape(_NOT_XML.sub("\ufffd", value))


def _spent(budget: list[int], value: str) -> str:
    """``value`` as XML text, its encoded bytes taken off the tails' budget: what the file and
    the memory hold (``<`` is ``&lt;``, a bad byte U+FFFD's 3), not the characters read."""
    text = _text(value)
    budget[0] -= len(text.encode())
    return text


def _attr(value: str) -> str:
    return quoteattr(_NOT_XML.sub("\ufffd", value))


def junit_xml(batch: Batch, name: str, started_ns: int, own: set[str] | None = None) -> str:
    """The batch as one JUnit document; ``name`` names its suite (the batch's ``--out``, where
    a retried job's earlier attempts keep their capture); ``started_ns``: when the batch began
    (the wall clock), its timestamp when no job started (a ``--partition`` share with none);
    ``own``: under ``--resume``, the ids of the jobs this batch ran (``_own_time``)."""
    budget, searched = [TAILS_BYTES], [SEARCH_BYTES]
    cases = [""] * len(batch.jobs)
    # each kept stream's share of half the budget, between a tail and KEPT_BYTES: a thousand
    # failed jobs each keep their ends, not the first few their whole and the rest nothing
    streams = sum(1 for job in batch.jobs if _kept(job) for info in (job.stdout, job.stderr) if info and info.bytes)
    share = min(KEPT_BYTES, max(TAIL_BYTES, TAILS_BYTES // 2 // max(1, streams)))
    # the failures' tails first: a large batch's passing jobs must not spend what shows why one failed
    for index in sorted(range(len(batch.jobs)), key=lambda i: not _kept(batch.jobs[i])):
        cases[index] = _case(batch.jobs[index], budget, name, share, searched)
    failures = sum(_kind(job) == "failure" for job in batch.jobs)
    errors = sum(_kind(job) == "error" for job in batch.jobs)
    skipped = sum(_kind(job) == "skipped" for job in batch.jobs)
    started, wall = _own_time(batch, started_ns, own)
    seconds = f"{wall / 1000:.3f}"
    # UTC with milliseconds and its offset, as nextest writes it: Ant writes the time zoneless (in
    # GMT), which Jenkins reads as UTC but JavaScript's Date as the reader's local time
    started = min(max(started, 0.0), _LAST)  # a summary line's start, crafted: still a date
    timestamp = (_EPOCH + timedelta(seconds=started)).isoformat(timespec="milliseconds")
    counts = f'tests="{len(batch.jobs)}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{seconds}"'
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<testsuites name={_attr('processkit batch')} {counts}>\n"
        f"  <testsuite name={_attr(name)} {counts} timestamp={_attr(timestamp)} "
        f"hostname={_attr(socket.gethostname())}>\n" + "".join(cases) + "  </testsuite>\n</testsuites>\n"
    )


def _own_time(batch: Batch, started_ns: int, own: set[str] | None) -> tuple[float, float]:
    """When this batch's first job started (seconds since the epoch) and its wall time to its
    last job's end (ms), as nextest's report times its own run: a ``--resume``'d batch's summary
    keeps the jobs an earlier batch passed; counted, its time held the earlier run and the pause
    between. ``own``: the ids this batch wrote a line for (None: every job's), told by identity,
    not by the clock, which a step back of the wall clock would fool. None of its own (every
    job passed before, a share with none): ``started_ns``, and no time."""
    origin = (batch.started_s or 0.0) * 1000
    mine = [attempt for attempt in batch.attempts if own is None or attempt.job_id in own]
    if not mine:
        return started_ns / 1e9, 0.0
    first = min(attempt.start_ms for attempt in mine)
    return (origin + first) / 1000, max(attempt.start_ms + attempt.duration_ms for attempt in mine) - first


def _kind(job: Job) -> str:
    if job.exit_code == 0:
        return "passed"
    if job.exit_code is None:
        return "error" if job.source in RUNNER_SOURCES else "skipped"
    return "error" if job.source in RUNNER_SOURCES else "failure"


def _kept(job: Job) -> bool:
    """A failed, errored or flaky job: the ones whose output nextest keeps, whose tails take the
    budget first, and a tail the budget left out is said."""
    return _kind(job) in ("failure", "error") or job.flaky


def _case(job: Job, budget: list[int], out: str, share: int, searched: list[int]) -> str:
    seconds = f"{(job.duration_ms or 0) / 1000:.3f}"
    parts = [f"    <testcase name={_attr(job.id)} classname={_attr('batch')} time={_attr(seconds)}>\n"]
    if job.leaked or job.leaked_unknown:  # nextest's leak, which no JUnit element names: a property to look for
        value = job.leaked or "unknown"  # its members unread: no word of none
        parts.append(f'      <properties><property name="leaked" value="{value}"/></properties>\n')
    kind = _kind(job)
    kept = _kept(job)
    stderr_tail = _spent(budget, _tail("stderr", job, budget, kept, share if kept else TAIL_BYTES))
    stdout_tail = _spent(budget, _tail("stdout", job, budget, kept, share if kept else TAIL_BYTES))
    message = (
        job.message if kind == "skipped" and job.message else job.outcome + (f": {job.message}" if job.message else "")
    )
    if kind == "skipped":
        parts.append(f"      <skipped message={_attr(message)}/>\n")
    elif kind in ("failure", "error"):
        stdout_why, stderr_why = (_why(stream, job, budget, searched) for stream in ("stdout", "stderr"))
        body = _failure_text(stdout_why, stderr_why) or job.message or _no_text(job)
        if (
            LEFT_OUT in (stdout_why[: len(LEFT_OUT)], stderr_why[: len(LEFT_OUT)]) and job.message
        ):  # the note alone would hide why
            body = f"{job.message}\n{body}"
        parts.append(
            f"      <{kind} message={_attr(message)} type={_attr(job.source)}>{_spent(budget, body)}</{kind}>\n"
        )
    earlier = [attempt for attempt in job.tries if attempt.number < job.attempts and attempt.state != "ok"]
    rerun = "flakyFailure" if job.flaky else "rerunFailure" if kind == "failure" else None
    if rerun is not None:
        for attempt in earlier:
            capture = os.path.join(out, job.id, attempt_dir(attempt.number), "capture")
            inner = ""
            for stream, element in (("stdout", "system-out"), ("stderr", "system-err")):  # a pytest FAILED: stdout
                tail = _tail_of(os.path.join(capture, FILE_NAMES[stream]), budget)
                inner += f"<{element}>{_spent(budget, tail)}</{element}>" if tail else ""
            parts.append(
                f"      <{rerun} message={_attr(f'attempt {attempt.number}: {attempt.outcome}')} "
                f"type={_attr(attempt.source)}>{inner}</{rerun}>\n"
            )
    if stdout_tail:
        parts.append(f"      <system-out>{stdout_tail}</system-out>\n")
    if stderr_tail:
        parts.append(f"      <system-err>{stderr_tail}</system-err>\n")
    parts.append("    </testcase>\n")
    return "".join(parts)


def _failure_text(stdout_tail: str, stderr_tail: str) -> str:
    """A failure's text, what a CI reporter shows of it: the tail of each capture that holds
    something (a pytest shard's ``FAILED`` line is on stdout, cargo's progress on stderr beside
    it), each under its stream's name when both do."""
    if not (stdout_tail and stderr_tail):
        return stdout_tail or stderr_tail
    return "".join(
        f"[{name}]\n{tail}" + ("" if tail.endswith("\n") else "\n")
        for name, tail in (("stdout", stdout_tail), ("stderr", stderr_tail))
    )


def _no_text(job: Job) -> str:
    """A failure's text where no capture shows any and the runner said nothing: what a CI viewer
    shows instead of an empty block."""
    if not any(info is not None and info.bytes for info in (job.stdout, job.stderr)):
        return "[no output on stdout or stderr]"
    return "[no text on stdout or stderr: blank lines or terminal sequences alone]"


def _tail(name: str, job: Job, budget: list[int], say_left_out: bool, take: int = TAIL_BYTES) -> str:
    """A capture's last ``TAIL_BYTES`` (from its first whole line), or for a job whose output is
    kept (``take``, its share) the whole capture up to ``take`` and past that its first and last
    ``take``/2, within what is left of the tails' budget; nothing for a capture that was not
    kept, a note naming its path for one kept that can no longer be read (unless
    ``say_left_out`` is false: a passing job's). A capture cut at its cap, or short of it by a
    failed write, says so after them (``events.dropped.cut_note``): its last bytes are then not
    the stream's (the default keeps the head)."""
    info = job.stdout if name == "stdout" else job.stderr
    if info is None or not info.path or not info.bytes:
        return ""
    path, read = info.path, budget[0] > 0  # spent: a passing job's tail is neither read nor said
    text = _tail_of(path, budget, say_left_out, take)
    if text is None:  # kept, then gone or no longer a file: not a capture of no text
        return _unread(name, info) if say_left_out else ""
    return _with_cut_note(text, name, info, job.run_id, bool(text) or read)


def _unread(name: str, info) -> str:
    return f"[its {size_words(info.bytes)} of {name} could not be read from {info.path}]\n"


def _with_cut_note(text: str, name: str, info, run_id: str | None, say: bool) -> str:
    """``text``, then the capture's cut said (a blank capture's too, where ``say``)."""
    note = cut_note(name, info, run_id) if say else None
    if note:
        text += ("" if text.endswith("\n") or not text else "\n") + f"[{note}]\n"
    return text


def _why(name: str, job: Job, budget: list[int], searched: list[int]) -> str:
    """A failed or errored job's ``failure`` text of one capture: the whole capture when its
    last ``TAIL_BYTES`` hold it, else its lines that say why (``why_lines``; where none does,
    its first lines), then the lines of its last ``TAIL_BYTES``, each stretch between them
    counted, under a line saying what this is of how much and where the whole is. A CI page
    shows this first: nextest puts the panic message it finds in a failed test's output there."""
    info = job.stdout if name == "stdout" else job.stderr
    if info is None or not info.path or not info.bytes:
        return ""
    if budget[0] <= 0:
        return _spent_note(info.path)
    found = shown(info.path, WHY_LINES, None, searched)
    if found is None:
        return _unread(name, info)
    text = "\n".join(
        f"[{found.gap(item)}]" if item is None or isinstance(item, int) else item[1] for item in found.items
    )
    if text and not found.whole:
        text = f"[{found.said()} of the {size_words(found.size)} in {info.path}]\n{text}"
    text += "\n" if text else ""
    return _with_cut_note(text, name, info, job.run_id, True)


def _spent_note(path: str) -> str:
    """The note of a capture left out once this report's budget for output tails was spent."""
    return f"{LEFT_OUT}this report's {size_words(TAILS_BYTES)} for output tails was spent; it is in {path}]\n"


def _tail_of(path: str, budget: list[int], say_left_out: bool = True, take: int = TAIL_BYTES) -> str | None:
    """The file's last lines within the budget, after a line saying what comes before them (or,
    ``say_left_out``, that the budget left them all out: not for a passing job, whose notes
    would grow a large batch's file for nothing): a CI page shows the text alone, and a tail
    read as the whole output hides the lines that said why. ``take`` over ``TAIL_BYTES`` (a
    kept job's share): the whole file up to it, else its first and last halves, the bytes
    between them said where they were. None: the file cannot be opened."""
    if budget[0] <= 0 and not say_left_out:  # nothing to read nor say: the file is not opened
        return ""
    handle = opened(path)
    if handle is None:
        return None
    try:
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if size and budget[0] <= 0:
                said = _spent_note(path)
                return said if say_left_out else ""
            take = min(take, budget[0])
            head = b""
            if size > take > TAIL_BYTES:  # a kept job's ends
                head = handle.read(take // 2)
                # its last line whole (one long line is kept, to a character's end)
                head = head[: head.rfind(b"\n") + 1] or whole_chars(head, tail_cut=True)
                take -= take // 2
            handle.seek(max(len(head), size - take))
            data = handle.read(take)
    except OSError:  # a read that fails (EIO, a lost mount): as a file not opened
        return None
    if size > len(head) + len(data):
        cut = data.find(b"\n", 0, len(data) - 1)  # the first line is cut (one long line is kept)
        data = data[cut + 1 :] if cut >= 0 else whole_chars(data, head_cut=True)  # from a character's start
    text = "\n".join(shown_lines(data.decode("utf-8", "replace")))  # a reporter shows no colour
    if size <= take and not text.strip():  # blank lines, or terminal sequences alone: no block of nothing
        return ""
    if size <= len(head) + len(data):
        return text
    if not head:
        return f"[the last {size_words(len(data))} of the {size_words(size)} in {path}]\n" + text
    left = size - len(head) - len(data)
    kept = "\n".join(shown_lines(head.decode("utf-8", "replace")))
    return (
        f"[the first {size_words(len(head))} and the last {size_words(len(data))} of the {size_words(size)} in {path}]\n"
        + kept
        + ("" if kept.endswith("\n") else "\n")  # one long line kept: the note on a line of its own
        + f"[... {size_words(left)} left out here, after byte {len(head)}: the whole is in {path}]\n"
        + text
    )
