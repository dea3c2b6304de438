"""``processkit.start`` and ``attach``: a handle opened on a run (``handle.RunHandle``).

``start`` returns once the run's child has started or its run has ended, reading the run's
stream for it; a failure there (an interruption, no descriptor left to read the stream with)
ends the run through its release before it goes on. At the open-file limit it raises as
``subprocess.Popen`` does, EMFILE with no file named: the file it could not open is the
library's own (a directory of the path to the service's scratch stream), not the caller's.
"""

from __future__ import annotations

import errno
import os
import stat

from .. import bounded
from ..errors import Failure
from ..grammar.values import parse_run_id
from ..events.follow import HEAD_BYTES
from ..events.types import RunStarted
from . import control, service, wire
from .handle import RunHandle
from .launch import prepare
from .raised import raise_as_subprocess
from ..refusal import refused


def start(args, *, check: bool = False, echo: bool = False, **options) -> RunHandle:
    """Start ``args`` in this process's runner service and return once its child has started
    (the run_started event is written) or the run has already ended (a setup failure:
    ``wait()`` gives its 1xx result, and raises it under check=True). A program or working
    directory that cannot be used raises as ``subprocess.Popen`` does."""
    from .dask_task import current  # here: loaded by a process that runs, not by every import

    call = prepare(args, options, echo=echo, function="start", live=True)
    scratch = None
    if call.spec.jsonl == wire.SCRATCH_MEMORY:  # followed live: a file in the service's scratch directory
        call.spec = call.spec.replace(jsonl=wire.SCRATCH_FILE)
    earlier = _identity(call.spec.jsonl)  # an earlier run's stream there is read until the runner empties it
    connection, rid = call.send()
    if call.spec.jsonl == wire.SCRATCH_FILE:
        scratch = os.path.join(connection.scratch, wire.scratch_name(rid, ".jsonl"))
    handle = RunHandle(
        call.spec.run_id,
        scratch or call.spec.jsonl,
        call=call,
        connection=connection,
        rid=rid,
        scratch=scratch,
        check=check,
        earlier=earlier,
        task=current(),  # a Dask task's run: stopped once Dask lets that task go, where it waits
    )
    for name, file in call.stdio.files().items():  # Popen's stdin, stdout, stderr
        setattr(handle, name, file)
    events = handle.events()
    try:
        connection.interrupted(rid)  # held back as its request was written (``relay.written``)
        for event in events:
            if isinstance(event, RunStarted):
                handle._started(event)
                return handle
    except BaseException as exc:  # interrupted while waiting for the start: the run ends through its release
        connection.signal(rid, "sigterm")
        try:
            handle._finish(None, warn=False)  # no result handed over: nothing said over the interruption
        except service.ServiceGone:
            pass
        finally:  # the exception's traceback holds this frame, and so the handle, for as long as it lives
            handle._close_files()
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            raise OSError(exc.errno, exc.strerror) from None  # as Popen's: no file of the library's named
        raise
    finally:
        events.close()
    try:
        raise_as_subprocess(handle._finish(None), call.spec, call.waits)
        if check:
            handle.wait()
    except BaseException:  # raised as Popen's (or check's): the handle is nobody's, nor are its files
        handle._close_files()
        raise
    return handle


def _identity(path: str) -> tuple[int, int, bytes] | None:
    """(st_dev, st_ino) of the regular file at ``path`` now and its first bytes (``Follower``'s
    ``previous``: an earlier run's stream, of this run's id too, is told from this run's by
    them), None when there is none."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(found.st_mode):
        return None

    def the_one_stat_saw(name: str, limits: bounded.Limits) -> int:
        fd = bounded.open_input(name, limits)  # non-blocking: a FIFO swapped in since is never waited on
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (found.st_dev, found.st_ino):
            os.close(fd)
            raise FileNotFoundError(errno.ENOENT, "replaced since its stat", name)
        return fd

    try:
        head = bounded.read_start(path, HEAD_BYTES, bounded.EARLIER_STREAM, the_one_stat_saw)
    except (OSError, bounded.InputError):  # unreadable (the follower says so), gone or replaced: its identity alone
        head = b""
    return (found.st_dev, found.st_ino, head)


def attach(run_id: str) -> RunHandle:
    """A handle on a live run of this host started elsewhere (another process, the CLI); raises
    ControlError when no live run has this id, ValueError for an id the CLI's ``--run-id``
    refuses, TypeError for one that is no string."""
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a string, not {type(run_id).__name__}")
    try:  # as the CLI's --run-id: an ESC in it was echoed raw in the ControlError's text
        parse_run_id(run_id, "run_id=")
    except Failure as failure:
        raise refused(failure.message) from None
    record = control.live_record(run_id)
    if record.jsonl is None:
        raise control.ControlError(f"run `{run_id}` names no JSONL stream", 103, "not_found")
    return RunHandle(run_id, record.jsonl, endpoint=record.endpoint, jsonl_held=record.jsonl_held)
