"""``batch``'s reports at its end, ``--trace`` and ``--junit``: each tried before the first job
(``check_reports``), then written from the summary (``write_reports``), never over a file the
batch reads or writes; whether a batch with no job writes them (``leaves_reports``)."""

from __future__ import annotations

import functools
import os
import stat

from ..errors import Failure, Kind
from ..summary_line import SUMMARY_FILE
from ..text import escape_unsafe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..report.batch_model import Batch

JUNIT = "the JUnit file"  # what an unwritable --junit is, in the reference's frame for an output file


def leaves_reports(args, out: str) -> bool:
    """Whether a batch with no job writes its (empty) summary, page and reports: a share (its
    siblings write theirs), a ``--junit`` or ``--trace`` asked for, or an ``--out`` holding an
    earlier batch's summary, so nothing it left there passes for this one's; else nothing is
    made (an ``--out`` that is a user's own directory is not written into)."""
    asked = args.partition is not None or args.junit is not None or args.trace is not None
    return asked or os.path.lexists(os.path.join(out, SUMMARY_FILE))


def check_reports(args, out: str) -> None:
    """Each report the batch writes at its end tried before the first job (as bench makes its
    exports): an unwritable one is a setup failure (111) with nothing run, not a warning after
    every job ran. A file already there is left as it is until the end. One directly in an
    ``--out`` not made yet is the batch's own to write (``--out`` is made, or fails, first). The
    report at a file the batch reads or writes (the manifest, ``--history``, the summary, the
    page, the other report) is known now too, and refused now."""
    from ..useroutputs import check_text

    named = [(out, "the --out directory"), *kept_files(args, out)]
    for path, what, frame in ((args.trace, "the --trace file", ""), (args.junit, "the --junit file", JUNIT)):
        if path is None:
            continue
        clash = _clash(path, named)
        if clash is not None:
            raise Failure(Kind.SETUP, f"cannot write {path}: it is {clash}")
        named.append((path, what))
        if os.path.dirname(os.path.abspath(path)) == os.path.abspath(out) and not os.path.lexists(out):
            continue
        if len(_under(path, out)) > 1:  # in a directory under --out: a job's, maybe (``check_job_directories``)
            continue
        check_text(path, frame)


def _clash(path: str, named: list[tuple[str, str]]) -> str | None:
    """Which of ``named`` ``path`` is: the same file (``useroutputs.kept_as``, as the write
    at the end judges it: a hard link too), else the same name resolved (a symlink to ``--out``
    is ``--out``; a file not made yet); a device or a pipe is written in place by each, and is none."""
    from ..useroutputs import identities, kept_as

    try:
        found = os.stat(path)  # not the resolved name: /dev/stdout's is pipe:[N], no file
    except (OSError, ValueError):
        found = None
    same = kept_as(found, identities(named))
    if same is not None or (found is not None and not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode))):
        return same
    target = os.path.realpath(path)
    return next((what for other, what in named if os.path.realpath(other) == target), None)


def kept_files(args, out: str) -> list[tuple[str, str]]:
    """The files the batch reads or writes that no report is written over, each with what it is."""
    from ..batching.index import PAGE

    named = [(os.path.join(out, SUMMARY_FILE), "the batch's summary"), (os.path.join(out, PAGE), "the batch's page")]
    given = ((args.manifest, "the manifest"), (args.history, "the --history summary"))
    return named + [(path, what) for path, what in given if path not in (None, "-")]


