"""A run carried for a Dask task, on a worker's task thread: once Dask lets the task go (the client
that wanted it is gone: Ctrl-C, killed; the scheduler released it), the run stops as one whose
caller is gone, since Dask cannot stop a thread that runs and the run otherwise went on to its own
end or timeout for a result nobody takes. Used by ``processkit.run`` and a ``batch
--dask-scheduler`` chunk (``batching.chunk``). Dask is never imported here: a process that has
not imported ``distributed`` is no Dask worker."""

from __future__ import annotations

import sys

from ..signum import CALLER_GONE_SOURCE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .service import Connection

ASKED_EVERY_S = 1.0  # how often a run carried for a Dask task asks whether it is still wanted


def let_go() -> Callable[[], bool] | None:
    """On a Dask worker's task thread, what tells whether Dask let this task go (its key
    cancelled, or gone, on the worker); None anywhere else."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
        key = worker.get_current_task()
    except (ValueError, KeyError):  # no worker in this process, or not its task's thread
        return None

    state = getattr(worker, "state", None)  # an older distributed: no way to ask, so still wanted
    if state is None:
        return None

    def gone() -> bool:
        task = state.tasks.get(key)
        return task is None or task.state == "cancelled"

    return gone


def taken(connection: Connection, rid: int) -> tuple:
    """The run ``rid``'s reply; on a Dask task's thread asked for each ASKED_EVERY_S, the run stopped
    as a gone caller's (``CALLER_GONE_SOURCE``) once Dask let the task go, and its reply taken."""
    gone = let_go()
    if gone is None:
        report = connection.take(rid)
    else:
        while (report := connection.take(rid, ASKED_EVERY_S)) is None:
            if gone():
                connection.signal(rid, CALLER_GONE_SOURCE)
                report = connection.take(rid)
                break
    assert report is not None  # no timeout was given
    return report
