"""One attempt of a batch job as a run's steps (``job_steps``): its directory in ``--out`` made or
checked, the attempt before a retry moved aside into ``attempt-N/``, and under ``--keep failed``
its files held in memfds until it is known to have failed (``held``).
"""

from __future__ import annotations

import os

from ..engine.endings import Outcome
from ..engine.host import Host
from ..engine.runner import steps
from ..errors import Failure, Kind
from ..context import RunContext
from ..summary_line import attempt_dir
from . import job_lines
from .held import Spares, settle
from .manifest import Job, job_spec
from .outdir import drop_earlier_attempts, ensure_directory


# A job's stream and capture directory in its directory (``os.path.join``'s result, spelled once).
STREAM = os.sep + "events.jsonl"
CAPTURE = os.sep + "capture"


def job_steps(
    host: Host,
    job: Job,
    within: str,
    label: str,
    attempt: int,
    timeout_ms: int | None,
    spares: Spares | None,
    own: RunContext,
    earlier_files: bool,
    args: list[str] | None = None,
):
    """One attempt of ``job`` as a run's steps; returns (job, outcome, run id, whether its files
    were dropped). Labelled with the batch, so ``list`` shows which batch a live job belongs to.
    The attempt before a retry keeps its stream and capture: they move into ``attempt-N/`` of
    the job's directory. With ``spares`` (``--keep failed``) the attempt writes into memfds
    (``held``, taken from ``spares`` and given back once it is over), and only a failed one's
    files reach the job's directory; a ring capture (``capture_keep`` tail or head-tail) is
    written in place as always. ``own``: the context of a run the batch wires nothing into
    (``_own_context``). ``earlier_files``: ``out`` held something
    when the batch began, so the attempts an earlier batch left for the job are removed before
    its first, and a passing held job's files from an earlier batch after it. ``within``: the
    batch's ``--out`` with its separator, joined once for all its jobs. (A retry's pause, and
    the stop or halt that may end it before this, are the batch's: ``on_host``.)"""
    directory = within + job.id  # ``os.path.join(out, job.id)``: an id is one name (``manifest.JOB_ID``)
    held = None
    try:
        hold = spares is not None and job.template.capture_keep == "head"
        if earlier_files and attempt == 1:
            drop_earlier_attempts(directory)
        if not hold or attempt > 1:
            ensure_directory(directory, "the job directory")
        if attempt > 1:
            _move_attempt_aside(directory, attempt - 1)
        if spares is not None and hold:
            held = spares.take()
    except Failure as failure:
        return job, Outcome(failure.code, failure), None, False
    over = False  # the run's steps are over: the memfds lent to them may serve another attempt
    try:
        spec = job_spec(
            job,
            jsonl=directory + STREAM,
            capture_dir=directory + CAPTURE,
            label=label,
            timeout_ms=timeout_ms,
            args=args,
        )
        context = own if held is None else held.context  # a held job's memfds lent, it published late
        outcome = yield from steps(
            host, spec, job_lines.line_events(job), final_usage=False, keep_stream=_failed, context=context, leaks=True
        )
        over = True
        written_out = held is None or settle(
            held, _failed(outcome), spec.jsonl, spec.capture_dir or directory, earlier_files
        )
        return job, outcome, spec.run_id, not written_out
    finally:
        if held is not None:
            if over and spares is not None:
                spares.give(held)
            else:
                held.close()


def _failed(outcome: Outcome) -> bool:
    """What ``--keep failed`` keeps: an attempt that did not exit 0."""
    return outcome.code != 0


def _move_attempt_aside(directory: str, attempt: int) -> None:
    """Move the last attempt's stream and capture into ``attempt-N`` of the job's directory
    (renames in a directory ``ensure_directory`` checked is the caller's own)."""
    aside = ensure_directory(os.path.join(directory, attempt_dir(attempt)), "the attempt's directory")
    for name in ("events.jsonl", "capture"):
        try:
            os.rename(os.path.join(directory, name), os.path.join(aside, name))
        except FileNotFoundError:
            pass  # that attempt failed before making it
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot keep attempt {attempt} of {directory}: {exc.strerror}") from None
