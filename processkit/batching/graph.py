"""A manifest's job graph (``needs``), checked whole before anything starts, and its longest
remaining paths for ``--history``'s order.

A need naming no job of the manifest, and a cycle, are usage errors naming them: make refuses a
circular dependency too, but only once it meets it; here nothing starts first. Both walks are
iterative (a chain of a million jobs is no recursion) and linear in jobs plus needs.
"""

from __future__ import annotations

from ..errors import usage
from ..text import cut, sanitize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .manifest import Job

NAMED = 8  # ids a cycle's message names before "..."


def has_needs(jobs: Iterable[Job]) -> bool:
    """Whether some job has ``needs``: a checked manifest knows (no pass over it again)."""
    known = getattr(jobs, "any_needs", None)
    return known if isinstance(known, bool) else any(job.plan.needs for job in jobs)


def check(jobs: list[Job]) -> None:
    """A usage Failure when a need names no job, or the needs go round in a cycle."""
    ids = {job.id for job in jobs}
    for job in jobs:
        for need in job.plan.needs:
            if need not in ids:
                raise usage(f"job {job.id} needs '{cut(need)}', which no job of the manifest is")
    order = topological(jobs)
    if len(order) < len(jobs):
        cycle = _a_cycle(jobs, {job.id for job in order})
        shown = " -> ".join(sanitize(job_id, 60) for job_id in cycle[:NAMED]) + (
            " -> ..." if len(cycle) > NAMED else ""
        )
        raise usage(f"the jobs' needs go round in a cycle: {shown}")


def topological(jobs: list[Job]) -> list[Job]:
    """The jobs each after its needs (Kahn's order, manifest order among equals); the jobs in
    or below a cycle are left out."""
    by_id = {job.id: job for job in jobs}
    pending = {job.id: sum(1 for need in job.plan.needs if need in by_id) for job in jobs}
    dependents: dict[str, list[str]] = {}
    for job in jobs:
        for need in job.plan.needs:
            dependents.setdefault(need, []).append(job.id)
    order = [job for job in jobs if not pending[job.id]]
    at = 0
    while at < len(order):
        for after in dependents.get(order[at].id, ()):
            pending[after] -= 1
            if not pending[after]:
                order.append(by_id[after])
        at += 1
    return order


def _a_cycle(jobs: list[Job], ordered: set[str]) -> list[str]:
    """One cycle among the jobs Kahn's order left out, as ids, its first repeated at the end:
    each left-out job has a need also left out, so following those needs must come round."""
    needs = {job.id: [need for need in job.plan.needs if need not in ordered] for job in jobs if job.id not in ordered}
    start = next(iter(needs))
    path: list[str] = []
    at_index: dict[str, int] = {}
    current = start
    while current not in at_index:
        at_index[current] = len(path)
        path.append(current)
        current = needs[current][0]
    return path[at_index[current] :] + [current]


def with_dependents(jobs: list[Job], todo: list[Job]) -> list[Job]:
    """``--resume``'s jobs to run, and every job below one of them in the graph (a need that runs
    again may make something else), in the jobs' order. Its caller knows ``jobs`` hold needs."""
    if len(todo) == len(jobs):
        return todo
    again = {job.id for job in todo}
    for job in topological(jobs):
        if job.id not in again and any(need in again for need in job.plan.needs):
            again.add(job.id)
    return [job for job in jobs if job.id in again]


def longest_paths(jobs: list[Job], took: dict[str, float]) -> dict[str, float]:
    """Each job's longest remaining path: its own time (``took``, from ``--history``; a job it
    does not name counts as long as the longest it does) plus the longest path among the jobs
    that need it."""
    unknown = max(took.values(), default=0.0) + 1.0
    path: dict[str, float] = {}
    dependents: dict[str, list[str]] = {}
    for job in jobs:
        for need in job.plan.needs:
            dependents.setdefault(need, []).append(job.id)
    for job in reversed(topological(jobs)):
        below = max((path[after] for after in dependents.get(job.id, ()) if after in path), default=0.0)
        path[job.id] = took.get(job.id, unknown) + below
    return path
