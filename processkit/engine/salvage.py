"""The last resort when a phase raised where it should not (a bug, an fd limit, a
``KeyboardInterrupt`` inside a step): the run's tree is killed, so nothing it started outlives
the runner, and the run ends as the runner's own failure (``runner_exit{internal, 104}``).

The wait for the killed root is a ``Wait`` like any other (bounded, polled): one run's salvage
never stalls the other runs on the host. The release stays the runner's one release
(``teardown.release``, in its ``finally``); only when that release itself raised as a whole does
``last_resort`` give everything back again, step by step (each step may be repeated), without
waiting: it runs where no step may yield any more.
"""

from __future__ import annotations

from ..diagnostics import fault_dropped, warn
from .endings import Outcome, faulted
from .waits import wait_until
from .state import Launched, RunState
from .teardown import release

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations
    from ..containment import Container
    from ..loop import Loop
    from .child import Child

KILL_WAIT_SECONDS = 2.0  # for the root to die of the last resort's kill (a SIGKILL is prompt)
KILL_POLL_SECONDS = 0.01


def killed(run: RunState, launched: Launched | None, exc: BaseException):
    """A phase raised: SIGKILL the whole container, collect the root (bounded; a run's steps:
    ``yield from``), and report the runner's own failure."""
    yield from collected(run.loop, run.container, launched.child if launched is not None else None)
    return faulted(exc)


def collected(loop: Loop, container: Container | None, child: Child | None):
    """SIGKILL the whole container and collect the root, waiting at most KILL_WAIT_SECONDS (a
    run's steps: ``yield from``): the engine's runs' last resort and ``bench``'s direct sample's
    (``benchmark/direct.py``), whatever raised once the child existed. A fault of one of the
    run's callbacks thrown in at the wait (``RunLoop.waking``: after a step raised, the run's
    first) does not end it: the run is ending as the runner's own failure already."""
    if _kill(container) and child is not None:
        deadline = loop.clock() + KILL_WAIT_SECONDS
        broken: list[Exception] = []

        def reaped() -> bool:  # never raises: what the wait throws in is a callback's fault alone
            if not broken:
                try:
                    return child.poll() is not None
                except Exception as exc:  # noqa: BLE001 - the release still follows
                    broken.append(exc)
                    warn(f"could not collect the run's root after an internal error: {type(exc).__name__}: {exc}")
            return True

        while True:
            try:
                yield from wait_until(reaped, deadline, KILL_POLL_SECONDS)
                return
            except Exception as exc:  # noqa: BLE001 - a callback's fault thrown in (its run's first): already ending so
                fault_dropped(exc)


def _kill(container: Container | None) -> bool:
    try:
        if container is not None:
            container.kill_all()
        return True
    except Exception as kill_exc:  # noqa: BLE001 - the release still follows
        warn(f"could not kill the run's tree after an internal error: {type(kill_exc).__name__}: {kill_exc}")
        return False


def last_resort(run: RunState, launched: Launched | None, exc: BaseException) -> Outcome:
    """The release raised: kill the tree and release everything again; the runner's failure."""
    _kill(run.container)
    outcome = faulted(exc)
    release(run, launched, outcome.exit_fields())
    return outcome
