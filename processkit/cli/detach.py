"""``run --detach``: hand the run to a copy of this program in a new session, and return as
soon as the copy has proven the run started (docs/control-plane.md §3, docs/run.md §1.4).

The copy is an ordinary foreground run with null stdio (but a ``--stdin-file`` or ``--env-file``
naming one of the launcher's own descriptors, ``/dev/stdin`` or ``/dev/fd/N``: the copy is handed
it). Its proof is the first line of the JSONL: a ``run_started`` carrying this run's id, which
the runner writes only once the container, the registry record and the child all exist. The
launcher creates (truncates) the file itself first, so a stale line from an earlier run can
never pass for that proof.
"""

from __future__ import annotations

import os
import signal
import subprocess

from ..bounded import DETACHED_JSONL, first_line, loads, read_start
from ..diagnostics import warn
from ..errors import RESERVED_BAND, Failure, Kind, setup_failure
from ..loop import Loop
from ..safepath import open_for_writing
from ..spec import RunSpec
from ..text import sanitize
from .detach_gate import Gate
from .options import READY_FD_VARIABLE, named_fd, split_command
from .selfexec import program

POLL_SECONDS = 0.02
HANDSHAKE_SECONDS = 30.0
STOP_SECONDS = 10.0  # for a copy that was given up on to end its own tree, before it is SIGKILLed
# The reader's guard only: the writer keeps every line, run_started with its raw argv
# (--argv-raw) included, within bounded.LINE_BYTES (1 MiB), so a longer first line is not one
# this runner wrote.
MARKER_LIMIT = 8 * 1024 * 1024
MARKER_CHUNK = 8 * 1024  # the first line is read this much at a time, never the whole stream
EVIDENCE_BYTES = 64 * 1024
# Codes a copy of ``run`` exits with for its own failures, by the kind they carry; any other
# reserved code is relayed as kind ``unknown`` (docs/run.md §1.4).
_RUN_KINDS = {
    kind.code: kind
    for kind in (
        Kind.USAGE,
        Kind.SPAWN_ERROR,
        Kind.CONTAINER_ERROR,
        Kind.INTERNAL,
        Kind.TIMEOUT,
        Kind.CANCELLED,
        Kind.CONTROL_CANCEL,
        Kind.CONTROL_KILL,
        Kind.SETUP,
        Kind.OUTPUT_OVERFLOW,
    )
}


