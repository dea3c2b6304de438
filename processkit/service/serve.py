"""The runner service: one process per calling process, carrying every run of that caller on
one lodged host (``engine.host``), as ``batch`` carries its jobs. ``api.service`` starts it on
first use and talks to it over a private socketpair (``api.wire``): a request is a RunSpec the
caller's keywords were parsed into, the reply the run's outcome and its events.

Facts about a service that must end with its caller:
- The caller's end of the socketpair is closed by the kernel when the caller's process ends,
  however it ends (SIGKILL included): the service reads its end of file. The caller's end is
  close-on-exec, and a fork of the caller closes its copy (``service``), so no other process
  keeps it open.
- ``PR_SET_PDEATHSIG`` fires when the *thread* that started the service ends, which may be a
  worker thread of a caller that lives on; so its signal (SIGUSR1) only makes the service
  look, and it ends once its parent is no longer the caller. It is set first thing and
  ``getppid()`` checked after it, so a caller that died before the ``prctl`` is not missed.
- Ending with the caller, the service stops every run it carries as a hang-up would
  (``cancelled``, source ``sighup``), lets each release what it made, removes its scratch
  directory and gives back its lodging; no request still queued is started.
- A stop signal to the service (SIGINT from the terminal it shares with its caller, SIGTERM,
  SIGHUP) ends the runs in flight, as it ended each per-call runner before; the service goes on
  serving. The signal handlers, the subreaper flag and the reaping are the service's, so the
  calling interpreter gets none of them.
- The caller's environment and working directory can change between calls: each request
  carries the environment when it changed, applied just before that run's setup, and every
  path the run names is made absolute by the caller, so the service works from ``/``.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import socket
import sys

from ..diagnostics import envelope_only
from ..engine.endings import internal
from ..engine.host import Host, RunLoop
from ..engine.waits import Wait
from ..engine.runner import steps
from ..rundir import batch_base
from ..api import wire
from . import scratch

MAX_FD = 1 << 20  # beyond any descriptor this process holds (closerange is one close_range call)
ORPHAN_POLL = 1.0  # seconds between looks at the parent-death signal's flag
CAPACITY = 1 << 20  # runs in flight: as many as the caller asks for (each holds its own descriptors)
CALLER_GONE = "sighup"  # how the runs of a caller that ended report their cancellation
# A scratch capture larger than this is not copied into the reply: the caller reads the file
# itself (one copy of the output in memory, as subprocess's, not four across the two processes).
INLINE_MOST = 1 << 20


class Request:
    """One run a caller asked for, and what serves it in this process."""

    __slots__ = (
        "rid",
        "spec",
        "env",
        "stdio",
        "input",
        "piped",
        "memfds",
        "scratch_capture",
        "stopped",
        "lent",
        "given",
    )

    def __init__(self, rid: int, spec, extra: dict, stdio: list[int]) -> None:
        self.rid = rid
        self.spec = spec
        self.env: dict | None = extra.get("env")
        self.stdio = stdio  # the caller's 0, 1 and 2, for a run that echoes or inherits them
        self.input: bytes | None = extra.get("input")
        self.piped: tuple[bool, bool] = extra.get("piped", (False, False))
        self.memfds: list[int] = []
        self.scratch_capture: str | None = None
        self.stopped: str | None = None  # the stop signal's source, when one came before its first step
        self.lent = False  # the caller's standard streams are this process's 0-2 for the run
        # The caller's own descriptors for the child's 0, 1, 2 (``child_fds``: stdin=PIPE, stdout=
        # a file, a descriptor or a pipe it reads), sent after ``stdio``; None where not given.
        self.given: list[int | None] = [None, None, None]

    def take_given(self, extra: dict, frames: wire.Frames) -> None:
        """The descriptors the request's ``child_fds`` says follow its frame, in stream order."""
        wanted = extra.get("child_fds") or (False, False, False)
        fds = iter(frames.take_fds(sum(map(bool, wanted))))
        self.given = [next(fds) if flag else None for flag in wanted]