def write_reports(
    args, out: str, started_ns: int, gone: frozenset[str], own: set[str] | None = None
) -> tuple[Failure | None, list[str]]:
    """``--trace`` and ``--junit``, from the summary just written (``started_ns``: the batch's
    start, on the wall clock; ``own``: under ``--resume``, the ids it ran), and the flags of those written. A trace not written is a warning;
    a JUnit report not written is returned, a setup failure (111) the batch ends with when no job failed (else its 117 stands),
    as nextest fails a run whose JUnit it cannot write: a CI that asked for the report would pass
    with none. Never over what the batch read or wrote (``batch m.jsonl --junit m.jsonl``, the
    summary, the page, the other report, a job's directory: a template's jobs read as they came
    are known only now): each would be lost for a file derived from it."""
    from ..diagnostics import warn
    from ..useroutputs import identities, write_text

    kept = identities(kept_files(args, out))
    batch: Batch | None = None  # the summary, read once for both reports
    written = []
    if args.trace is not None:
        from ..report.batch_trace import trace_json

        try:
            batch = _summary(args.trace, out, gone)
            write_text(args.trace, trace_json(batch), kept)
            written.append("--trace")
        except Failure as failure:
            warn(f"no trace: {failure.message}")
        kept.update(identities([(args.trace, "the --trace file")]))
    if args.junit is not None:
        from ..report.junit import junit_xml

        try:
            batch = _summary(args.junit, out, gone, batch)
            write_text(args.junit, junit_xml(batch, out, started_ns, own), kept, JUNIT)
            written.append("--junit")
        except Failure as failure:
            return failure, written
    return None, written


def emptied(args, out: str, written: list[str]) -> str:
    """What a batch with no job did with its reports (``leaves_reports``), said on its one
    closing line: the summary and page in ``out``, and the reports asked for, written empty."""
    given = {"--trace": args.trace, "--junit": args.junit}
    reports = " and ".join(f"{flag} {escape_unsafe(given[flag])}" for flag in written)
    return f"wrote an empty summary and page in {escape_unsafe(out)}" + (f", and an empty {reports}" if reports else "")


def _summary(path: str, out: str, gone: frozenset[str], read: Batch | None = None) -> Batch:
    """``out``'s summary but the jobs ``gone`` names (``read``: as an earlier report read it),
    once ``path`` is in no job's directory: a template's jobs read as they came are known only now."""
    from ..report.batch_model import load

    batch = load(out, gone) if read is None else read
    _outside_jobs(path, out, lambda: {job.id for job in batch.jobs})
    return batch


def check_job_directories(args, out: str, jobs) -> None:
    """A report at a job's directory under ``--out``, or inside one, is refused (111) before the
    first job: it would be written over that job's record (its events, its capture), or fail
    after every job ran. The ids are known now, but for a template's jobs read as they come
    (``write_reports`` refuses it then). A report in another directory under ``--out`` is tried
    now (``check_reports`` left it): a job's refused first, in the same words a fresh ``--out``
    and an old one get, not as a directory not made yet."""
    from ..useroutputs import check_text

    as_they_come = getattr(jobs, "as_they_come", False)
    ids = functools.cache(lambda: {job.id for job in jobs})  # a manifest read once for both reports
    for path, frame in ((args.trace, ""), (args.junit, JUNIT)):
        if path is None:
            continue
        if not as_they_come:  # the jobs (a manifest is read again to list them) only for a path in --out
            _outside_jobs(path, out, ids)
        if len(_under(path, out)) > 1:
            check_text(path, frame)


def _under(path: str, out: str) -> list[str]:
    """``path``'s names under ``out`` (resolved), or none when it is not under ``out``."""
    inside = os.path.relpath(os.path.realpath(path), os.path.realpath(out)).split(os.sep)
    return [] if inside[0] in (os.curdir, os.pardir) else inside


def _outside_jobs(path: str, out: str, ids) -> None:
    """A Failure (111) when ``path`` is one of the job ids' (``ids()``, asked only for a path
    inside ``out``) directories under ``out``, or inside one."""
    inside = _under(path, out)
    if not inside or inside[0] not in ids():
        return
    where = f"job {inside[0]}'s directory" if len(inside) == 1 else f"inside job {inside[0]}'s directory"
    raise Failure(Kind.SETUP, f"cannot write {path}: it is {where}")
