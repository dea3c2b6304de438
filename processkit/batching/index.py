"""The batch's ``index.html``: ``report``'s index page over every job's stream."""

from __future__ import annotations

import os

from .manifest import Job


def write_index(out: str, jobs: list[Job]) -> None:
    from ..report import reading, render

    paths = [os.path.join(out, job.id, "events.jsonl") for job in jobs]
    runs = []
    for index, path in enumerate(paths):
        if os.path.exists(path):
            runs.append(reading.load(path, f"run-{index}"))
    if not runs:
        return
    page = render.index_page(runs)
    temporary = os.path.join(out, ".index.html.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(temporary, os.path.join(out, "index.html"))
