"""``processkit.batch``: the batch engine from Python, in this process."""

from __future__ import annotations

from ..errors import Failure
from .carrier import Settings, run_batch
from .index import write_page
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
    if not checked:
        return []
    settings = Settings(out, jobs, retries, halt_on_failure, resume)
    lines, _ = run_batch(checked, settings, signals=False)
    write_page(out)
    return lines
