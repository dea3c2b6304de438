"""The last resort when a phase raised where it should not (a bug, an fd limit): the run's tree
is killed, so nothing it started outlives the runner, and the run ends as the runner's own
failure (``runner_exit{internal, 104}``).

The release stays the runner's one release (``teardown.release``, in its ``finally``); only
when that release itself raised as a whole does ``last_resort`` give everything back again, step
by step (each step may be repeated).
"""

from __future__ import annotations

import time

from ..diagnostics import warn
from .endings import Outcome, internal
from .state import Launched, RunState
from .teardown import release

KILL_WAIT_SECONDS = 2.0  # for the root to die of the last resort's kill (a SIGKILL is prompt)


def killed(run: RunState, launched: Launched | None, exc: BaseException) -> Outcome:
    """A phase raised: SIGKILL the whole container, collect the root (bounded), and report the
    runner's own failure."""
    try:
        if run.container is not None:
            run.container.kill_all()
        if launched is not None:
            child = launched.child
            deadline = time.monotonic() + KILL_WAIT_SECONDS
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
    except Exception as kill_exc:  # noqa: BLE001 - the release still follows
        warn(f"could not kill the run's tree after an internal error: {type(kill_exc).__name__}: {kill_exc}")
    return internal(f"{type(exc).__name__}: {exc}")


def last_resort(run: RunState, launched: Launched | None, exc: BaseException) -> Outcome:
    """The release raised: kill the tree and release everything again; the runner's failure."""
    outcome = killed(run, launched, exc)
    release(run, launched, outcome.ended())
    return outcome
