"""A Dask task on a worker: a chunk of the batch's jobs run with the batch engine in the worker's
process (``run_chunk``), the stops its client sends there (``stop_chunks``, ``forget_stop``),
and the halt (``halt_chunks``) that the failing chunk or the client sends.
The client's side is ``fleet``.

``--halt-on-failure``: the first failure, whichever chunk records it (the chunk's own recorder,
``_tell_from_chunk``, handing it to the worker's event loop so that the chunk's own loop never
waits on the scheduler; or the client, ``tell_halted``, for a task that failed as a whole), sets
the batch's Dask ``Event`` on the scheduler, which a chunk asks as it begins (so a worker
restarted or joined since, whose process never heard, starts none of its jobs), and tells every
worker there now (``halt_chunks``), whose running chunks start no other job.
"""

from __future__ import annotations

import os
import threading

from . import began
from ..api import dask_task
from ..diagnostics import warn
from ..signum import CALLER_GONE_SOURCE
from ..summary_line import JobLine
from ..text import first_named, plural
from .dask_client import said
from .ended import not_back
from .job_lines import not_started
from .manifest import Job
from .on_host import Settings, run_batch

# In a worker's process: the batches a client stopped (label -> the stop's source, or HALTED for
# one ``--halt-on-failure`` halted: no job of it starts, the running ones finish), and the stop
# pipes of the chunks running now. The lock keeps a pipe from being written once it is closed.
# A long-lived worker serves batch after batch: a label leaves ``_running`` with its last chunk,
# and ``_stopped`` when its client is done with it (``forget_stop``), and keeps at most
# STOPS_KEPT labels in any case (the oldest go first: a client that vanished never says).
_stopped: dict[str, str] = {}
_running: dict[str, set[int]] = {}
_lock = threading.Lock()
STOPS_KEPT = 256
HALTED = "halted"
HALT_TOLD_S = 30  # how long the workers' answers to the halt are waited for, outside a stop
EARLIER_RUN_LOST = "an earlier run of its Dask task began it and never came back (its worker lost or retired)"


def run_chunk(
    jobs: list[Job], settings: Settings, written_out: str, fresh_out: bool
) -> tuple[list[JobLine], list[str]]:
    """A task: these jobs, on this worker, with the batch engine; their lines (their files named
    under ``written_out``, ``--out`` as the user wrote it, while ``settings.out`` is where this
    worker opens them), and the ids of those an earlier run of this task had begun (Dask ran it
    again: ``began.say_rerun``). ``fresh_out``: ``--out`` was empty when the client made it (its
    summary is there by now), so a job's first attempt has no earlier batch's attempts to drop,
    unless this is a run again of the task (its earlier run's are there)."""
    label = settings.label
    if (
        settings.halt_on_failure and _stopped.get(label) != HALTED and _halted_before(label)
    ):  # halted before this process heard
        halt_chunks(label)
    read_end, write_end = os.pipe()
    with _lock:
        source = _stopped.get(label)
        if source is None:
            _running.setdefault(label, set()).add(write_end)
    try:
        again = began.earlier(settings.out, label, jobs)  # before this run writes
        if source is not None:  # stopped or halted before this chunk began: none of its jobs starts
            reason = HALTED if source == HALTED else "cancelled"
            # a run again: the jobs its earlier run ended as they ended (its result lost on the way
            # back), those it began and never ended task_failed (its worker lost: they ran)
            lines = not_back(jobs, settings.out, label, EARLIER_RUN_LOST, lambda job: not_started(job, 0, reason))
        else:
            record = began.Record(settings.out, label, jobs, again)
            try:
                lines, _ = run_batch(
                    jobs,
                    settings,
                    _on_recorded(label, record, settings.halt_on_failure),
                    signals=False,
                    write_summary=False,
                    stop_fd=read_end,
                    on_tick=dask_task.once_let_go(lambda: _gone(label, write_end)),
                    began=record.mark,
                    halted=lambda: _stopped.get(label) == HALTED,
                    fresh_out=fresh_out and not again,
                )
            finally:
                record.close()
        named_under(lines, settings.out, written_out)
        return lines, again
    finally:
        with _lock:
            ends = _running.get(label)
            if ends is not None:
                ends.discard(write_end)
                if not ends:
                    del _running[label]
        os.close(write_end)
        os.close(read_end)


