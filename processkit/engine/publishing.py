"""A run's registration for the control plane (``list``, ``inspect``, ``cancel``), made from its
parts: the engine's runs (``launch``) and ``bench``'s samples carried without the engine's run
path (``benchmark/direct.py``) publish through these two functions."""

from __future__ import annotations

import time

from ..control.publication import NOT_REGISTERED, Publication, PublishedRun, publish
from ..diagnostics import warn_once
from ..errors import Failure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .. import containment
    from ..containment.members import Member
    from ..control.lodging import Lodging
    from ..loop import Loop
    from ..rundir import RunDir
    from ..spec import RunSpec


def register(
    loop: Loop,
    spec: RunSpec,
    jsonl: str,
    capture_dir: str | None,
    cwd: str,
    container: containment.Container,
    rundir: RunDir | None,
    root_pid: Callable[[], int | None],
    members: Callable[[], list[Member]],
    stop: Callable[[str], None],
    lodging: Lodging | None,
    started_ns: int | None,
    said: set[tuple],
    jsonl_held: bool = False,
) -> Publication | None:
    """Register the run and open its control socket on ``loop``: best effort, the child runs
    anyway (a registry refused as another user's or shared included). ``started_ns``: the
    run's start on the wall clock, when it is not now; ``said``: the host's warnings said once
    (``diagnostics.warn_once``), a registry that fails failing alike for each of its runs;
    ``jsonl_held``: another run holds ``jsonl``, so this run writes no stream there."""
    published = PublishedRun(
        loop=loop,
        run_id=spec.run_id,
        argv=spec.argv,
        labels=spec.labels,
        jsonl=jsonl,
        capture_dir=capture_dir,
        cwd=cwd,
        mechanism=container.mechanism,
        rundir=rundir,
        root_pid=root_pid,
        members=members,
        stop=stop,
        holds=container.holds,
        usage=container.usage,
        lodging=lodging,
        jsonl_held=jsonl_held,
    )
    return publish(published, lambda text: warn_once(said, text), started_ns)


def late(make: Callable[[int], Publication | None], spawning_ns: int, said: set[tuple]) -> Publication | None:
    """``make(started_ns)`` once the child has run a while (a late publication): its record
    says when the child started (``spawning_ns``, monotonic). The child runs by then, so a
    registry that refuses only leaves the run unpublished, with a warning: ``publish``'s own,
    or for anything else it meets, the reference's for a registration that failed, said once
    per host as ``publish``'s are (``said``: ``Host.said``)."""
    started_ns = time.time_ns() - (time.monotonic_ns() - spawning_ns)
    try:
        return make(started_ns)
    except (Failure, OSError) as problem:  # on the loop, in a timer: it must not end the host
        reason = problem.message if isinstance(problem, Failure) else problem.strerror or str(problem)
        warn_once(said, f"{NOT_REGISTERED}: {reason}")
        return None
