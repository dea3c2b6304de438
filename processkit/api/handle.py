"""``processkit.start``, ``attach`` and ``runs``: a live run held by a handle.

A handle reads the run's events from its JSONL as they are written and acts on the run through
its control socket, the same plane ``processkit-cli inspect/cancel/kill`` use. A handle from
``start`` also holds the run's request to this process's runner service, whose reply is its
result (without ``jsonl`` the stream is a file in the service's scratch directory, removed once
the result is taken); one from ``attach`` knows the run only through the registry, so it can
address runs of this host only (the control plane is per host).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
import weakref
from collections.abc import AsyncIterator, Generator, Iterator

from ..containment.accounting import Usage
from ..events.types import Event, RunStarted
from . import control
from ..events.follow import Follower, read_all
from . import service, wire
from .launch import Call, prepare
from .result import RunResult, build, raise_as_subprocess

POLL_FIRST = 0.001  # an own run is polled fast at first, backing off while nothing arrives
POLL_MOST = 0.02
ATTACHED_POLL = 0.05
ATTACHED_SETTLE = 0.5  # a runner unregisters just before writing runner_exit


class RunHandle:
    """A run that is (or was) live. ``events()`` yields every event from the first one, live;
    ``wait()`` returns the RunResult; leaving a ``with`` block cancels a run still going."""

    def __init__(
        self,
        run_id: str,
        jsonl: str,
        *,
        call: Call | None = None,
        connection: service.Connection | None = None,
        rid: int | None = None,
        scratch: str | None = None,
        check: bool = False,
    ):
        self.run_id = run_id
        self.jsonl = jsonl
        self._call = call
        self._connection = connection
        self._rid = rid
        self._check = check
        self._report: dict | None = None  # the service's reply, once the run ended
        self._result: RunResult | None = None
        # A handle holds its run's request (start) or watches the registry (attach).
        self._watch = None if connection is not None else control.run_id_watch(run_id)
        if connection is not None:  # a handle dropped without wait(): its scratch stream still goes
            weakref.finalize(self, _forget, connection, rid, scratch)
        self._scratch = scratch

    def __repr__(self) -> str:
        state = "finished" if self._result is not None else "live"
        return f"<RunHandle {self.run_id!r} {state}>"

    @property
    def pid(self) -> int | None:
        """The process carrying the run: this process's runner service (None for an attached run)."""
        return self._connection.pid if self._connection is not None else None

    # -- events -----------------------------------------------------------------------------
    def _follower(self) -> Follower:
        return Follower(self.jsonl, self._ended, settle=0 if self._connection is not None else ATTACHED_SETTLE)

    def events(self) -> Generator[Event, None, None]:
        """Every event of the run, from its first, as the runner writes them; ends after
        ``runner_exit`` or once the runner is gone."""
        for batch, pause in self._batches():
            yield from batch
            time.sleep(pause)

    async def aevents(self) -> AsyncIterator[Event]:
        """``events()`` as an async iterator: waits on the event loop, never blocks it."""
        import asyncio

        for batch, pause in self._batches():
            for event in batch:
                yield event
            await asyncio.sleep(pause)

    def _batches(self) -> Iterator[tuple[list[Event], float]]:
        """The stream in batches, each with how long to pause before asking for the next; the
        caller does the pausing, its own way. A finished run whose scratch stream is gone is
        replayed from its result."""
        if self._result is not None and self._result.jsonl is None:
            yield self._result.events, 0
            return
        follower = self._follower()
        pause = POLL_FIRST
        try:
            while True:
                batch = follower.read_events()
                if follower.done:
                    yield batch, 0
                    return
                pause = POLL_FIRST if batch else min(pause * 2, self._most_pause())
                yield batch, pause
        finally:
            follower.close()

    def _most_pause(self) -> float:
        return POLL_MOST if self._connection is not None else ATTACHED_POLL

    # -- the control plane -----------------------------------------------------------------
    def inspect(self) -> dict:
        """The run's live snapshot: mechanism, root pid, members."""
        return control.inspect(self.run_id)

    def usage(self) -> Usage:
        """The live run's accounting so far: every figure, and the counter each came from."""
        return Usage.from_json(control.usage(self.run_id))

    def cancel(self) -> dict:
        """Stop the run gracefully (SIGTERM to the tree, grace, then kill); it ends with 108."""
        return control.stop(self.run_id, "cancel")

    def kill(self) -> dict:
        """Hard-kill the run's tree; it ends with 109."""
        return control.stop(self.run_id, "kill")

    # -- the end ----------------------------------------------------------------------------
    def poll(self) -> RunResult | None:
        """The result if the run has ended, else None."""
        if self._result is None and self._ended():
            return self.wait()
        return self._result

    def _ended(self) -> bool:
        if self._connection is not None:
            return self._reply(0) is not None
        assert self._watch is not None  # no request: an attached handle
        return control.watch_done(self._watch)

    def _reply(self, timeout: float | None) -> dict | None:
        """The service's reply to this run, waiting up to ``timeout`` seconds for it."""
        if self._report is None:
            assert self._connection is not None and self._rid is not None
            found = self._connection.take(self._rid, timeout)
            if found is not None:
                self._report = found[2]
        return self._report

    def wait(self, timeout: float | None = None) -> RunResult:
        """The run's result once it has ended; raises subprocess.TimeoutExpired after
        ``timeout`` seconds (the run goes on), and RunError on a non-zero code under check=True."""
        result = self._finish(timeout)
        if self._check:
            result.check_returncode()
        return result

    async def wait_async(self, timeout: float | None = None) -> RunResult:
        import asyncio

        started = time.monotonic()
        pause = POLL_FIRST
        while self._result is None and not self._ended():
            self._check_timeout(started, timeout)
            pause = min(pause * 2, self._most_pause())
            await asyncio.sleep(pause)
        return self.wait()

    def _finish(self, timeout: float | None) -> RunResult:
        if self._result is not None:
            return self._result
        if self._connection is not None:
            assert self._call is not None  # a request comes with its checked call
            report = self._reply(timeout)
            if report is None:
                raise subprocess.TimeoutExpired(self._call.args, timeout)  # type: ignore[arg-type]
            self._result = self._call.result(report)
            if self._scratch is not None:
                self._result = dataclasses.replace(self._result, jsonl=None)
            _forget(self._connection, self._rid, self._scratch)
            return self._result
        watch = self._watch
        assert watch is not None  # no runner process: an attached handle
        started = time.monotonic()
        while not control.watch_done(watch):
            self._check_timeout(started, timeout)
            time.sleep(ATTACHED_POLL)
        outcome = watch.report()  # waits briefly for the runner_exit line itself
        events = read_all(self.jsonl)
        self._result = build(self._args(events), outcome["code"], self.run_id, events, jsonl=self.jsonl, diagnostics="")
        return self._result

    def _check_timeout(self, started: float, timeout: float | None) -> None:
        """Raise subprocess.TimeoutExpired once ``timeout`` seconds have passed since ``started``."""
        if timeout is not None and time.monotonic() - started >= timeout:
            # cmd is None for an attached run (its command is unknown until its stream is read).
            raise subprocess.TimeoutExpired(self._args(), timeout)  # type: ignore[arg-type]

    def _args(self, events: list[Event] | None = None) -> list[str] | None:
        if self._call is not None:
            return self._call.args
        started = next((e for e in events or () if isinstance(e, RunStarted)), None)
        command = started.command if started is not None and isinstance(started.command, dict) else {}
        return command.get("argv")

    def close(self) -> RunResult:
        """Cancel the run if it is still going and wait for its end (no check)."""
        if self._result is None and not self._ended():
            try:
                self.cancel()
            except control.ControlError:
                if self._connection is None:
                    raise
                assert self._rid is not None
                self._connection.signal(self._rid, "sigterm")  # no control plane: as a stop signal
        return self._finish(None)

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _forget(connection: service.Connection, rid: int | None, scratch: str | None) -> None:
    """The run's result was taken (or its handle dropped): no more replies, no scratch stream."""
    if rid is not None:
        connection.forget(rid)
    if scratch is not None:
        try:
            os.unlink(scratch)
        except FileNotFoundError:
            pass