def _gone(label: str, write_end: int) -> None:
    """The chunk's stop written as a gone caller's (``CALLER_GONE_SOURCE``), once Dask let its task
    go (``dask_task.once_let_go``, asked by ``run_batch``'s ``on_tick`` each second: the client
    that wanted it is gone, and Dask cannot stop a thread), unless its client already stopped the
    batch."""
    with _lock:  # a stop its client sent is not written over
        if _stopped.get(label, HALTED) == HALTED:
            os.write(write_end, CALLER_GONE_SOURCE.encode())


def named_under(lines: list[JobLine], out: str, written_out: str) -> None:
    """The lines' capture paths, and the paths their messages name, under ``written_out`` instead
    of ``out``, as one host names them."""
    if written_out == out:
        return
    within = os.path.join(out, "")
    for line in lines:
        if line.message is not None:
            line.message = line.message.replace(within, os.path.join(written_out, ""))
        for captured in (line.stdout, line.stderr):
            if captured is not None and captured.path is not None and captured.path.startswith(within):
                captured.path = os.path.join(written_out, captured.path[len(within) :])


def _event(label: str, client=None):
    """The batch ``label``'s halt, kept on the scheduler (a worker's process may be newer than it)."""
    import distributed

    return distributed.Event(_event_name(label), client or distributed.get_client())


def _event_name(label: str) -> str:
    return f"processkit-halted-{label}"


def _halted_before(label: str) -> bool:
    """The batch ``label`` halted, as the scheduler says. Best effort, as the telling is: a
    scheduler that cannot answer (or a ``distributed`` without ``Event``) leaves the chunk to run,
    said once in this process, rather than fail every job of its task."""
    try:
        return bool(_event(label).is_set())
    except Exception as exc:  # noqa: BLE001 - the halt told to the workers still holds
        if not _unasked:
            _unasked.append(True)
            warn(f"a Dask task could not ask the scheduler whether its batch halted: {said(exc)}")
        return False


_unasked: list[bool] = []  # this process said once that the scheduler could not be asked


def tell_halted(client, label: str, within_s: float) -> list[str]:
    """The batch ``label`` halted: said on the scheduler for the chunks that begin later, and to
    every worker there now for those running, all within ``within_s`` (``told``); the workers not
    told. The client's way."""
    return client.sync(_telling_halt, client, label, within_s)


def _telling_halt(client, label: str, within_s: float):
    """``tell_halted`` on ``client``'s event loop (the client's, or a worker's: ``_tell_from_chunk``)."""
    return _telling(
        client, halt_chunks, (label,), within_s, lambda: client.scheduler.event_set(name=_event_name(label))
    )


def tell_stopped(client, label: str, source: str, within_s: float, heard: set[str] | None = None) -> list[str]:
    """The batch ``label`` stopped by ``source``: every worker told (``stop_chunks``) within
    ``within_s`` (``told``); the workers not told (``heard`` takes those that were). The client's way."""
    return told(client, stop_chunks, (label, source), within_s, heard=heard)


def told(client, function, args: tuple, within_s: float, first=None, heard: set[str] | None = None) -> list[str]:
    """``function(*args)`` run on every worker the scheduler has (after the scheduler's own call
    ``first``, if given), each worker told on its own and all at once, the whole waited for at
    most ``within_s``: the addresses of the workers that did not answer in time (died as they were
    told, not yet dropped by the scheduler; a stopped process) or failed, passed over where one
    held the client up 30 s or more, for ever while a stopped worker stayed stopped. A scheduler
    that does not answer in time raises ``asyncio.TimeoutError`` (Dask's: the builtin from
    Python 3.11 only); one gone raises as Dask says. ``heard``, where given, takes the addresses
    of the workers that answered."""
    return client.sync(_telling, client, function, args, within_s, first, heard)


async def _telling(client, function, args: tuple, within_s: float, first=None, heard=None) -> list[str]:
    """``told`` on ``client``'s event loop."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    if first is not None:
        await asyncio.wait_for(first(), within_s)
    known = await asyncio.wait_for(client.scheduler.identity(n_workers=-1), max(0.0, deadline - loop.time()))
    runs = {
        address: asyncio.ensure_future(
            client.run(function, *args, workers=[address], on_error="return", asynchronous=True)
        )
        for address in known.get("workers", {})
    }
    if runs:
        await asyncio.wait(runs.values(), timeout=max(0.0, deadline - loop.time()))
    for run in runs.values():
        run.cancel()  # those still out: nobody waits for them
    answered = {address for address, run in runs.items() if _answered(run, address)}
    if heard is not None:
        heard.update(answered)
    return sorted(runs.keys() - answered)


def untold_said(untold: list[str], what: str, within_s: float) -> str:
    """The one line naming the workers that did not answer ``what`` (the halt, the stop) within
    ``within_s``."""
    return f"{plural(len(untold), 'Dask worker')} did not answer {what} within {within_s:g} s: {first_named(untold)}"


def _answered(run, address: str) -> bool:
    """A worker's telling came back without an error."""
    if not run.done() or run.cancelled() or run.exception() is not None:
        return False
    answer = run.result().get(address, ValueError())
    return not isinstance(answer, Exception)


