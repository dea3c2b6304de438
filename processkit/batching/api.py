"""``processkit.batch``: the batch engine from Python, in this process."""

from __future__ import annotations

from ..errors import Failure
from .carrier import Settings, run_batch
from .index import Index
from .manifest import jobs_from


def batch(
    manifest,
    /,
    *,
    out: str,
    jobs: int | None = None,
    retries: int = 0,
    halt_on_failure: bool = False,
    resume: bool = False,
) -> list[dict]:
    """Run the jobs of ``manifest`` (mappings shaped as its lines: ``args``, an optional ``id``,
    API keywords) at most ``jobs`` at once (default: the CPUs), each a full run with its stream
    and capture under ``out``; returns the summary lines in finishing order (``summary.jsonl``).

    Runs in this process without touching its signal handlers: a KeyboardInterrupt stops the
    batch through each run's release. A bad job raises ValueError before anything starts."""
    try:
        checked = jobs_from(manifest)
    except Failure as failure:
        raise ValueError(failure.message) from None
    settings = Settings(out, jobs, retries, halt_on_failure, resume)
    index = Index(out)
    try:
        lines, _ = run_batch(checked, settings, signals=False, index=index)
    except BaseException:  # a KeyboardInterrupt, say: no page, and no index process left behind
        index.abandon()
        raise
    index.finish(checked)
    return lines