def start(args, *, check: bool = False, echo: bool = False, **options) -> RunHandle:
    """Start ``args`` in this process's runner service and return once its child has started
    (the run_started event is written) or the run has already ended (a setup failure:
    ``wait()`` gives its 1xx result, and raises it under check=True). A program or working
    directory that cannot be used raises as ``subprocess.Popen`` does."""
    call = prepare(args, options, echo=echo, function="start")
    scratch = None
    if call.spec.jsonl == wire.SCRATCH_MEMORY:  # followed live: a file in the service's scratch directory
        call.spec = call.spec.replace(jsonl=wire.SCRATCH_FILE)
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
    )
    events = handle.events()
    try:
        for event in events:
            if isinstance(event, RunStarted):
                return handle
    except BaseException:  # interrupted while waiting for the start: the run ends through its release
        connection.signal(rid, "sigterm")
        try:
            handle._finish(None)
        except service.ServiceGone:
            pass
        raise
    finally:
        events.close()
    raise_as_subprocess(handle._finish(None), call.spec)
    if check:
        handle.wait()
    return handle


def attach(run_id: str) -> RunHandle:
    """A handle on a live run of this host started elsewhere (another process, the CLI); raises
    ControlError when no live run has this id."""
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a string, not {type(run_id).__name__}")
    record = control.live_record(run_id)
    if record.jsonl is None:
        raise control.ControlError(f"run '{run_id}' names no JSONL stream", 103, "not_found")
    return RunHandle(run_id, record.jsonl)


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """One registry record, as ``processkit-cli list --json`` shows it."""

    run_id: str
    health: str
    started_at: str
    hint: str | None
    argv_sha256: str | None
    labels: dict
    jsonl: str | None
    capture_dir: str | None
    endpoint: str | None


def runs(labels: dict | None = None) -> list[RunInfo]:
    """The runs this user's registry holds (live, stale or unprobed), optionally only those
    carrying every one of ``labels``."""
    wanted = dict(labels or {})
    found = []
    for record, health in control.entries():
        if record.matches(wanted):
            fields = {
                key: value for key, value in record._asdict().items() if key not in ("lock_file", "batch_records")
            }
            found.append(RunInfo(health=health, **fields))
    return found