def forget_halt(client, label: str, within_s: float) -> None:
    """The batch ``label`` is over: its halt leaves the scheduler, waited for at most ``within_s``
    (best effort: a later batch has its own label)."""
    import asyncio

    async def clear() -> None:
        await asyncio.wait_for(client.scheduler.event_clear(name=_event_name(label)), within_s)

    try:
        client.sync(clear)
    except Exception as exc:  # noqa: BLE001 - the batch's results stand without it
        warn(f"the Dask scheduler was not told the halted batch is over: {said(exc)}")


def _on_recorded(label: str, record: began.Record, halting: bool):
    """What a chunk's recorder calls with each line: its OOM kill count kept on the task's record
    (``began.Record.ended``); under ``--halt-on-failure`` (``halting``), its first failure halts
    the whole batch from here, not once the client has this chunk back (its other jobs may run long)."""
    told: list[bool] = []

    def on_recorded(line: JobLine, counts: object) -> None:
        record.ended(line)
        if halting and line.failed and not told:
            told.append(True)
            halt_chunks(label)  # this process's chunks at once, without the scheduler
            try:
                _tell_from_chunk(label)
            except Exception as exc:  # noqa: BLE001 - the client tells them as this chunk comes back
                warn(f"the Dask workers were not told from here that the batch halted: {said(exc)}")

    return on_recorded


def _tell_from_chunk(label: str) -> None:
    """``tell_halted`` from a chunk, handed to the worker's own event loop and not waited for:
    the chunk's loop goes on enforcing its jobs' timeouts and draining their pipes while the
    scheduler and the workers are told (a round trip or two; longer if the scheduler is slow),
    within HALT_TOLD_S as the client's telling is: a worker that cannot answer (a stopped process)
    is named in one line in the worker's log, where it held the telling for as long as it stayed
    stopped. Where the chunk's start could not reach the scheduler, no client is made here (its
    connect would block this loop): the client tells them as this chunk comes back."""
    import distributed

    if _unasked:
        return
    client = distributed.get_client()

    async def tell() -> None:
        try:
            untold = await _telling_halt(client, label, HALT_TOLD_S)
        except Exception as exc:  # noqa: BLE001 - the client tells them as this chunk comes back
            warn(f"the Dask workers were not told from here that the batch halted: {said(exc)}")
            return
        if untold:
            warn(untold_said(untold, "the halt told from here", HALT_TOLD_S))

    loop = client.loop
    if loop is None:
        raise RuntimeError("the worker's Dask client has no event loop")
    loop.add_callback(tell)


def stop_chunks(label: str, source: str) -> None:
    """Run on each worker by the client: stop the batch ``label``'s chunks running in this process,
    and any that begins later. Told again (the client tells each second while it waits), nothing
    more is written."""
    with _lock:
        if _stopped.get(label) == source:
            return
        _note(label, source)
        for end in _running.get(label, ()):
            try:
                os.write(end, source.encode())
            except OSError:
                pass


def halt_chunks(label: str) -> None:
    """Run on each worker by the client once a failure halted the batch ``label``: its chunks
    here start no other job (their running ones finish), and one that begins later none. A stop
    already under way stands."""
    with _lock:
        if label not in _stopped:
            _note(label, HALTED)


def _note(label: str, source: str) -> None:
    """``label`` stopped by ``source`` (or HALTED), the newest of the STOPS_KEPT kept (under ``_lock``)."""
    _stopped.pop(label, None)
    _stopped[label] = source
    while len(_stopped) > STOPS_KEPT:
        del _stopped[next(iter(_stopped))]


def forget_stop(label: str) -> None:
    """Run on each worker by the client once the stopped batch ``label`` is over (its tasks
    cancelled or come back): no chunk of it is left to begin."""
    with _lock:
        _stopped.pop(label, None)
