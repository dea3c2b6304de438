"""``run --detach``: hand the run to a copy of this program in a new session, and return as
soon as the copy has proven the run started (docs/control-plane.md §3, docs/run.md §1.4).

The copy is an ordinary foreground run with null stdio (but a ``--stdin-file`` or ``--env-file``
naming one of the launcher's own descriptors, ``/dev/stdin`` or ``/dev/fd/N``: the copy is handed
it). Its proof is the first line of the JSONL: a ``run_started`` carrying this run's id, which
the runner writes only once the container, the registry record and the child all exist. The
launcher creates (truncates) the file itself first, so a stale line from an earlier run can never
pass for that proof, and reads it only through the descriptor that open gave it, never by its path
again: whatever is put at the name since (another user's file, where the directory is theirs,
forging this run's ``run_started`` for a copy that never started) is not read. Where other users
can change the file's directory, the file loses group and other write before the copy starts,
whatever the umask left it (``000``: anyone could rewrite its first line by name once the copy has
ended).
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess

from ..bounded import DETACHED_JSONL, Limits, first_line, loads, read_start
from ..diagnostics import warn
from ..errors import RESERVED_BAND, Failure, Kind, setup_failure
from ..events.emitter import open_stream
from ..loop import Loop
from ..native import let_stream_go
from ..pathtrust import others_can_change
from ..readback import reader
from ..registry.stream_guard import StreamKey
from ..safepath import directory_of, split_file
from ..spec import RunSpec
from ..text import sanitize, signal_named
from ..userfiles import own_stream
from .detach_fds import unnamed, handed_inputs
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
    inputs = (spec.stdin_file, *spec.env.files)
    named = {fd for path in inputs if (fd := named_fd(path)) is not None}
    if any(own_stream(path) == 0 for path in inputs if path):  # a link to /dev/stdin: the copy's is /dev/null
        named.add(0)
    handed = handed_inputs(named)  # before any descriptor of the launcher's own is made: none is one of them
    key = StreamKey()  # let go with the stream's lock, for the copy to take
    try:  # emptied only when no other run writes it (``open_stream``'s lock)
        held, _ = open_stream(spec.jsonl, readable=True, key=key)
    except OSError as exc:
        raise setup_failure(f"could not open the JSONL events file `{spec.jsonl}`", exc) from None
    try:
        _keep_to_this_user(held, spec.jsonl)
        stream = reader(held)  # where the proof is read: the file made, never the path again
    finally:
        key.close()
        let_stream_go(held)  # for the copy to take (``stream`` may share its description): a run given
        # the same path in between takes it instead, and the copy is refused (its words read back)
        os.close(held)
    try:
        _launch(argv, spec, stream if stream >= 0 else None, named, handed)
    finally:
        if stream >= 0:
            os.close(stream)


def _keep_to_this_user(held: int, jsonl: str) -> None:
    """The stream's file ``held`` (made at ``jsonl``) without group and other write, unless it is
    the entry at its name in a directory only this user or root can change: in any other, the
    umask's ``000`` would let anyone there rewrite the proof by name once the copy has ended."""
    found = os.fstat(held)
    if not stat.S_ISREG(found.st_mode) or not found.st_mode & 0o022 or _in_own_directory(jsonl, found):
        return
    try:
        os.fchmod(held, stat.S_IMODE(found.st_mode) & ~0o022)
    except OSError:
        pass  # judged by what the file's mode is now
    if os.fstat(held).st_mode & 0o022:
        raise Failure(
            Kind.SETUP,
            f"could not keep other users from writing the JSONL events file `{jsonl}`, in a directory they can change",
        )


def _in_own_directory(jsonl: str, found: os.stat_result) -> bool:
    """Whether ``found`` is the entry at ``jsonl``'s name in a directory only this user or root
    can change (walked as the file was: anything else, or a failure, is not)."""
    head, name = split_file(jsonl)
    try:
        dir_fd, _ = directory_of([0], head)
    except OSError:
        return False
    try:
        entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return not others_can_change(os.fstat(dir_fd)) and (entry.st_dev, entry.st_ino) == (found.st_dev, found.st_ino)
    except OSError:
        return False
    finally:
        os.close(dir_fd)


