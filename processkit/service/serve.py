"""The runner service: one process per calling process, carrying every run of that caller on
one lodged host (``engine.host``), as ``batch`` carries its jobs. ``api.shared`` starts it on first
use, ``api.service`` talks to it over a private socketpair (``api.wire``): a request is a RunSpec the
caller's keywords were parsed into, the reply the run's outcome and its events.

Facts about a service that must end with its caller:
- The caller's end of the socketpair is closed by the kernel when the caller's process ends,
  however it ends (SIGKILL included): the service reads its end of file. The caller's end is
  close-on-exec, and a fork of the caller closes its copy (``api.shared``), so no other process
  keeps it open.
- ``PR_SET_PDEATHSIG`` fires when the *thread* that started the service ends, which may be a
  worker thread of a caller that lives on; so its signal (SIGUSR1) only makes the service
  look, and it ends once its parent is no longer the caller. It is set first thing and
  ``getppid()`` checked after it, so a caller that died before the ``prctl`` is not missed; a
  caller outside the service's pid namespace reads as 0 there, so its socket's hang-up says.
- Ending with the caller, the service stops every run it carries as a hang-up would
  (``cancelled``, source ``sighup``), lets each release what it made, removes its scratch
  directory and gives back its lodging; no request still queued is started.
- A stop signal to the service (SIGINT from the terminal it shares with its caller, SIGTERM,
  SIGHUP) ends the runs in flight, as it ended each per-call runner before; the service goes on
  serving: the stop is not the host's for good (``Scheduler.stops_last``), so a call made
  after it runs (before, every later call of the process was cancelled, 107, without a start).
  A child of the caller's user can send such a signal (its parent is the service): it cancels
  the runs in flight of every thread, never a later one. The signals a program may send "its
  parent" that would end the service are dropped (``stray_signals.absorb``). The signal
  handlers, the subreaper flag and the reaping are the service's, so the calling interpreter
  gets none of them.
- Each run carries its own context (``request``): the caller's environment and umask as they
  were when the call was made (its child and the files at the paths it names take that umask,
  ``engine.callers_umask``), and its standard streams as descriptors of its own; the service's
  own ``os.environ``, umask and fds 0-2 are never rewritten per request (its umask is
  ``scratch.OWN_UMASK``, set at its start: its own files keep their modes whatever umask its
  first caller had), and every path the run names is made absolute by the caller, so the
  service works from ``/``.
- A run's failure is its own: what the service sets up for it (memfds, its scratch files) is
  inside the run's guard, and the runs are one group on the host (``engine.host.RunGroup``)
  whose ``failed`` makes a run that raised its caller's reply, so every other run goes on.
- Descriptors: the service raises its soft open-file limit to the hard one (its children get
  the caller's back) and admits a run only when its descriptors fit beside those open
  (``admission``: the runs admitted not begun yet counted): a call that does not fit fails
  alone with a one-line error naming the limit. A share of the limit is left for its pool's
  idle groups' files (``fdlimit.leave_room_for_idle_groups``), so a call reopens none of them.
- Between calls: once a call's reply is sent, the groups its run gave back are checked and
  started again (``containment.restart_idle``) while its caller reads the reply; the next
  call's take only looks that each is still empty.
"""

from __future__ import annotations

import collections
import os
import socket
import sys

from .. import fdlimit
from ..engine.endings import Outcome
from ..engine.host import Host, RunGroup
from ..engine.runloop import RunLoop
from ..engine.waits import Wait
from ..engine.runner import steps
from ..engine.signals import CALLER_GONE_SOURCE
from ..containment import prctl, restart_idle
from ..errors import Failure, Kind
from ..rundir import base, batch_base
from ..api import wire
from ..api.caller_env import CallerEnv
from . import inbound, scratch
from .admission import Admission
from .caller_socket import CallerSocket
from .own_process import made_own
from .request import REMEMBER, Request, cancelled, failed, own_failure
from .unreplied import reply_anyway

ORPHAN_POLL = 1.0  # seconds between looks at the parent-death signal's flag
CAPACITY = 1 << 20  # runs in flight: as many as the caller asks for (each holds its own descriptors)