def _streams_to_null() -> None:
    """This process's 0-2 back on /dev/null, as it started."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)


def _cancelled(source: str) -> dict:
    """The reply for a run stopped before it began: nothing was made, so nothing is released."""
    failure = ("cancelled", f"run cancelled by {source} before its child was started", False)
    return {"code": 107, "failure": failure, "pid": os.getpid()}


class Service:
    def __init__(self, sock: socket.socket, caller: int) -> None:
        self.sock = sock
        self.caller = caller
        self.host = Host(watch=True)
        self.frames = wire.Frames()
        self.pending = bytearray()  # replies not yet taken by the socket
        self.writing = False  # the loop watches the socket for room to write the rest
        self.lent = 0  # runs in flight using the caller's standard streams as this process's 0-2
        self.queue: collections.deque[Request] = collections.deque()
        self.requests: dict[int, Request] = {}  # rid -> a run queued or in flight
        self.batches: dict[int, int] = {}  # pid of a batch's process -> its pidfd
        self.closing = False
        self.orphaned: list[bool] = []  # PR_SET_PDEATHSIG's signal came: the parent may be gone
        self.idle_started = False
        self.idle_loop: RunLoop | None = None  # the idle wait's view of the loop (``_idle``)
        base = batch_base()
        self.scratch = scratch.make(base)

    # -- the caller's socket ------------------------------------------------------------------
    def reply(self, message: tuple) -> None:
        if self.closing:
            return
        self.pending += wire.encode(message)
        self._flush()

    def _flush(self) -> None:
        try:
            while self.pending:
                sent = self.sock.send(self.pending)
                del self.pending[:sent]
        except BlockingIOError:  # the caller reads slower than replies come: the rest when it can
            if not self.writing:
                self.writing = True
                self.host.loop.add_writer(self.sock.fileno(), self._flush)
            return
        except OSError:
            self.pending.clear()
            self.caller_gone()
            return
        if self.writing:
            self.writing = False
            self.host.loop.remove_writer(self.sock.fileno())

    def readable(self) -> None:
        try:
            messages = wire.receive(self.sock, self.frames)
        except BlockingIOError:
            return
        except OSError:
            messages = None
        if messages is None:
            self.caller_gone()
            return
        for message in messages:
            kind, rid = message[0], message[1]
            if kind == "run":
                extra = message[3]
                request = Request(rid, message[2], extra, self.frames.take_fds(extra.get("fds", 0)))
                request.take_given(extra, self.frames)
                self.requests[rid] = request
                self.queue.append(request)
            elif kind == "signal":
                self._stop(rid, message[2])
            elif kind == "batch":
                self._batch(message[2], message[3], message[4], message[5], self.frames.take_fds(1)[0])

    def caller_gone(self) -> None:
        """The caller ended: no new run, and every run in flight ends through its release."""
        if self.closing:
            return
        self.closing = True
        self.host.loop.remove_reader(self.sock.fileno())
        if self.writing:
            self.writing = False
            self.host.loop.remove_writer(self.sock.fileno())
        for request in self.queue:
            self._close_fds(request)
        self.queue.clear()
        self.host.stop(CALLER_GONE)

    def _stop(self, rid: int, source: str) -> None:
        """The caller was interrupted while it waited: the run ends as on a stop signal."""
        request = self.requests.get(rid)
        if request is None:
            return
        if request in self.queue:  # not begun: nothing to release
            self.queue.remove(request)
            self._close_fds(request)
            del self.requests[rid]
            self.reply(("done", rid, _cancelled(source)))
            return
        request.stopped = source  # handed to the host, its first step not yet taken
        self.host.stop_run(request.spec.run_id, source)

    # -- runs ---------------------------------------------------------------------------------
    def next_run(self):
        """The host asks after each turn: first the service's own idle wait, then the queue."""
        if not self.idle_started:
            self.idle_started = True
            return self._idle()
        self._look_at_parent()
        if self.queue:
            return self._carried(self.queue.popleft())
        return None

    def _idle(self):
        """Keeps the host turning while no run is in flight, until the caller and every
        batch it started are gone."""
        # Its loop view wakes it whenever the caller's socket or a batch's pidfd fires, so its
        # wait is looked at again then; the poll is for the parent-death signal's flag.
        self.idle_loop = self.host.run_loop()
        self.idle_loop.add_reader(self.sock.fileno(), self.readable)
        while not (self.closing and not self.batches):
            yield Wait(lambda: bool(self.orphaned) or (self.closing and not self.batches), poll=ORPHAN_POLL)
            self._look_at_parent()
        return None

    def _look_at_parent(self) -> None:
        if self.orphaned:
            self.orphaned.clear()
            if os.getppid() != self.caller:
                self.caller_gone()

    def _carried(self, request: Request):
        if request.stopped is not None:
            self.reply(("done", request.rid, _cancelled(request.stopped)))
            self.requests.pop(request.rid, None)
            self._close_fds(request)
            return None
        spec = self._materialize(request)
        try:
            outcome = yield from steps(self.host, spec)
        except Exception as exc:  # noqa: BLE001 - a bug in one run must not end the others
            outcome = internal(f"{type(exc).__name__}: {exc}")
        return request, spec, outcome

    def _materialize(self, request: Request):
        """The request's spec with this process's stand-ins replaced; the caller's environment
        and standard streams in place for its setup."""
        if request.env is not None:
            os.environ.clear()
            os.environ.update(request.env)
        if request.stdio:
            for target, fd in enumerate(request.stdio):
                os.dup2(fd, target)
                os.close(fd)
            request.stdio = []
            request.lent = True
            self.lent += 1
        spec = request.spec
        changes: dict = {}
        if spec.jsonl == wire.SCRATCH_MEMORY:
            changes["jsonl"] = self._memory_file(request, b"")
        elif spec.jsonl == wire.SCRATCH_FILE:  # the caller follows it, and removes it once read
            changes["jsonl"] = os.path.join(self.scratch, spec.run_id + ".jsonl")
        if spec.stdin_file == wire.SCRATCH_INPUT:
            changes["stdin_file"] = self._memory_file(request, request.input or b"")
        if spec.capture_dir == wire.SCRATCH_CAPTURE:
            request.scratch_capture = changes["capture_dir"] = os.path.join(self.scratch, spec.run_id)
        if any(fd is not None for fd in request.given):
            changes["child_fds"] = tuple(request.given)
        return spec.replace(**changes) if changes else spec

    def _memory_file(self, request: Request, content: bytes) -> str:
        """A file in memory (``memfd``) holding ``content``, named as other processes can open it."""
        fd = os.memfd_create("processkit-api", os.MFD_CLOEXEC)
        if content:
            os.write(fd, content)
        request.memfds.append(fd)
        return f"/proc/{os.getpid()}/fd/{fd}"

    def finished(self, result) -> None:
        if result is None:  # the idle wait
            return
        request, spec, outcome = result
        try:
            self.reply(("done", request.rid, self._report(request, spec, outcome)))
        finally:
            self.requests.pop(request.rid, None)
            self._close_fds(request)
            if request.lent:
                self.lent -= 1
                if not self.lent:  # the caller's streams are not held past the runs that use them
                    _streams_to_null()
            if request.scratch_capture is not None:
                shutil.rmtree(request.scratch_capture, ignore_errors=True)

    def _report(self, request: Request, spec, outcome) -> dict:
        failure = outcome.failure
        report: dict = {
            "code": outcome.code,
            "failure": (failure.kind.label, failure.message, failure.kind.retryable) if failure is not None else None,
            "usage": outcome.usage,
            "pid": os.getpid(),
            "started_ns": outcome.started_ns,
            "ended_ns": outcome.ended_ns,
        }
        report["jsonl"] = scratch.read_back(
            request.memfds[0] if request.spec.jsonl == wire.SCRATCH_MEMORY else spec.jsonl
        )
        if any(request.piped) and spec.capture_dir is not None:
            for name, piped in zip(("stdout", "stderr"), request.piped):
                if piped:
                    path = os.path.join(spec.capture_dir, f"{name}.log")
                    if request.scratch_capture is not None and scratch.size(path) > INLINE_MOST:
                        report[f"{name}_file"] = path  # read and removed by the caller (``api.streams``)
                        request.scratch_capture = None  # the directory is the caller's to remove now
                    else:
                        report[name] = scratch.read_back(path)
        return report

    def _close_fds(self, request: Request) -> None:
        for fd in request.memfds + request.stdio + [fd for fd in request.given if fd is not None]:
            os.close(fd)
        request.memfds, request.stdio, request.given = [], [], [None, None, None]

    # -- batches --------------------------------------------------------------------------------
    def _batch(self, jobs, settings, cwd: str, env: dict, connection: int) -> None:
        """A batch runs in a process of its own, forked from this single-threaded one: its jobs
        on its own host with its own lodging and summary, its stop on its own connection."""
        from . import batch

        if self.closing:
            os.close(connection)
            return
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # Nothing of the service's goes on in the copy: no signal lands in its pipe, and
                # no descriptor of a run it carries stays open here (a child's stdin pipe would
                # never see its end of file).
                signal.set_wakeup_fd(-1)
                self.sock.detach()
                os.closerange(3, connection)
                os.closerange(connection + 1, MAX_FD)
                code = batch.serve(connection, jobs, settings, cwd, env)
            finally:
                os._exit(code)
        os.close(connection)
        pidfd = os.pidfd_open(pid)
        self.batches[pid] = pidfd
        assert self.idle_loop is not None  # requests are read through it
        self.idle_loop.add_reader(pidfd, lambda: self._batch_ended(pid))

    def _batch_ended(self, pid: int) -> None:
        pidfd = self.batches.pop(pid)
        self.host.loop.remove_reader(pidfd)
        os.close(pidfd)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # collected by the host's reaper (a subreaper collects every exited child)

    def close(self) -> None:
        self.host.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def main() -> int:
    fd, caller = int(sys.argv[1]), int(sys.argv[2])
    from ..containment import prctl

    orphaned: list[bool] = []  # the signal may come before the service exists
    signal.signal(signal.SIGUSR1, lambda number, frame: orphaned.append(True))
    prctl.set_parent_death_signal(signal.SIGUSR1)
    if os.getppid() != caller:
        return 0
    os.chdir("/")
    envelope_only()  # warnings have no reader here: a run's failure travels in its reply
    sock = socket.socket(fileno=fd)
    service = Service(sock, caller)
    service.orphaned = orphaned
    try:
        sock.setblocking(True)
        wire.send(sock, ("hello", 0, os.getpid(), service.scratch))
        sock.setblocking(False)
        service.host.watch_signals()
        service.host.lodge(f"api-{caller}")
        service.host.carry_all(service.next_run, service.finished, CAPACITY)
    except BrokenPipeError:
        pass
    finally:
        service.close()
    return 0