def _launch(argv: list[str], spec: RunSpec, stream: int | None, named: set[int], handed: set[int]) -> None:
    """``launch``, the stream's file open to read at ``stream`` (None: no regular file to read),
    the descriptors input paths name ``named`` and those of them the copy is ``handed``."""
    try:
        ready, ready_end = os.pipe2(os.O_CLOEXEC)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot start the detached runner: {exc.strerror}") from None
    try:
        ready_end = unnamed(ready_end, named)
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
        Handshake(copy, spec.jsonl, spec.run_id, ready, Gate.from_env(), stream=stream).complete()
    except Failure as failure:  # run's hint for a shell line given whole ('make test'), as in the foreground
        from ..spawn_words import shell_line_hint

        failure.hint = failure.hint or shell_line_hint(spec.argv[0], failure.message)
        raise
    finally:
        os.close(ready)


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
    the pipe when it says the JSONL failed. ``stream``: a read descriptor on the file the launcher
    made at ``jsonl`` (which only names it), the one place the stream is read; None: not read."""

    def __init__(
        self,
        copy: subprocess.Popen,
        jsonl: str,
        run_id: str,
        ready: int | None = None,
        gate: Gate | None = None,
        *,
        stream: int | None,
    ):
        self._copy = copy
        self._jsonl = jsonl
        self._stream = stream
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
            line, fetched = first_line(self._jsonl, MARKER_LIMIT, DETACHED_JSONL, MARKER_CHUNK, self._reader)
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

    def _reader(self, path: str, limits: Limits) -> int:
        """A copy of ``stream`` (``bounded``'s opener, which closes it: the path only names the
        file), read from the start; OSError where there is none (no regular file: a FIFO's
        lines are its reader's, a device's are none)."""
        if self._stream is None:
            raise OSError(errno.EBADF, f"{path} is read only as the regular file this launcher opened")
        fd = os.dup(self._stream)
        os.lseek(fd, 0, os.SEEK_SET)  # copies share one offset: each read starts at the first line
        return fd

    def _relayed_failure(self) -> Failure:
        """The copy ended before the proof: a reserved code is relayed, anything else is 111; in
        the reference's words (detach.rs's detached_start_failure), then the copy's reason."""
        code = self._copy.returncode
        reason = self._stream_reason() or (f": {self._failed}" if self._failed else "")
        headline = f"run `{self._run_id}` did not start: the detached runner"
        see = f"see `{self._jsonl}`{self._not_made_here()}{reason}"
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

    def _not_made_here(self) -> str:
        """Said after the stream's path when the file at it now is not the one the launcher made
        (and read): the path no longer shows what the copy wrote."""
        if self._stream is None:
            return ""
        try:
            there, made = os.stat(self._jsonl), os.fstat(self._stream)
        except OSError:
            return ""
        if (there.st_dev, there.st_ino) == (made.st_dev, made.st_ino):
            return ""
        return " (the file there now is not the one this launcher made)"

    def _stream_reason(self) -> str:
        """The copy's own words for its failure (its stderr is null; the JSONL is all it has)."""
        try:
            data = read_start(self._jsonl, EVIDENCE_BYTES, DETACHED_JSONL, self._reader)
        except (OSError, ValueError):
            return ""
        for line in data.split(b"\n"):
            try:
                event = loads(line.decode("utf-8"))
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "run_started" and event.get("run_id") != self._run_id:
                return ""  # another run's stream: it took the file in the launcher's gap
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
    named = signal_named(number)
    name = "SIGRT" if named is None else named.name
    return f"signal: {number}" if name.startswith("SIGRT") else f"signal: {number} ({name})"
