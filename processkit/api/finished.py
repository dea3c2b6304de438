"""A handle's run, finished: its RunResult built from the service's reply (a run of ``start``)
or from the stream and the registry (an ``attach``ed run), and kept once for every waiter.

Several threads may wait on one handle at once (as on ``Popen.wait``), and a signal handler may
wait in a thread that is already finishing it: each builds its result aside and the first to
settle it wins, under a re-entrant lock held for no wait, so every waiter returns that one result
and only its builder lets the request go and says what the run lost."""

from __future__ import annotations

import dataclasses
import os
import threading

from ..events.follow import read_all
from ..events.types import Event, RunStarted
from . import service
from .launch import Call
from .result import RunResult, build


class Settled:
    """The one result of a handle's run: ``result`` None until the first waiter ``settle``s it."""

    def __init__(self) -> None:
        self.result: RunResult | None = None
        self._lock = threading.RLock()  # re-entrant: a signal handler's wait in the settling thread

    def settle(self, result: RunResult) -> tuple[RunResult, bool]:
        """Keep ``result`` unless another waiter's is kept already: the kept one, and whether it is this one."""
        with self._lock:
            if self.result is None:
                self.result = result
                return result, True
            return self.result, False


def own(call: Call, report: dict, stopped_as: int | None, scratch: str | None) -> RunResult:
    """A started run's result from the service's reply: ``returncode`` is Popen's (-15, -9) when
    the handle's ``terminate`` or ``kill`` won, and ``jsonl`` None for a scratch stream (removed)."""
    result = call.result(report)
    if stopped_as is not None and result.source in ("control_cancel", "control_kill"):
        stopped = 15 if result.source == "control_cancel" else 9  # the stop that won
        result = dataclasses.replace(result, returncode=-stopped)
    if scratch is not None:
        result = dataclasses.replace(result, jsonl=None)
    return result


def attached(call: Call | None, code: int, run_id: str, jsonl: str, *, held: bool = False) -> RunResult:
    """An attached run's result from its stream, once its runner is gone with ``code``. A run
    whose ``--jsonl`` another run ``held`` has no stream: no events and no ``jsonl`` (that file's
    head may name this very run id, its events another run's)."""
    events = [] if held else read_all(jsonl, run_id=run_id)
    return build(argv(call, events), code, run_id, events, jsonl=None if held else jsonl, diagnostics="")


def argv(call: Call | None, events: list[Event] | None = None) -> list[str] | None:
    """The run's command: its call's, or (an attached run) its ``run_started`` event's."""
    if call is not None:
        return call.args
    started = next((e for e in events or () if isinstance(e, RunStarted)), None)
    command = started.command if started is not None and isinstance(started.command, dict) else {}
    return command.get("argv")


def forget(connection: service.Connection, rid: int | None, scratch: str | None) -> None:
    """The run's result was taken (or its handle dropped): no more replies, no scratch stream. A
    forked child's copy of the handle (dropped, or finalized as the child exits) leaves the stream
    to the process whose run it is."""
    if rid is not None:
        connection.forget(rid)
    if scratch is not None and connection.owner == os.getpid():
        try:
            os.unlink(scratch)
        except OSError:  # gone, or the older service's to remove (a caller that dropped from root since)
            pass
