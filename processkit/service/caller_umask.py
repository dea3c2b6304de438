"""A run carried under its caller's umask. The umask is the whole service's, and the service
carries the runs of every thread of its caller (one loop, one thread): each step of a run is
taken under the umask its request carried (``api.caller_env.umask_now``) and the service's own
put back after it, so the files the step makes (the capture directory and files, the stream, the
layout record) and the child it starts (which inherits the umask) have the modes they would have
under ``processkit-cli`` started by the caller then; the pumps between steps make no file."""

from __future__ import annotations

import os

from ..api.caller_env import umask_now


def carried(steps, mask: int | None):
    """``steps`` driven as ``yield from`` would, each resumption (a send, a throw, the close)
    under ``mask``; ``steps`` itself when there is none (a request that carried no environment)
    or it is the service's own (the caller's umask unchanged since it started the service: the
    common case pays nothing)."""
    if mask is None or mask == _own():
        return (yield from steps)
    sent, raised = None, None
    while True:
        before = os.umask(mask)
        try:
            wait = steps.send(sent) if raised is None else steps.throw(raised)
        except StopIteration as end:
            return end.value
        finally:
            os.umask(before)
        try:
            sent, raised = (yield wait), None
        except GeneratorExit:
            before = os.umask(mask)
            try:
                steps.close()
            finally:
                os.umask(before)
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the run's steps, as yield from does
            sent, raised = None, exc


_OWN: list[int] = []


def _own() -> int:
    """The service's own umask, read once (as the caller reads its own: the service has one thread)."""
    if not _OWN:
        _OWN.append(umask_now())
    return _OWN[0]
