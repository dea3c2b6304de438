"""One run a caller asked its runner service for: what the request carried, the context the run
is carried in, the service's own files for it, and the reply made from its outcome.

Facts that shape it:
- A request carries its own context (``context.RunContext``): the caller's environment as the
  service last received it, which the service records when the request is *read*, in the order
  the caller sent them (so a request cancelled before its first step still leaves its change
  for the next), and the caller's standard streams as descriptors of its own (``SCM_RIGHTS``).
  The service's own ``os.environ`` and fds 0-2 are never touched: two runs in flight at once
  each see their own caller's.
- Every file the service makes for a run is named by the request's id (``wire.scratch_name``),
  never by its run id, which is the caller's text and may hold ``/`` or ``..``.
- What the run is given is set up inside the run's own guard (``Service._carried``): a memfd
  the limit refuses fails that run alone.
- A run whose stream nobody names (``wire.SCRATCH_MEMORY``) has it held by the engine in memory
  (``RunContext.held_fds``): no process can read it while the run goes on, so its events are
  never encoded; they come back to the caller as the objects the engine made (pickled in the
  reply), unless one holds a lone surrogate, which only the JSON route renders as the stream
  would show it (U+FFFD). A call's scratch capture (``wire.SCRATCH_CAPTURE``) beside such a
  stream is held in memfds too: no directory, no file, no unlink. Such a run is published late
  (``spec.LATE_PUBLICATION_MS`` after its spawn), as a ``batch --keep failed`` job is: no
  client could follow its stream, and a run that ends sooner makes no record, socket or tombstone.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil

from .. import capture_layout, fdlimit, rlimits
from ..api import wire
from ..api.caller_env import CallerEnv
from ..engine.endings import Outcome, not_started
from ..engine.race import left_running
from ..engine.teardown import echo_lost
from ..errors import Failure, Kind
from ..context import RunContext
from ..spec import LATE_PUBLICATION_MS, own_pid
from ..grammar.values import parse_run_id
from ..readback import UNREADABLE
from ..writeall import write_all
from . import held_capture, inbound, scratch
from .held_capture import INLINE_MOST, written
from .escapees import sole_run
from .held_events import travelling

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..engine.host import Host

# Empty memfds kept for the next runs' held streams and captures (``Request.close``): ``run(["true"])`` makes none.
SPARE_MOST = 4
# The events the service's runs keep as objects (``runner.steps``'s ``remember``): the capture
# counts every read-back is bounded by (``written``), the engine's own, whatever the files hold.
REMEMBER = ("output_captured",)
# A lone surrogate (U+D800-U+DFFF) as pickle writes a str (UTF-8, "surrogatepass"): no valid
# UTF-8 has these bytes, so a pickle without them holds no str the JSON route would render
# differently (a false match, in a number's bytes, only sends that run the JSON route).
SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


class Request:
    """One run a caller asked for, and what serves it in this process."""

    __slots__ = (
        "rid",
        "spec",
        "caller",
        "stdio",
        "input",
        "input_fd",
        "piped",
        "memfds",
        "scratch_capture",
        "stopped",
        "steps",
        "short",
        "given",
        "places",
        "held",
        "records",
        "spare",
        "captured",
        "streamed",
        "held_part",
    )

    def __init__(
        self, rid: int, spec, extra: dict, stdio: list[int], caller: CallerEnv, spare: list[int] | None = None
    ) -> None:
        self.rid = rid
        self.spec = spec
        self.caller = caller  # the caller's environment and umask when it sent this request (a field None: never sent)
        self.stdio = stdio  # the caller's 0, 1 and 2, for a run that echoes or inherits them
        self.short = len(stdio) != extra.get("fds", 0)  # sent, but not all received (the limit)
        self.input: bytes | None = extra.get("input")
        self.input_fd: int | None = None  # a large input's memfd, the caller's (``take_given``)
        self.piped: tuple[bool, bool] = extra.get("piped", (False, False))
        self.memfds: list[int] = []
        self.scratch_capture: str | None = None
        self.stopped: str | None = None  # the stop signal's source, when one came before its first step
        self.steps: object = None  # the run's generator on the host, once it is carried
        # The caller's own descriptors for the child's 0, 1, 2 (``child_fds``: stdin=PIPE, stdout=
        # a file, a descriptor or a pipe it reads), sent after ``stdio``; None where not given.
        self.given: list[int | None] = [None, None, None]
        # Where this process put what the spec names by ``wire``'s stand-ins (``context``).
        self.places: dict[str, str] = {}
        # This process's copies of the memfds the engine holds the stream (and capture) in.
        self.held: tuple[int, ...] = ()
        self.records: bytes | None = None  # the held stream's events, pickled (``keep_stream``)
        # The service's empty memfds left by earlier runs (``close``), taken before making one.
        self.spare: list[int] = [] if spare is None else spare
        # Read-only descriptors of the run's capture_dir files, the engine's own files
        # (``RunContext.captured``): what the run captured, whatever the child put at the path.
        self.captured: list[int] = []
        self.streamed: list[int] = []  # the same for its named stream file (``RunContext.streamed``)
        self.held_part: dict | None = None  # the held captures' part of the reply (``held_captures``)

    def take_given(self, extra: dict, brought: list[int]) -> None:
        """The descriptors the request's ``child_fds`` says follow its frame's ``stdio``, in
        stream order, then the large ``input=``'s memfd when ``input_fd`` says one follows, taken
        out of ``brought`` (the rest of its frame's)."""
        wanted = extra.get("child_fds") or (False, False, False)
        count = sum(map(bool, wanted))
        fds = inbound.taken(brought, count)
        if len(fds) != count:  # the kernel dropped what did not fit: the run is refused (``refused``)
            self.short = True
        taken = iter(fds)
        self.given = [next(taken, None) if flag else None for flag in wanted]
        if extra.get("input_fd"):
            self.input_fd = next(iter(inbound.taken(brought, 1)), None)
            self.short = self.short or self.input_fd is None

    def refused(self) -> Failure | None:
        """Why the request cannot be run as it came (a run id that is no run id, by the run
        grammar's own rule and words: the caller checked it already, so only a request that did
        not come through ``api.launch`` meets this)."""
        run_id = getattr(self.spec, "run_id", None)
        try:
            parse_run_id(run_id if isinstance(run_id, str) else "", "run_id")
        except Failure as failure:
            return failure
        if self.short:  # the kernel dropped what did not fit: never the service's own 0-2 in their place
            return Failure(Kind.SETUP, fdlimit.exhausted("to receive the caller's standard streams"))
        return None

    def context(self, scratch_dir: str, cwd: str | None, host: Host, others: dict) -> RunContext:
        """What the run is carried with beside its spec, which stays as the caller sent it: the
        caller's environment and standard streams, the descriptors it gave the child, and this
        process's own places for the spec's stand-ins (its memory, its scratch directory), and
        its look for what of it left its cgroup (``escapees.sole_run``: ``host``'s live runs and
        the service's ``others``, its batches and benchmarks, say when it may look).
        ``cwd``: the service's working directory, read once (None: the engine reads it).

        The held memfds are lent to the engine (``RunContext.held_lent``), as a batch lends its
        own: it writes them and never closes them, and ``close`` takes them back once the run's
        steps are over (a copy made and closed per call before: two system calls for nothing)."""
        spec, places = self.spec, self.places
        if spec.jsonl == wire.SCRATCH_MEMORY:  # held by the engine: never opened by path
            places[spec.jsonl] = self._memory_file(b"", self.spare)
            held = [self.memfds[-1]]
            if spec.capture_dir == wire.SCRATCH_CAPTURE and spec.capture_keep == "head":  # a ring's keeps need files
                self._memory_file(b"", self.spare)
                self._memory_file(b"", self.spare)
                held += self.memfds[-2:]
                places[spec.capture_dir] = os.path.join(scratch_dir, wire.scratch_name(self.rid))  # named, never made
            self.held = tuple(held)
        elif spec.jsonl == wire.SCRATCH_FILE:  # the caller follows it, and removes it once read
            places[spec.jsonl] = os.path.join(scratch_dir, wire.scratch_name(self.rid, ".jsonl"))
        if spec.stdin_file == wire.SCRATCH_INPUT_FD and self.input_fd is not None:  # never copied here
            places[spec.stdin_file] = self._held_memory(self.input_fd)
            self.input_fd = None
        elif spec.stdin_file == wire.SCRATCH_INPUT:
            places[spec.stdin_file] = self._memory_file(self.input or b"")
        if spec.capture_dir == wire.SCRATCH_CAPTURE and len(self.held) != 3:
            self.scratch_capture = places[spec.capture_dir] = os.path.join(scratch_dir, wire.scratch_name(self.rid))
            scratch.run_directory(self.scratch_capture)  # the service's own
        held_fds = self.held or None  # lent: closed (or kept spare) by ``close``, never by the engine
        stdio = tuple(self.stdio)
        given = self.given
        return RunContext(
            env=self.caller.env,
            umask=self.caller.umask,  # its child's and its named files' (``engine.callers_umask``)
            limits=rlimits.differing(self.caller.limits) or None,  # as subprocess's child's
            stdio=(stdio[0], stdio[1], stdio[2]) if len(stdio) == 3 else None,
            child_fds=(given[0], given[1], given[2]) if any(fd is not None for fd in given) else None,
            places=places or None,
            held_fds=held_fds,
            held_lent=held_fds is not None,
            cwd=cwd,
            # No client can follow a held stream: published once its child has run a while,
            # as a --keep failed job is, so a short run makes no record, socket or tombstone.
            publish_after_ms=LATE_PUBLICATION_MS if held_fds is not None else None,
            captured=self.captured if any(self.piped) and len(self.held) != 3 else None,
            streamed=self.streamed if spec.jsonl is not None and not self.held else None,
            escapees=sole_run(host, others),
        )

    def keep_stream(self, outcome) -> bool:
        """Whether the engine encodes and writes the held stream (``runner.steps``): only when its
        events cannot travel as objects (one holds a lone surrogate), or it spilled already."""
        if outcome.records is None:
            return True
        try:
            records = pickle.dumps(travelling(outcome.records), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - what cannot travel as objects goes as lines (the emitter's own rules)
            return True
        if SURROGATE.search(records) is not None:
            return True
        self.records = records
        return False

    def _memory_file(self, content: bytes, spare: list[int] | None = None) -> str:
        """A file in memory (``memfd``) holding all of ``content`` (a write the file size limit
        cuts short fails the run: never a child fed part of its input), named as other
        processes can open it. ``spare``: empty ones to take first (a held stream's or capture's
        only: a child never opens those, so none can be open anywhere but here)."""
        fd = spare.pop() if spare else os.memfd_create("processkit-api", os.MFD_CLOEXEC)
        path = self._held_memory(fd)
        if content:
            try:
                write_all(fd, content)
            except OSError as exc:
                raise Failure(
                    Kind.SETUP, f"cannot hold the {len(content)}-byte input for the run: {exc.strerror or exc}"
                ) from None
        return path

    def _held_memory(self, fd: int) -> str:
        """``fd``, a memfd, held for the run (closed by ``close``), named as other processes can open it."""
        self.memfds.append(fd)
        return f"/proc/{own_pid()}/fd/{fd}"

    def report(self, outcome, scratch_dir: str) -> dict:
        """The reply's fields from ``outcome`` and the files the run wrote where ``context``
        put them (a run that never got that far: none)."""
        spec, failure = self.spec, outcome.failure
        report: dict = {
            "code": outcome.code,
            "failure": (failure.kind.label, failure.message, failure.kind.retryable) if failure is not None else None,
            # ``Usage``'s values in order, as a tuple: half the bytes and pickling time of its slots
            "usage": None if outcome.usage is None else outcome.usage._values(),
            "stream_failure": outcome.stream_failure,  # said by the caller: the service's warnings have no reader
            "pid": own_pid(),
            "started_ns": outcome.started_ns,
            "ended_ns": outcome.ended_ns,
        }
        if outcome.echo_lost:  # said by the caller too: its own stdout or stderr
            report["echo_lost"] = [
                echo_lost(why, name, error, "this process's") for why, name, error in outcome.echo_lost
            ]
        if outcome.left_behind != 0:  # said by the caller, as the CLI's run warns it; None: not counted
            options = ("pty=True", "inherit_stdio=True")
            report["left_running"] = left_running(outcome.left_behind, spec, options, outcome.members_unread)
        if outcome.kept is not None:
            report["kept"] = outcome.kept
        jsonl = self.places.get(spec.jsonl, spec.jsonl) if isinstance(spec.jsonl, str) else None
        if self.records is not None:
            report["records"] = self.records
        elif self.held:
            report["jsonl"] = wire.read_back(self.held[0])
        elif jsonl is None or jsonl.startswith("\0"):  # a stand-in never given its place
            report["jsonl"] = None
        elif outcome.stream_bytes is None or not self.streamed or self.streamed[0] < 0:
            report["jsonl"] = None  # never opened by this run, or no file of its: what is there is not its
            if self.streamed and self.streamed[0] == UNREADABLE:  # a file of the caller's it may not read
                report.setdefault("unread", []).append(("events", jsonl))
        else:  # never more than the run wrote (the child may have put a huge sparse file there),
            # and only from the file it wrote (not one put at the path since, nor a link to one)
            report["jsonl"] = wire.read_back(self.streamed[0], most=outcome.stream_bytes)
        capture_dir = self.places.get(spec.capture_dir, spec.capture_dir) if isinstance(spec.capture_dir, str) else None
        if len(self.held) == 3:
            if self.held_part is None:  # a run ended past its steps (``serve``'s guard): read back here
                for _ in self.held_captures(outcome, scratch_dir):
                    pass
            report.update(self.held_part or {})
        elif any(self.piped) and capture_dir is not None and not capture_dir.startswith("\0"):
            for index, (name, piped) in enumerate(zip(capture_layout.STREAMS, self.piped)):
                own = self.captured[index] if piped and len(self.captured) == 2 else -1
                path = os.path.join(capture_dir, capture_layout.FILE_NAMES[name])
                if own >= 0:
                    self._own_capture(report, name, own, path, outcome)
                elif own == UNREADABLE:  # a file of the caller's found there, this user may not read
                    report.setdefault("unread", []).append((name, path))
        if spec.capture_dir == wire.SCRATCH_CAPTURE:  # checked by the caller, whichever way it comes
            for name in (name for name, piped in zip(capture_layout.STREAMS, self.piped) if piped):
                held_capture.vouched(report, outcome, name)
        return report

    def _own_capture(self, report: dict, name: str, own: int, path: str, outcome) -> None:
        """A capture file the engine wrote, into the reply: read through the runner's own
        descriptor of it (``captured``), never past the bytes the run wrote there (the child may
        have grown the file, or put a huge sparse one at its name). A large scratch capture
        still at its name is handed to the caller as its path, with that count
        (``{name}_most``): the caller reads at most that much of it (``api.streams``)."""
        most = written(outcome, name)
        if most is None:  # the run never reported a capture: none to return
            report[name] = None
            return
        try:
            own_file = os.fstat(own)
            size = min(own_file.st_size, most)
            at_name = self.scratch_capture is not None and size > INLINE_MOST and scratch.same_file(path, own_file)
        except OSError:
            report[name] = None
            return
        if at_name:
            report[f"{name}_file"] = path  # read and removed by the caller (``api.streams``)
            report[f"{name}_most"] = size
            self.scratch_capture = None  # the directory is the caller's to remove now
        else:
            report[name] = wire.read_back(own, most=size)

    def held_captures(self, outcome, scratch_dir: str):
        """``yield from`` this once the run's steps are over: the reply's held captures, a piece a turn (``held_capture``)."""
        if len(self.held) != 3:
            return  # no held captures: ``report`` reads none
        part: dict = {}
        self.held_part = part
        for index, (name, piped) in enumerate(zip(capture_layout.STREAMS, self.piped), 1):
            if piped:
                try:
                    yield from held_capture.copied(
                        part,
                        name,
                        self.held[index],
                        os.path.join(scratch_dir, wire.scratch_name(self.rid)),
                        written(outcome, name),
                    )
                except BaseException:
                    self.held_part = None  # not a part without a stream: read back by ``report`` (or its failure said)
                    raise

    def close(self) -> None:
        """Everything this process holds for the request given back (repeatable)."""
        for fd in self.memfds:
            if fd in self.held and len(self.spare) < SPARE_MOST and _left_empty(fd):
                self.spare.append(fd)  # the next run's, as a new one would be: nothing was written
            else:
                os.close(fd)
        owned = [
            fd for fd in (*self.given, *self.captured, *self.streamed, self.input_fd) if fd is not None and fd >= 0
        ]
        self.input_fd = None
        for fd in self.stdio + owned:
            os.close(fd)
        self.captured, self.streamed = [], []
        self.memfds, self.stdio, self.given, self.held = [], [], [None, None, None], ()
        if self.scratch_capture is not None:
            shutil.rmtree(self.scratch_capture, ignore_errors=True)
            self.scratch_capture = None


def _left_empty(fd: int) -> bool:
    """Whether a held memfd is as a new one is (nothing written: its size, and so its offset, 0);
    it is only ever lent to the engine (``RunContext.held_lent``), whose steps are over by then,
    so nothing writes it after."""
    try:
        return os.lseek(fd, 0, os.SEEK_END) == 0
    except OSError:
        return False


def cancelled(source: str) -> dict:
    """The reply for a run stopped before it began: nothing was made, so nothing is released."""
    failure = ("cancelled", not_started(source), False)
    return {"code": 107, "failure": failure, "pid": own_pid()}


def failed(failure: Failure) -> dict:
    """The reply for a run that could not begin: its own failure, nothing made."""
    return {
        "code": failure.code,
        "failure": (failure.kind.label, failure.message, failure.kind.retryable),
        "pid": own_pid(),
    }


def own_failure(exc: Exception):
    """The outcome of a run whose set-up raised in the service: out of descriptors is said as
    the limit it is, anything else as the runner's own failure (``fdlimit.unexpected``)."""
    failure = fdlimit.unexpected(exc, "to set up the run")
    return Outcome(failure.code, failure)