class Service:
    def __init__(self, sock: socket.socket, caller: int) -> None:
        self.sock = sock
        self.caller = caller
        self.host = Host(watch=True)
        self.host.stops_last = False  # a stop signal ends the runs in flight; the caller's later calls run
        self.connection = CallerSocket(sock, self.host.loop, self.caller_gone)
        self.caller_env = CallerEnv()  # the caller's environment, umask, limits as run requests last sent them
        self.specs = inbound.Specs()  # the spec of the caller's last run request (the next may carry its changes)
        self.queue: collections.deque[Request] = collections.deque()
        self.requests: dict[int, Request] = {}  # rid -> a run queued or in flight
        self.carrying: dict[object, Request] = {}  # a run's generator -> its request, while in flight
        self.batches: dict[int, int] = {}  # pid of a batch's process -> its pidfd
        self.spare: list[int] = []  # empty memfds kept for the next runs (``request.Request.close``)
        self.closing = False
        self.orphaned: list[bool] = []  # PR_SET_PDEATHSIG's signal came: the parent may be gone
        self.idle_started = False
        self.idle_loop: RunLoop | None = None  # the idle wait's view of the loop (``_idle``)
        self.scratch, self.scratch_lock = scratch.make_in(list(dict.fromkeys([batch_base(), base()])))
        self.group = RunGroup(self.next_run, self.finished, CAPACITY, failed=self.raised)
        # Its open-file limit, read once (raised already by ``main``); a share of it is left for
        # its pool's idle groups' files, before the pool is made by the first run.
        self.admission = Admission(fdlimit.soft_limit())
        fdlimit.leave_room_for_idle_groups(self.admission.soft)
        # Its working directory (``/``, set by ``main``), read once for every run it carries, as
        # a batch reads its own: not a ``getcwd`` a call.
        try:
            self.cwd: str | None = os.getcwd()
        except OSError:
            self.cwd = None

    # -- the caller's frames (``caller_socket``: its end) ------------------------------------------
    def reply(self, message: tuple) -> None:
        if self.closing:
            return
        self.connection.send(message)

    def readable(self) -> None:
        messages = self.connection.receive()
        if messages is None:
            self.caller_gone()
            return
        for message, fds in messages:
            try:
                wrong = inbound.problem(message, self.requests)
                if wrong is None:
                    self._take(message, fds)
                    continue
                rid = inbound.answerable(message, self.requests)
                if rid in self.requests:  # held for its spec: given back with its answer
                    self._answer(self.requests[rid], failed(inbound.refusal(message, wrong)))
                elif rid is not None:
                    self.reply(("done", rid, failed(inbound.refusal(message, wrong))))
            except Exception as exc:  # noqa: BLE001 - this frame's own fault: its call fails alone
                self._unexpected(message, exc)
            finally:
                if fds:  # what its frame brought and it did not take: never another request's
                    wire.close_all(fds)

    def _unexpected(self, message: tuple, exc: Exception) -> None:
        """Taking a checked frame raised: its run request, not begun, fails alone with the service's
        own failure; a begun one's run, where the frame was its stop, ends as the runner's own
        failure, its tree killed, and its reply answers the stop (it used to be answered at once
        while the run went on unseen); another frame for a begun run gets no second reply; the
        connection and every other call go on."""
        rid, report = message[1], failed(fdlimit.unexpected(exc, "to take the call"))
        request = self.requests.get(rid)
        if request is not None and request.steps is None:
            if request in self.queue:
                self.queue.remove(request)
            self._answer(request, report)
        elif request is not None and message[0] == "signal":  # never answered before its run ends
            self.host.fail_carried(request.steps, exc)
        elif message[0] == "run":
            self.reply(("done", rid, report))

    def _take(self, message: tuple, fds: list[int]) -> None:
        """A checked frame (a run queued, a stop, a process started) takes what it names of ``fds``."""
        kind, rid = message[0], message[1]
        if kind == "run":
            extra = message[3]
            if extra.get("caller") is not None:  # a change, recorded now: never lost with its request
                self.caller_env = self.caller_env.updated(extra["caller"])
            spec = self.specs.read(rid, message[2], extra)  # read in the order sent, as the env
            stdio = inbound.taken(fds, extra.get("fds", 0))
            request = Request(rid, None, extra, stdio, self.caller_env, self.spare)
            request.take_given(extra, fds)
            self.requests[rid] = request
            if spec is inbound.UNBASED:  # held, its spec None, until the caller sends it whole
                self.reply(("whole", rid))
                return
            self._queued(request, spec)
        elif kind == "spec":  # a held request's spec, whole: the caller's chain begins again
            held = self.requests.get(rid)
            if held is not None and held.spec is None:
                self.specs.whole(rid, message[2])
                self._queued(held, message[2])
        elif kind == "signal":
            self._stop(rid, message[2])
        elif kind == "batch":
            self._spawn("batch", (message[2], message[3], message[4], message[5]), inbound.taken(fds, 1))
        elif kind == "bench":  # its connection, then the caller's descriptors it asks for
            self._spawn("bench", message[2], inbound.taken(fds, 1 + message[3]))

    def _queued(self, request: Request, spec) -> None:
        request.spec = spec
        refused = request.refused()
        if refused is not None:
            self._answer(request, failed(refused))
        else:
            self.queue.append(request)

    def caller_gone(self) -> None:
        """The caller ended: no new run, and every run in flight ends through its release."""
        if self.closing:
            return
        self.closing = True
        self.connection.close()
        for request in [*self.queue, *(held for held in self.requests.values() if held.spec is None)]:
            request.close()  # queued, or held for its spec: never begun, nothing to release
        self.queue.clear()
        self.group.stop(CALLER_GONE_SOURCE)  # the group's own policy: its caller is gone

    def _stop(self, rid: int, source: str) -> None:
        """The caller was interrupted while it waited: the run ends as on a stop signal."""
        request = self.requests.get(rid)
        if request is None:
            return
        if request.spec is None or request in self.queue:  # not begun: nothing to release
            if request.spec is not None:
                self.queue.remove(request)
            self._answer(request, cancelled(source))
            return
        request.stopped = source  # seen by its first step, if that is not taken yet
        self.host.stop_carried(request.steps, source)  # this request's run: never another of the same id

    # -- runs ---------------------------------------------------------------------------------
    def next_run(self):
        """The host asks whenever the group has room: first the service's own idle wait, then
        the queue, each run admitted only when its descriptors fit (else it fails alone)."""
        if not self.idle_started:
            self.idle_started = True
            return self._idle()
        self._look_at_parent()
        while self.queue:
            request = self.queue.popleft()
            if request.stopped is None:
                problem = self.admission.refusal(len(self.group.carried) - 1)  # the idle wait is no run
                if problem is not None:
                    self._answer(request, failed(Failure(Kind.SETUP, problem)))
                    continue
            request.steps = self._carried(request)
            self.carrying[request.steps] = request
            self.admission.unbegun.add(request.rid)
            return request.steps
        return None

    def _answer(self, request: Request, report: dict) -> None:
        """Reply to a request that ends without a run, and give back what it held."""
        self.requests.pop(request.rid, None)
        self.carrying.pop(request.steps, None)
        self.admission.unbegun.discard(request.rid)
        request.close()
        self.reply(("done", request.rid, report))

    def _idle(self):
        """Keeps the host turning while no run is in flight, until its caller and batches are gone,
        or the host's own failure is stored (a ``finished`` that raised): then no run starts, so
        the service ends (its callers get ``ServiceGone``) rather than read calls it never answers."""
        # Woken whenever the caller's socket or a batch's pidfd fires, or the host stops; polled for the parent-death flag.
        self.idle_loop = self.host.run_loop()
        self.idle_loop.add_reader(self.sock.fileno(), self.readable)

        def over() -> bool:
            return (self.closing and not self.batches) or self.host.failing

        while not over():
            try:
                yield Wait(lambda: bool(self.orphaned) or over(), poll=ORPHAN_POLL)
            except Exception:  # noqa: BLE001 - one of its callbacks raised past its guard: the connection ends
                self.caller_gone()
            self._look_at_parent()
        return None

    def _look_at_parent(self) -> None:
        if self.orphaned:
            self.orphaned.clear()
            if prctl.parent_gone(self.caller, self.sock.fileno(), hung_up=True):
                self.caller_gone()

    def _carried(self, request: Request):
        """The request's run, as a run of the service's group: what the service sets up for it
        is inside its guard, so whatever raises ends this run alone, with its own reply."""
        self.admission.unbegun.discard(request.rid)
        if request.stopped is not None:
            self._answer(request, cancelled(request.stopped))
            return None
        try:
            context = request.context(self.scratch, self.cwd, self.host, self.batches)
            run = steps(
                self.host,
                request.spec,
                REMEMBER if any(request.piped) else (),  # a capture's counts: the bounds of its read-back
                keep_stream=request.keep_stream,
                context=context,
                records=True,
                leaks=True,  # what the root left running: ``LeftRunning``
            )
            outcome = yield from run
        except Failure as failure:
            outcome = Outcome(failure.code, failure)
        except Exception as exc:  # noqa: BLE001 - a bug in one run must not end the others
            outcome = own_failure(exc)
        yield from request.held_captures(outcome, self.scratch)  # a piece a turn: other calls go on
        return request, outcome

    def raised(self, exc: Exception, steps):
        """What the group's ``finished`` gets for a run whose step raised past its guard: the
        run's own failure, replied to its own caller."""
        request = self.carrying.get(steps)
        return None if request is None else (request, own_failure(exc))

    def finished(self, result) -> None:
        if result is None:  # the idle wait, or a request answered without a run
            return
        request, outcome = result
        try:
            report = request.report(outcome, self.scratch)
        except Exception as exc:  # noqa: BLE001 - the reply still goes, with the service's own failure
            report = failed(fdlimit.unexpected(exc, "to reply"))
        try:
            reply_anyway(self.reply, request.rid, report)  # one it cannot make: without its bytes, said
        finally:
            self.carrying.pop(request.steps, None)
            self.admission.unbegun.discard(request.rid)
            self.requests.pop(request.rid, None)
            request.close()
        # The groups this run gave back checked and started again now, while its caller reads
        # the reply, instead of on the next call's way to its spawn. Best effort, as at the
        # spawn: whatever fails here is checked again when the next call takes the group, and
        # no fault of it may end the service (a ``finished`` that raises is the host's failure).
        lodging = self.host.lodging
        try:
            restart_idle(lodging.home if lodging is not None else None)
        except Exception:  # noqa: BLE001 - see above
            pass

    # -- batches --------------------------------------------------------------------------------
    def _spawn(self, module: str, request, fds: list[int]) -> None:
        """A batch or a benchmark runs in a process of its own (``spawned.watched``), unless its
        caller hung up: nothing more is started then."""
        from .spawned import watched

        if self.closing:
            wire.close_all(fds)
            return
        assert self.idle_loop is not None  # requests are read through it
        watched(module, request, fds, self.batches, self.idle_loop)

    def close(self) -> None:
        self.host.close()
        for fd in self.spare:
            os.close(fd)
        self.spare.clear()
        scratch.remove(self.scratch, self.scratch_lock)


def main() -> int:
    fd, caller = int(sys.argv[1]), int(sys.argv[2])
    orphaned = made_own(caller, fd)
    if orphaned is None:
        return 0
    sock = socket.socket(fileno=fd)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before its hello: every request says its writer
    failure: Exception | None = fdlimit.too_low_for_the_service()
    if failure is None:
        try:
            service = Service(sock, caller)
        except OSError as exc:  # its scratch directory (``scratch.make_in``)
            failure = exc
    if failure is not None:  # its limit, or its scratch: the caller raises it
        sock.setblocking(True)
        wire.send(sock, ("hello", 0, os.getpid(), None, {"failure": str(failure)}))
        return 1
    service.orphaned = orphaned
    try:
        sock.setblocking(True)
        hello = {"spec_base": True, "mark": service.connection.frames.mark}
        wire.send(sock, ("hello", 0, os.getpid(), service.scratch, hello))
        sock.setblocking(False)
        service.host.watch_signals()
        service.host.lodge(f"api-{caller}")
        service.host.supervise([service.group])
    except BrokenPipeError:
        pass
    finally:
        service.close()
    return 0
