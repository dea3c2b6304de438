"""A Dask task on a worker: a chunk of the batch's jobs run with the batch engine in the worker's
process (``run_chunk``), and the stops and the halt its client sends there (``stop_chunks``,
``halt_chunks``, ``forget_stop``).
The client's side is ``fleet``.
"""

from __future__ import annotations

import os
import threading

from . import began
from ..summary_line import JobLine
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


def run_chunk(jobs: list[Job], settings: Settings, written_out: str) -> tuple[list[JobLine], list[str]]:
    """A task: these jobs, on this worker, with the batch engine; their lines (their files named
    under ``written_out``, ``--out`` as the user wrote it, while ``settings.out`` is where this
    worker opens them), and the ids of those an earlier run of this task had begun (Dask ran it
    again: ``_say_rerun``)."""
    label = settings.label
    read_end, write_end = os.pipe()
    with _lock:
        source = _stopped.get(label)
        if source is None:
            _running.setdefault(label, set()).add(write_end)
    try:
        if source is not None:  # stopped or halted before this chunk began: none of its jobs starts
            return [not_started(job, 0, HALTED if source == HALTED else "cancelled") for job in jobs], []
        again = began.earlier(settings.out, label, jobs)  # before this run writes
        record = began.Record(settings.out, label, jobs, again)
        try:
            lines, _ = run_batch(
                jobs,
                settings,
                signals=False,
                write_summary=False,
                stop_fd=read_end,
                began=record.mark,
                halted=lambda: _stopped.get(label) == HALTED,
            )
        finally:
            record.close()
        if written_out != settings.out:
            _named_under(lines, settings.out, written_out)
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


def _named_under(lines: list[JobLine], out: str, written_out: str) -> None:
    """The lines' capture paths under ``written_out`` instead of ``out``, as one host names them."""
    within = os.path.join(out, "")
    for line in lines:
        for captured in (line.stdout, line.stderr):
            if captured is not None and captured.path is not None and captured.path.startswith(within):
                captured.path = os.path.join(written_out, captured.path[len(within) :])


def stop_chunks(label: str, source: str) -> None:
    """Run on each worker by the client: stop the batch ``label``'s chunks running in this process,
    and any that begins later."""
    with _lock:
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
