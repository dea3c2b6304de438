"""The batch's ``index.html``: ``report``'s index page over every job's stream.

Rendered by ``report`` in a process of its own: the page holds every job, and building it takes
memory in proportion to the batch, which the batch process itself (flat however many jobs it
ran) does not take on."""

from __future__ import annotations

import os
import subprocess
import sys

from ..diagnostics import warn
from .manifest import Job


def write_index(out: str, jobs: list[Job]) -> None:
    paths = [path for path in (os.path.join(out, job.id, "events.jsonl") for job in jobs) if os.path.exists(path)]
    if not paths:
        return
    command = [sys.executable, "-m", "processkit", "report", *paths, "-o", os.path.join(out, "index.html")]
    try:
        proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:  # E2BIG: more jobs than one command line can name
        warn(f"no index.html: {exc.strerror}")
        return
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        warn(f"no index.html: {lines[-1] if lines else f'report exited {proc.returncode}'}")
