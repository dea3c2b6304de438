"""Releasing whatever a run has made, whichever phase it reached: the release of a setup that
failed, and the last resort when a phase raised where it should not (a bug, an fd limit).

Every step stands alone and may be repeated: a failure in one must not keep the others from
running, and the last resort may follow a release that was itself cut short. So each resource
is closed through an idempotent ``close``/``release`` or is forgotten as it is closed.
"""

from __future__ import annotations

import os
import time

from ..diagnostics import warn
from ..errors import Failure, Kind
from ..events.types import RunnerExit
from .endings import Outcome
from .state import RunState
from .teardown import close_targets

KILL_WAIT_SECONDS = 2.0  # for the root to die of the last resort's kill (a SIGKILL is prompt)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def release_all(run: RunState, ended: tuple[int, str, int | None]) -> None:
    """Give back everything ``run`` holds, each step on its own; a step that fails is warned
    about (once, the first) and the rest still run. ``ended`` is the ``runner_exit`` to come
    (code, source, child_code), which the registration keeps as the run's tombstone."""
    steps: list[Callable[[], object]] = [
        *_step(run.keyboard, "restore"),
        *_step(run.stdin_feed, "close"),
        lambda: _close_stdin_source(run),
        *[step for stream in run.streams for step in (stream.close, *_step(stream.echo, "close"))],
        *_step(run.terminal, "close"),
        *_step(run.foreground, "restore"),
        lambda: close_targets(run),
        *_step(run.signals, "close"),
        *_step(run.publication, "close", ended),
        *_step(run.container, "release"),
        *_step(run.rundir, "close"),  # last: it is the evidence for everything above
    ]
    failed: list[BaseException] = []
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - one step's failure must not keep the rest
            failed.append(exc)
    if failed:
        warn(f"the run's release was incomplete: {type(failed[0]).__name__}: {failed[0]}")


def _step(holder: object | None, method: str, *args: object) -> list[Callable[[], object]]:
    """``holder.method(*args)`` as a release step, when the run holds ``holder`` at all."""
    if holder is None:
        return []
    bound = getattr(holder, method)
    return [lambda: bound(*args)]


def _close_stdin_source(run: RunState) -> None:
    source, run.stdin_source = run.stdin_source, None
    if source is not None:
        os.close(source)


def last_resort(run: RunState, exc: BaseException) -> Outcome:
    """A phase raised: kill the tree, release what exists, and end the stream with
    ``runner_exit{internal, 104}`` (nothing else was written after it: it is always last)."""
    failure = Failure(Kind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
    _kill_tree(run)
    release_all(run, (failure.code, failure.kind.label, None))
    run.events.emit(RunnerExit(code=failure.code, source=failure.kind.label, child_code=None))
    return Outcome(failure.code, failure)


def _kill_tree(run: RunState) -> None:
    """SIGKILL the whole container, then collect the root (bounded: a SIGKILL is prompt)."""
    try:
        if run.container is not None:
            run.container.kill_all()
        child = run.child
        if child is not None:
            deadline = time.monotonic() + KILL_WAIT_SECONDS
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
    except Exception as exc:  # noqa: BLE001 - the release still follows
        warn(f"could not kill the run's tree after an internal error: {type(exc).__name__}: {exc}")