def launch(argv: list[str], spec: RunSpec) -> None:
    """Start ``spec`` detached; returns once it has started, raises a Failure otherwise."""
    try:
        os.close(open_for_writing(spec.jsonl))
    except OSError as exc:
        raise setup_failure(f"could not open the JSONL events file `{spec.jsonl}`", exc) from None
    named = {fd for path in (spec.stdin_file, *spec.env.files) if (fd := named_fd(path)) is not None}
    handed = handed_inputs(named)  # before the pipe is made: it is never one of them
    try:
        ready, ready_end = os.pipe2(os.O_CLOEXEC)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot start the detached runner: {exc.strerror}") from None
    try:
        ready_end = _unnamed(ready_end, named)
        copy = subprocess.Popen(
            copy_argv(argv, spec),
            stdin=0 if 0 in handed else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            pass_fds=(ready_end, *(fd for fd in handed if fd > 2)),
            env={**os.environ, READY_FD_VARIABLE: str(ready_end)},
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        os.close(ready)
        raise Failure(
            Kind.SETUP, f"cannot start the detached runner: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    finally:
        os.close(ready_end)
    try:
        Handshake(copy, spec.jsonl, spec.run_id, ready, Gate.from_env()).complete()
    except Failure as failure:  # run's hint for a shell line given whole ('make test'), as in the foreground
        from ..spawn_words import shell_line_hint

        failure.hint = failure.hint or shell_line_hint(spec.argv[0], failure.message)
        raise
    finally:
        os.close(ready)


def handed_inputs(named: set[int]) -> set[int]:
    """The launcher's own open descriptors among those input paths (``--stdin-file``,
    ``--env-file``) name (``options.named_fd``), which the copy must be handed under the same
    numbers: with null stdio it would read ``/dev/null`` there, the caller's input lost without a
    word. Descriptors that are not open, and a terminal (a detached run would read the caller's
    keys from under its shell), are left to the copy."""
    handed = set()
    for fd in named:
        try:
            os.fstat(fd)
        except OSError:
            continue
        if not os.isatty(fd):
            handed.add(fd)
    return handed


def _unnamed(fd: int, named: set[int]) -> int:
    """``fd`` (the copy's end of the readiness pipe, which it keeps under its number) moved to a
    number no input path names: an unopened ``/dev/fd/N`` is the copy's to refuse, never its pipe."""
    import fcntl

    while fd in named:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, fd + 1)
        os.close(fd)
        fd = moved
    return fd


def copy_argv(argv: list[str], spec: RunSpec) -> list[str]:
    """The copy's command line: ``argv`` without ``--detach`` (before ``--``), with an explicit
    run id and ``--no-echo``. A command that arrived on stdin is written out after ``--``,
    since the copy's stdin is null."""
    options, command = split_command(argv)
    options = [token for token in options if token != "--detach"]
    if not spec.run_id_given:
        options += ["--run-id", spec.run_id]
    if "--no-echo" not in options:
        options.append("--no-echo")
    return [*program(), "run", *options, "--", *(command if command else spec.argv)]


class Handshake:
    """Every POLL_SECONDS, the copy's readiness pipe, the file and the copy itself, until the
    proof or the bound. The pipe (``ready``) carries the proof when the JSONL cannot: a run whose
    JSONL fails is healthy, and must not look unstarted (nor be killed for it). Under a test
    ``gate`` the proof is taken once the copy has ended, from the stream's first record, or from
    the pipe when it says the JSONL failed."""

    def __init__(
        self, copy: subprocess.Popen, jsonl: str, run_id: str, ready: int | None = None, gate: Gate | None = None
    ):
        self._copy = copy
        self._jsonl = jsonl
        self._run_id = run_id
        self._ready = ready
        self._gate = gate
        self._started: bool | None = None  # None until decided
        self._copy_ended = False  # under a gate: the last look waits for the loop to end
        self._failed = ""  # the copy's words for a failure before its start, told on the pipe
        if ready is not None:
            os.set_blocking(ready, False)

    def complete(self) -> None:
        loop = Loop()
        try:
            self._poll(loop)
            loop.run_until(lambda: self._started is not None or self._copy_ended, loop.clock() + HANDSHAKE_SECONDS)
        finally:
            loop.close()
        if self._gate is not None and self._copy_ended:
            self._gate.hold(self._run_id, HANDSHAKE_SECONDS)
            recorded, examined, fetched = self._first_record()
            self._gate.record(self._run_id, examined, fetched)
            # A JSONL that failed cannot hold the proof: the pipe's word for it then stands.
            self._started = recorded or self._told_started(jsonl_failed_only=True)
        if self._started is None:  # out of time: one last look, then the copy and its tree go
            self._started = self._proven()
            if not self._started:
                end_copy(self._copy)
                raise Failure(
                    Kind.SETUP,
                    f"run `{self._run_id}` did not start within {HANDSHAKE_SECONDS:g}s: "
                    "its runner was stopped and its tree killed",
                )
        if not self._started:
            raise self._relayed_failure()

    def _proven(self) -> bool:
        return self._told_started() or self._marker_written()

    def _told_started(self, jsonl_failed_only: bool = False) -> bool:
        """Whether the copy said ``started`` on the readiness pipe; it adds why its JSONL
        stopped when it did, which the caller is told (the copy's own stderr is null).
        ``jsonl_failed_only``: a plain ``started`` is not taken (the stream is the proof)."""
        if self._ready is None:
            return False
        try:
            line = os.read(self._ready, 4096)
        except OSError:  # nothing yet
            return False
        if line.startswith(b"failed\t"):  # whole (a long path's cause is at its end): cleaned again when said
            self._failed = sanitize(line[7:].rstrip(b"\n").decode("utf-8", "replace"), limit=len(line))
        if not line.startswith(b"started"):
            return False
        _, _, jsonl_failure = line.rstrip(b"\n").partition(b"\t")
        if jsonl_failed_only and not jsonl_failure:
            return False
        if jsonl_failure:
            warn(
                f"the detached run started, but its JSONL event logging is disabled: {jsonl_failure.decode(errors='replace')}"
            )
        return True

    def _poll(self, loop: Loop) -> None:
        if self._gate is None and self._proven():
            self._started = True
        elif self._copy.poll() is not None:
            if self._gate is None:
                self._started = self._proven()  # the copy may have written it as it went
            else:
                self._copy_ended = True
        else:
            loop.call_later(POLL_SECONDS, lambda: self._poll(loop))

    def _marker_written(self) -> bool:
        return self._first_record()[0]

    def _first_record(self) -> tuple[bool, int, int]:
        """Whether the file's first complete line is this run's ``run_started``; the bytes that
        line holds and the bytes read for it (a fixed read-ahead, whatever the stream's length)."""
        try:
            line, fetched = first_line(self._jsonl, MARKER_LIMIT, DETACHED_JSONL, MARKER_CHUNK)
        except (OSError, ValueError):  # ValueError: bounded.InputError (a FIFO, a device)
            return False, 0, 0
        if line is None:
            return False, fetched, fetched
        try:
            event = loads(line.decode("utf-8"))
        except ValueError:
            return False, len(line), fetched
        ours = isinstance(event, dict) and event.get("event") == "run_started" and event.get("run_id") == self._run_id
        return ours, len(line), fetched

    def _relayed_failure(self) -> Failure:
        """The copy ended before the proof: a reserved code is relayed, anything else is 111; in
        the reference's words (detach.rs's detached_start_failure), then the copy's reason."""
        code = self._copy.returncode
        reason = self._stream_reason() or (f": {self._failed}" if self._failed else "")
        headline = f"run `{self._run_id}` did not start: the detached runner"
        see = f"see `{self._jsonl}`{reason}"
        if code in _RUN_KINDS:
            said = f"failed with the same code it would have reported in the foreground ({code}); {see}"
            return Failure(_RUN_KINDS[code], f"{headline} {said}", code=code)
        if code in RESERVED_BAND:
            said = (
                f"exited with the reserved-band code {code}, which this build's own `run` never reports — the "
                f"binary on disk may have been replaced between the spawn and the exec; {see}"
            )
            return Failure(Kind.UNKNOWN, f"{headline} {said}", code=code)
        return Failure(Kind.SETUP, f"{headline} exited ({_status(code)}) without recording a started run; {see}")

    def _stream_reason(self) -> str:
        """The copy's own words for its failure (its stderr is null; the JSONL is all it has)."""
        try:
            data = read_start(self._jsonl, EVIDENCE_BYTES, DETACHED_JSONL)
        except (OSError, ValueError):
            return ""
        for line in data.split(b"\n"):
            try:
                event = loads(line.decode("utf-8"))
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("message"), str):
                return ": " + sanitize(event["message"])
        return ""


