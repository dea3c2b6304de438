"""The caller's place, taken by what the service does for it. A run is carried under its
caller's umask: the umask is the whole service's, and the service carries the runs of every
thread of its caller (one loop, one thread), so each step of a run is taken under the umask its
request carried (``api.caller_env.umask_now``) and the service's own put back after it; the
files the step makes where the caller named them (a capture directory and its files, a stream)
and the child it starts (which inherits the umask) have the modes they would have under
``processkit-cli`` started by the caller then (what the service makes in its own scratch is made
with its own modes: ``scratch.run_directory``); the pumps between steps make no file. A batch's
or a benchmark's process carries one caller's work only, and takes its place whole (``take_place``)."""

from __future__ import annotations

import os

from ..api.caller_env import umask_now


def carried(steps, mask: int | None):
    """``steps`` themselves when there is nothing to carry (a request that carried no
    environment, or the caller's umask is the service's own: unchanged since it started the
    service, the common case, which pays no wrapper); else ``steps`` under ``mask``."""
    if mask is None or mask == _own():
        return steps
    return _under(steps, mask)


def strips_owner(mask: int | None) -> bool:
    """Whether the steps run under a umask (``mask``, or the service's own) that takes any of
    the owner's bits: the service's own files in its scratch, made by those steps, must then be
    made beforehand with their modes (``scratch.run_directory``, ``scratch.own_file``)."""
    return bool((_own() if mask is None else mask) & 0o700)


def _under(steps, mask: int):
    """``steps`` driven as ``yield from`` would, each resumption (a send, a throw, the close)
    under ``mask``."""
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


def take_place(cwd: str, env: dict, mask: int) -> None:
    """This process takes its caller's place at the call (a batch's or a benchmark's process,
    which carries that one caller's work and no other): its working directory, its environment
    and its umask, so its files and its runs' children are as under ``processkit-cli`` started
    by the caller then."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.umask(mask)


_OWN: list[int] = []


def _own() -> int:
    """The service's own umask, read once (as the caller reads its own: the service has one thread)."""
    if not _OWN:
        _OWN.append(umask_now())
    return _OWN[0]
