"""A live run held by a handle (made by ``processkit.start`` and ``attach``: ``opened``).

A handle reads the run's events from its JSONL as they are written and acts on the run through
its control socket, the same plane ``processkit-cli inspect/cancel/kill`` use. A handle from
``start`` also holds the run's request to this process's runner service, whose reply is its
result (without ``jsonl`` the stream is a file in the service's scratch directory, removed once
the result is taken); one from ``attach`` knows the run only through the registry, so it can
address runs of this host only (the control plane is per host).
"""

from __future__ import annotations

import os
import subprocess
import time
import weakref
from collections.abc import AsyncIterator, Generator, Iterator

from ..containment.accounting import Usage
from ..events.types import Event, RunStarted
from . import control
from ..events.follow import Follower
from ..pathtrust import ForeignStream
from ..registry.records import no_stream_of_its_own
from ..text import escape_unsafe
from . import service
from .launch import Call
from .communicate import Exchange, exchanged
from .finished import Settled, argv, attached, forget, own
from .result import RunResult

POLL_FIRST = 0.001  # an own run is polled fast at first, backing off while nothing arrives
POLL_MOST = 0.02
ATTACHED_POLL = 0.05
ATTACHED_SETTLE = 0.5  # a runner unregisters just before writing runner_exit


class RunHandle:
    """A run that is (or was) live, shaped as ``subprocess.Popen``: ``args``, ``pid`` (the child's),
    ``send_signal``, ``terminate`` (a soft stop of the run's tree: ``returncode`` -15), ``kill``
    (its tree killed: -9), ``poll``, ``wait``, ``communicate``, ``returncode``, and ``stdin`` /
    ``stdout`` / ``stderr`` file objects for the streams given as PIPE. ``result()`` is the
    RunResult; ``events()`` yields every event from the first one, live; leaving a ``with``
    block cancels a run still going."""

    stdin = stdout = stderr = None  # Popen's file objects, for the streams given as PIPE

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
        earlier: tuple[int, int, bytes] | None = None,
        endpoint: str | None = None,
        task: tuple | None = None,
        jsonl_held: bool = False,
    ):
        self.run_id = run_id
        self.jsonl = jsonl
        self._endpoint = endpoint  # an attached run's control socket: its own, never a later run's of that id
        self._jsonl_held = jsonl_held  # an attached run's record says another run held its --jsonl (``Record.stream``)
        self._call = call
        self._connection = connection
        self._rid = rid
        self._check = check
        self._report: dict | None = None  # the service's reply, once the run ended
        self._settled = Settled()  # the result, kept once for every waiter
        self._unsaid: dict | None = None  # the reply whose warnings poll() left to wait/result/communicate
        self._root_pid: int | None = None
        self._pidfd: int | None = None  # the child's, opened once it started: a signal never reaches a reused pid
        self._stopped_as: int | None = None  # terminate() or kill() asked: the result's returncode is Popen's
        self._exchange: Exchange | None = None  # communicate()'s, kept across a timeout
        self._earlier = (
            earlier  # (st_dev, st_ino, first bytes) of start's jsonl= file before the run: its runner empties it
        )
        self._task = task  # the Dask task that started the run (``dask_task.current``): its waits stop it once let go
        # A handle holds its run's request (start) or watches the registry (attach).
        self._watch = None if connection is not None else control.run_id_watch(run_id, endpoint)
        if connection is not None:  # a handle dropped without wait(): its scratch stream still goes
            weakref.finalize(self, forget, connection, rid, scratch)
        self._scratch = scratch

    @property
    def _result(self) -> RunResult | None:
        return self._settled.result

    def __repr__(self) -> str:
        state = "finished" if self._result is not None else "live"
        return f"<RunHandle {self.run_id!r} {state}>"

    @property
    def args(self) -> list[str] | None:
        """As ``Popen.args``: the command the run runs, the list ``result().args`` holds (an attached
        run's is its stream's ``run_started`` argv once it ended: None while live, and always for a run
        started without ``--argv-raw``, whose stream redacts it)."""
        return self._result.args if self._result is not None else argv(self._call)

    @property
    def pid(self) -> int | None:
        """The child's pid, as ``Popen.pid`` (the run's root; None for a run that never started)."""
        return self._root_pid

    @property
    def runner_pid(self) -> int | None:
        """The process carrying the run: this process's runner service (None for an attached run)."""
        return self._connection.pid if self._connection is not None else None

    @property
    def returncode(self) -> int | None:
        """As ``Popen.returncode``: None until ``poll``, ``wait`` or ``result`` saw the run end."""
        return self._result.returncode if self._result is not None else None

    def _started(self, event: RunStarted) -> None:
        """The child is running: its pid, and a pidfd so that ``send_signal`` reaches it alone."""
        self._root_pid = pid = event.root_pid
        try:
            self._pidfd = os.pidfd_open(pid) if pid is not None else None
        except OSError:  # gone already, or no pidfds here: send_signal goes by pid while the run lives
            return
        if self._pidfd is not None:
            weakref.finalize(self, os.close, self._pidfd)

    # -- events -----------------------------------------------------------------------------
    def _follower(self) -> Follower:
        settle = 0 if self._connection is not None else ATTACHED_SETTLE
        return Follower(self.jsonl, self._ended, settle=settle, run_id=self.run_id, previous=self._earlier)

    def events(self) -> Generator[Event, None, None]:
        """Every event of the run, from its first, as its runner writes them, to ``runner_exit`` or the runner's end."""
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
        if self._jsonl_held:  # the file's head may name this run id: the other run's events, never this one's
            raise ForeignStream(escape_unsafe(f"run `{self.run_id}`: {no_stream_of_its_own(self.jsonl)}"))
        follower = self._follower()
        pause = POLL_FIRST
        try:
            while True:
                try:
                    batch = follower.read_events()
                except ForeignStream:  # another run's stream: ours never began if the run ended unstarted
                    if self._ended_unstarted():
                        return  # a setup failure (its file another run's): nothing of it to follow
                    raise
                if follower.done:
                    yield batch, 0
                    return
                pause = POLL_FIRST if batch else min(pause * 2, self._most_pause())
                yield batch, pause
        finally:
            follower.close()

    def _ended_unstarted(self) -> bool:
        """Whether the service's reply is in and says the run's child never started (a setup or
        spawn failure, as a ``jsonl=`` another live run writes): a stream refused as another
        run's then holds nothing of this run's, and the reply says why it ended."""
        return (
            self._connection is not None and (report := self._reply(0)) is not None and report.get("started_ns") is None
        )

    def _most_pause(self) -> float:
        return POLL_MOST if self._connection is not None else ATTACHED_POLL

    # -- the control plane -----------------------------------------------------------------
    def _mine(self, record) -> bool:
        """Whether a live registry record of this run id is this handle's run: the control plane
        goes by id, and a run given the same id once this one ended (another thread's, another
        process's) is not it. ``_live`` refuses a handle whose run is known to have ended; this
        covers the moment between its run's end and the handle's knowing it: a started run is
        known by its stream (a later run of that id may share it), an attached run by the
        endpoint it had when attached (each run's is fresh)."""
        if self._endpoint is not None:
            return record.endpoint == self._endpoint
        return record.stream == os.path.normpath(self.jsonl)  # absolute: a record's is normalized; never a held one's

    def _live(self, verb: str):
        """``_mine``, once this handle's own run is not known to have ended: a run that ended is
        refused (103) before the registry is read, for a later run given the same id may have
        the same stream too (a job rerun under a fixed id and log file)."""
        if self.poll() is not None:
            raise control.ended(self.run_id, verb)
        return self._mine

    def inspect(self) -> dict:
        """The run's live snapshot: mechanism, root pid, members."""
        return control.inspect(self.run_id, self._live("inspect"))

    def usage(self) -> Usage:
        """The live run's accounting so far: every figure, and the counter each came from."""
        return Usage.from_json(control.usage(self.run_id, self._live("usage")))

    def cancel(self) -> dict:
        """Stop the run gracefully (SIGTERM to the tree, grace, then kill); it ends with 108."""
        return control.stop(self.run_id, "cancel", self._live("cancel"))

    def send_signal(self, signal: int) -> None:
        """As ``Popen.send_signal``: ``signal`` to the child (the run's root) while it runs."""
        if self._root_pid is None or self.poll() is not None:
            return
        import signal as signals

        try:
            if self._pidfd is not None:
                signals.pidfd_send_signal(self._pidfd, signal)
            else:  # a kernel without pidfds: by pid while the run goes on, as Popen does
                os.kill(self._root_pid, signal)
        except ProcessLookupError:  # it exited since: as Popen, nothing to signal
            pass

    def terminate(self) -> None:
        """As ``Popen.terminate``, for the run's whole tree: a soft stop (SIGTERM to every member,
        the grace period, then a kill); the result's ``returncode`` is -15 (``exit_code`` 108)."""
        self._stop("cancel", 15)

    def kill(self) -> None:
        """As ``Popen.kill``, for the run's whole tree: every member killed; the result's
        ``returncode`` is -9 (``exit_code`` 109)."""
        self._stop("kill", 9)

    def _stop(self, verb: str, number: int) -> None:
        if self.poll() is not None:
            return
        self._stopped_as = self._stopped_as or number
        try:
            control.stop(self.run_id, verb, self._mine)
        except control.ControlError:
            if self.poll() is None:  # not ended since: the control plane failed
                raise

    # -- the end ----------------------------------------------------------------------------
    def poll(self) -> int | None:
        """As ``Popen.poll``: the returncode if the run has ended, else None. It never raises a
        warning (``-W error``): what the run lost is said by the next wait, result or communicate."""
        if self._result is None and self._ended():
            self._finish(None, warn=False)
        return self.returncode

    def _ended(self) -> bool:
        if self._connection is not None:
            return self._reply(0) is not None
        assert self._watch is not None  # no request: an attached handle
        return control.watch_done(self._watch)

    def _reply(self, timeout: float | None) -> dict | None:
        """The service's reply to this run, waiting up to ``timeout`` seconds for it. Several
        threads may wait at once (as on ``Popen.wait``): the reply stays filed for each of them
        until the first one done lets the request go, having kept the reply here first."""
        if self._report is None:
            assert self._connection is not None and self._rid is not None
            from .dask_task import taken_within  # here: loaded by a process that runs, not by every import

            # Stopped once its task is let go; None too once another thread took the reply (kept here).
            found = taken_within(self._connection, self._rid, timeout, self._task, keep=True)
            if found is not None:
                self._report = found[2]
        return self._report

    def wait(self, timeout: float | None = None) -> int:
        """As ``Popen.wait``: the returncode once the run has ended; raises
        subprocess.TimeoutExpired after ``timeout`` seconds (the run goes on), and RunError on a
        non-zero code under check=True."""
        return self.result(timeout).returncode

    def result(self, timeout: float | None = None) -> RunResult:
        """The run's RunResult once it has ended, as ``wait`` waits for it."""
        result = self._finish(timeout)
        if self._check:
            result.check_returncode()
        return result

    async def wait_async(self, timeout: float | None = None) -> int:
        """``wait`` for asyncio: waits on the event loop, never blocks it."""
        import asyncio

        started = time.monotonic()
        pause = POLL_FIRST
        while self._result is None and not self._ended():
            self._check_timeout(started, timeout)
            pause = min(pause * 2, self._most_pause())
            await asyncio.sleep(pause)
        return self.wait()

    def communicate(self, input=None, timeout: float | None = None) -> tuple:
        """As ``Popen.communicate``: ``input`` written to the stdin pipe (``stdin=PIPE``), the
        stdout and stderr pipes read to their end, the run waited for; ``(stdout, stderr)``,
        each None unless its stream is a PIPE. TimeoutExpired after ``timeout`` seconds keeps
        what was exchanged; call again to go on (``communicate.exchanged``)."""
        return exchanged(self, input, timeout)

    def _finish(self, timeout: float | None, warn: bool = True) -> RunResult:
        if self._result is not None:
            if not warn or self._unsaid is None:
                return self._result
            assert self._call is not None  # a reply left unsaid comes with its call
            unsaid, self._unsaid = self._unsaid, None
            return self._call.warned(unsaid, self._result)
        if self._connection is not None:
            assert self._call is not None  # a request comes with its checked call
            report = self._reply(timeout)
            if report is None:
                raise subprocess.TimeoutExpired(self._call.args, timeout)  # type: ignore[arg-type]
            result, mine = self._settled.settle(own(self._call, report, self._stopped_as, self._scratch))
            if not mine:  # another waiter's, kept first: it lets the request go and says what was lost
                return result
            forget(self._connection, self._rid, self._scratch)
            if not warn:
                self._unsaid = report  # said by the next call that waits
                return result
            return self._call.warned(report, result)  # kept, let go first
        watch = self._watch
        assert watch is not None  # no runner process: an attached handle
        started = time.monotonic()
        while not control.watch_done(watch):
            self._check_timeout(started, timeout)
            time.sleep(ATTACHED_POLL)
        code = control.ended_code(watch, self.jsonl)  # waits briefly for the runner_exit line itself
        return self._settled.settle(attached(self._call, code, self.run_id, self.jsonl, held=self._jsonl_held))[0]

    def _check_timeout(self, started: float, timeout: float | None) -> None:
        """Raise subprocess.TimeoutExpired once ``timeout`` seconds have passed since ``started``."""
        if timeout is not None and time.monotonic() - started >= timeout:
            # cmd is None for an attached run (its command is unknown until its stream is read).
            raise subprocess.TimeoutExpired(argv(self._call), timeout)  # type: ignore[arg-type]

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
        self._close_files()  # as Popen's, before the wait
        self.close()

    def _close_files(self) -> None:
        """Popen's file objects closed (a start that failed: held by its exception's traceback)."""
        for file in (self.stdout, self.stderr, self.stdin):
            if file is not None:
                try:
                    file.close()
                except BrokenPipeError:
                    pass