def end_copy(copy: subprocess.Popen) -> None:
    """A launcher that gives up ends what it started: the copy's whole tree, not just the copy.
    SIGTERM first, which the copy turns into a cancel that kills and releases its container
    (or, before one exists, which ends it); a copy still there after STOP_SECONDS is SIGKILLed
    and the sweep ends what its dead run left (as ``prune`` would)."""
    copy.terminate()
    try:
        copy.wait(STOP_SECONDS)
        return
    except subprocess.TimeoutExpired:
        copy.kill()
        copy.wait()
    from .. import rundir, rundir_shape
    from ..containment import sweep

    own = f"{rundir.DIR_PREFIX}{copy.pid}-"
    dirs = [path for path in rundir_shape.listing() if os.path.basename(path).startswith(own)]
    sweep.sweep([], sweep.Reaped(), run_dirs=dirs, groups=False)


def _status(returncode: int) -> str:
    """An exit status as Rust's ``ExitStatus`` shows it (``exit status: 1``, ``signal: 9 (SIGKILL)``).
    Rust names the classic signals only: a real-time one (``SIGRTMIN``..) is its number alone."""
    if returncode >= 0:
        return f"exit status: {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "SIGRT"
    return f"signal: {number}" if name.startswith("SIGRT") else f"signal: {number} ({name})"
