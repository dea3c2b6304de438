"""``subprocess``'s standard-stream keywords, mapped onto the runner's own flags.

- ``stdout=PIPE`` / ``stderr=PIPE`` / ``capture_output=True`` on ``run`` fill ``result.stdout`` /
  ``result.stderr`` from the run's capture files, which the runner service reads and sends back.
  Every byte the child wrote, as subprocess gives it: the capture of a stream the caller asked for
  has no cap unless the caller sets one (``capture_max_bytes``); a cap that cuts is said
  (``warnings.warn``, and ``check=True`` raises). The file is in the service's scratch directory
  (a tmpfs where there is one, so memory, as subprocess's buffers) unless ``capture_dir`` names one.
- On ``start`` a PIPE is a pipe, as ``Popen``'s: the child writes into it and the caller reads
  ``handle.stdout`` / ``handle.stderr`` (``stdin=PIPE``: writes ``handle.stdin``). Its other end
  travels to the service with the request (``SCM_RIGHTS``), as does a file object or descriptor
  given for a stream: the child gets that descriptor as its own, as a subprocess child does.
- ``stderr=STDOUT`` puts both streams into one (the child's 2 is its 1: the same pipe, in the order
  the child wrote), read, captured or handed on as stdout.
- ``text=True`` (or ``universal_newlines``, ``encoding``, ``errors``) decodes, with universal
  newlines, as subprocess does; ``input`` is then a str.
- ``input=`` travels with the request; the service feeds the child's stdin from a file in memory
  holding it (``--stdin-file`` on a memfd): any size, and no pipe between this process and the
  child that could deadlock. One over ``given_input.INLINE_INPUT`` is written here into a memfd that travels
  as a descriptor (``input_file``): pickled into the frame it was copied twice here and twice
  in the service (200 MiB raised this process's peak by ~600 MiB and the service's by ~400),
  and one of 4 GiB or more did not fit the frame's length at all (``struct.error``).
- ``DEVNULL`` (or None) keeps a stream out of the result.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import locale
import os
import subprocess
from typing import IO

from .. import native
from ..capture_layout import STREAMS
from ..spec import U64_MAX
from . import given_input
from .cut_text import decode_kept
from .wire import SCRATCH_CAPTURE, SCRATCH_INPUT, read_back

KEYWORDS = ("stdin", "stdout", "stderr", "capture_output", "text", "universal_newlines", "encoding", "errors", "input")
NO_CAP = U64_MAX  # the capture of a stream asked for, when the caller sets no cap: every byte


def discard(report: dict) -> None:
    """Remove the scratch directory the runner service handed over with a reply's large
    captures (``*_file``), once read or when the reply is dropped (an interrupted call)."""
    spilled = [report[key] for key in ("stdout_file", "stderr_file") if key in report]
    if spilled:
        import shutil

        shutil.rmtree(os.path.dirname(spilled[0]), ignore_errors=True)


def _descriptor(name: str, value) -> int:
    """The descriptor of a file object or an int, as subprocess takes them (TypeError/ValueError)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} takes PIPE, DEVNULL, None, a file object or a descriptor, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{name}={value} is no descriptor: pass PIPE, DEVNULL, None, a file object or one >= 0")
        return value
    fileno = getattr(value, "fileno", None)
    if fileno is None:
        raise TypeError(f"{name} takes PIPE, DEVNULL, None, a file object or a descriptor, not {type(value).__name__}")
    return fileno()


class Streams:
    """What one call asked of the standard streams. ``given`` holds, per standard stream, a
    descriptor of the caller's the child gets as its own (a file, a descriptor, a pipe end), and
    ``opened`` the ones made here (closed once sent); ``readers`` the caller's ends of ``start``'s
    pipes, stream -> descriptor."""

    def __init__(self, options: dict, *, echo: bool, live: bool = False):
        """Take the stream keywords out of ``options`` and check them (TypeError/ValueError).
        ``live``: a ``start`` call, whose PIPE is a pipe this process reads (or writes)."""
        given = {key: options.pop(key) for key in KEYWORDS if key in options}
        capture_output = given.get("capture_output", False)
        if not isinstance(capture_output, bool):
            raise TypeError(f"capture_output must be True or False, not {capture_output!r}")
        if capture_output:
            if any(given.get(name) is not None for name in STREAMS):
                raise ValueError("stdout and stderr arguments may not be used with capture_output")
            given["stdout"] = given["stderr"] = subprocess.PIPE
        self.live = live
        # The file objects whose descriptors ``given`` holds, kept until the request went: one
        # the call's own keyword held alone (``stdin=open(path)``) was closed when ``options``
        # let it go, and its number, reused by the next open (the service's socket), went instead.
        self.objects: list = []
        self.piped = dict.fromkeys(STREAMS, False)
        self.given: list[int | None] = [None, None, None]
        self.merged = False
        self.nulled: list[str] = []  # the streams the caller sent to DEVNULL: discarded as asked
        self.stdin_pipe = False
        for index, name in enumerate(STREAMS, 1):
            self._output(index, name, given.get(name), echo)
        self.encoding: str | None = given.get("encoding")
        self.errors: str | None = given.get("errors")
        self.text = bool(given.get("text") or given.get("universal_newlines") or self.encoding or self.errors)
        codec = (self._encoding(), self.errors or "strict") if self.text else None
        if codec is not None:  # a codec that does not exist is refused before any run starts, as Popen does
            codecs.lookup(codec[0])
            codecs.lookup_error(codec[1])
        self.input = given_input.taken(given.get("input"), codec)
        stdin = given.get("stdin")
        if self.input is not None and stdin is not None:
            raise ValueError("stdin and input arguments may not both be used")
        if stdin == subprocess.PIPE:
            if live:
                self.stdin_pipe = True
            else:  # subprocess.run closes a stdin pipe it has no input for: the child reads its end
                self.input = b""
        elif stdin not in (None, subprocess.DEVNULL):
            self.given[0] = _descriptor("stdin", stdin)
            self.objects.append(stdin)
        if echo and self.given[1] is not None and self.given[2] is not None:
            raise ValueError("echo=True forwards the child's output, but stdout and stderr both go elsewhere")
        self.opened: list[int] = []
        self.readers: dict[str, int] = {}
        self.scratch = False  # the captures are the service's scratch files (``options``): checked as read

    def _output(self, index: int, name: str, value, echo: bool) -> None:
        if value is None or value == subprocess.DEVNULL:
            if value is not None:
                self.nulled.append(name)
                if echo:  # the echo forwards the other stream only
                    self.given[index] = -1  # /dev/null, opened only when the call is sent
            return  # else the runner reads the stream and keeps it out of the result
        if value == subprocess.PIPE:
            self.piped[name] = True
        elif value == subprocess.STDOUT:
            if name == "stdout":
                raise ValueError("STDOUT is only for stderr: stderr=STDOUT puts both streams into stdout")
            self.merged = True
        else:
            self.given[index] = _descriptor(name, value)
            self.objects.append(value)

    def _encoding(self) -> str:
        return self.encoding or locale.getpreferredencoding(False)

    @property
    def wanted(self) -> bool:
        """The output comes back in the result (``run``'s PIPE: a capture read back)."""
        return not self.live and self.asked

    def options(self, options: dict) -> dict[str, object]:
        """The run options that serve this call (by dest: the service's stand-ins for its
        scratch places, ``wire``); refuses the combinations the runner cannot serve (ValueError)."""
        fixed: dict[str, object] = {}
        own = self.merged or self.own
        if (self.wanted or own) and options.get("inherit_stdio"):
            raise ValueError("stdin/stdout/stderr other than None cannot be used with inherit_stdio=True")
        if own and options.get("pty"):
            raise ValueError("stdin/stdout/stderr other than None cannot be used with pty=True (one terminal)")
        unread, idle = self.unread, "not with stdout/stderr given a file, a descriptor or start()'s PIPE"
        if options.get("idle_timeout") is not None and unread:
            raise ValueError(f"idle_timeout watches the output the runner reads: {idle}")
        keyword = "capture_dir" if options.get("capture_dir") is not None else "jsonl" if options.get("jsonl") else ""
        if unread and keyword and (keyword == "capture_dir" or self.wanted):  # its output_captured would say 0 bytes
            past = "the file, descriptor or pipe given (or /dev/null: DEVNULL with echo=True), past the runner"
            raise ValueError(
                f"{keyword} records {unread[0]}'s capture, but the child writes {unread[0]} straight to {past}"
            )
        if (self.given[0] is not None or self.stdin_pipe) and (
            options.get("stdin_file") is not None or options.get("inherit_stdin")
        ):
            raise ValueError("stdin cannot be used with stdin_file or inherit_stdin")
        if self.input is not None:
            if options.get("stdin_file") is not None or options.get("inherit_stdin") or options.get("pty"):
                raise ValueError("input cannot be used with stdin_file, inherit_stdin or pty")
            fixed["stdin_file"] = SCRATCH_INPUT
        if self.wanted:
            if options.get("capture_dir") is None:
                fixed["capture_dir"] = SCRATCH_CAPTURE
                self.scratch = True
            if options.get("capture_max_bytes") is None:  # every byte, unless the caller sets a cap
                fixed["capture_max_bytes"] = NO_CAP
        return fixed

    @property
    def own(self) -> bool:
        """The child gets descriptors of this call's for some standard stream (``child_fds``)."""
        return self.stdin_pipe or any(fd is not None for fd in self.given) or self.live and self.asked

    def dropped(self, spec) -> str:
        """What a failed run's error adds when nothing kept some of the child's output ("" when
        every stream went somewhere): subprocess's child would have written it to the caller's
        streams. A stream is kept when echoed (``inherit_stdio`` echoes), under the caller's
        ``capture_dir``, piped, given a file or descriptor, or sent to DEVNULL (the caller asked);
        stderr into stdout (``stderr=STDOUT``, a pty's one terminal) goes as stdout goes. The
        advice names only keywords this call takes: ``start``'s PIPE is a pipe someone must read."""
        if spec.echo or spec.capture_dir not in (None, SCRATCH_CAPTURE):
            return ""
        lost = [
            name for index, name in enumerate(STREAMS, 1) if not self._kept(index, name) and name not in self.nulled
        ]
        one = self.merged or spec.pty
        if "stdout" not in lost and (one or "stderr" not in lost):
            return ""
        if one or len(lost) == 2:
            what, how, pipes = "output", "echo=False and nothing captured", "stdout=PIPE"
            if not self.merged:
                pipes = "stdout=PIPE and stderr=PIPE" if self.live else "capture_output=True"
        else:
            what, how = lost[0], "echo=False and not captured"
            pipes = f"{what}=PIPE"
            if what == "stderr" and self._kept(1, "stdout"):
                pipes += " or stderr=STDOUT"
        said = f"its {what} was discarded ({how}): pass "
        if not self.live:
            return f"{said}{pipes}, echo=True or capture_dir= to keep it"
        if spec.idle_timeout_ms is not None or spec.pty:  # which refuse start()'s pipes
            return f"{said}echo=True or capture_dir= to keep it"
        return f"{said}echo=True or capture_dir= to keep it (or {pipes} read with communicate())"

    def _kept(self, index: int, name: str) -> bool:
        """The stream comes back (``run``'s PIPE), is the caller's pipe, or goes to its file."""
        return self.piped[name] or self.given[index] is not None

    @property
    def unread(self) -> list[str]:
        """The output streams the child writes past the runner (to a file, a descriptor, a pipe, /dev/null)."""
        return [n for i, n in enumerate(STREAMS, 1) if self.given[i] is not None or self.live and self.piped[n]]

    @property
    def asked(self) -> bool:
        """Some output stream is PIPE (read back on ``run``, a pipe on ``start``)."""
        return any(self.piped.values())

    def descriptors(self) -> tuple[tuple[bool, bool, bool], list[int]]:
        """What the request carries for the child's 0, 1, 2 (which are given) and the descriptors,
        in stream order; ``start``'s pipes are made here, this process keeping the other ends."""
        fds: list[int] = []
        for index, fd in enumerate(self.given):
            if fd == -1:
                fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
                self.opened.append(fd)
            elif (
                fd is None
                and self.live
                and (index == 0 and self.stdin_pipe or index and self.piped[STREAMS[index - 1]])
            ):
                read, write = os.pipe()
                if index == 0:
                    self.readers["stdin"], fd = write, read
                else:
                    self.readers[STREAMS[index - 1]], fd = read, write
                self.opened.append(fd)
            if fd is not None:
                fds.append(fd)
            self.given[index] = fd
        return tuple(fd is not None for fd in self.given), fds  # type: ignore[return-value]

    def input_file(self) -> int | None:
        """``input``'s memfd when it is over ``INLINE_INPUT`` (``given_input.memfd``), closed by
        ``sent``, ``input`` then None; else None, ``input`` the bytes the frame carries. A view of
        the caller's object is let go of here: held, it would block the object's ``close()``."""
        fd = given_input.memfd(self.input)
        if isinstance(self.input, memoryview):
            with self.input as view:
                self.input = None if fd is not None else view.tobytes()
        elif fd is not None:
            self.input = None
        if fd is not None:
            self.opened.append(fd)
        return fd

    def sent(self) -> None:
        """The request went: the descriptors made for the child are the service's now."""
        for fd in self.opened:
            os.close(fd)
        self.opened = []
        self.objects = []  # the service holds its copies of their descriptors now
        if isinstance(self.input, memoryview):  # a call that failed before its input was written
            self.input.release()

    def unsent(self) -> None:
        """The request failed (no descriptor for the next pipe, the service gone): the caller's ends
        of ``start``'s pipes made for it are closed, never left open for the process's life."""
        readers, self.readers = self.readers, {}
        for fd in readers.values():  # one that fails (EIO: closed all the same) leaves none after it open
            with contextlib.suppress(OSError):
                os.close(fd)

    def files(self) -> dict[str, IO]:
        """``start``'s ends of its pipes as Popen's file objects: binary, or text as Popen's."""
        found: dict[str, IO] = {}
        for name, fd in self.readers.items():
            mode = "wb" if name == "stdin" else "rb"
            raw = open(fd, mode, closefd=True)  # a pipe end of this call: the handle closes it, as Popen does
            if self.text:
                found[name] = io.TextIOWrapper(
                    raw, encoding=self._encoding(), errors=self.errors or "strict", write_through=name == "stdin"
                )
            else:
                found[name] = raw
        self.readers = {}
        return found

    def collect(self, report: dict, captures: dict, started: bool) -> dict[str, bytes | str | None]:
        """``{"stdout": ..., "stderr": ...}`` from the capture files' content the service sent
        (``captures``: stream -> CaptureInfo or None); a stream not asked for, or never
        captured, is None. ``started``: a child ran; a stream asked for of a run that started
        none (a request the service refused) is empty, as subprocess's ``b""``, never None."""
        found: dict[str, bytes | str | None] = dict.fromkeys(STREAMS)
        if self.live:
            return found
        for name in self.unread:  # the scratch capture of a stream the runner never saw: no capture
            captures[name] = None
        try:
            for name in STREAMS:
                if not started:  # nothing ran, nothing is read
                    if self.piped[name]:
                        found[name] = "" if self.text else b""
                    continue
                info = captures.get(name)
                data = report.get(name)
                if (
                    data is None and f"{name}_file" in report
                ):  # ``held_capture.INLINE_MOST``: at most what the run wrote
                    data = _read_scratch(report, name)
                if not self.piped[name] or info is None or data is None:
                    continue
                if self.scratch:  # the bytes the run captured, or None and said
                    data = _as_captured(report, name, data)
                    if data is None:
                        continue
                elif len(data) > (info.bytes_written or 0):
                    data = data[: info.bytes_written or 0]
                found[name] = self.decoded(data, info) if self.text else data
        finally:
            discard(report)
        return found

    def decoded(self, data: bytes, info=None) -> str:
        """Universal newlines, as subprocess's text mode; a capture a cap cut (``info``, its
        CaptureInfo) may split a character at a cut, which is then left out rather than refused."""
        kept, seen = None, len(data)
        if info is not None:  # a record with no ranges: the file is the stream's head
            kept, seen = info.kept if info.kept is not None else ((0, len(data)),), info.bytes_seen or 0
        text = decode_kept(data, kept, seen, self._encoding(), self.errors or "strict")
        return text.replace("\r\n", "\n").replace("\r", "\n")


def _read_scratch(report: dict, name: str) -> bytes | None:
    """A capture the service left in its scratch (over ``INLINE_MOST``), read here by its path;
    one that cannot be read is None and said (``unkept``): a caller at its open-file limit got
    None with code 0 and no word, its output lost unsaid."""
    failed: list[OSError] = []  # read_back's error, if any
    most = report.get(f"{name}_most", 0)
    data = read_back(report[f"{name}_file"], follow=False, most=most, failed=failed)
    if data is None:
        why = "its file in the runner service's scratch could not be read"
        why += "".join(f" ({exc.strerror})" for exc in failed[:1])  # EMFILE, above all
        report.setdefault("unkept", []).append((name, most, why))
    return data


def _as_captured(report: dict, name: str, data: bytes) -> bytes | None:
    """``data``, a capture read back from the service's scratch (in the reply, or read here by its
    path), when it holds the bytes the run captured: the SHA-256 the engine recorded, which the
    service sends (``{name}_sha256``; none sent is a mismatch). Else None and said (``unkept``):
    the file is this user's, so any process of the user's (another call's child) may write into it,
    or shorten it, before it is read, and those bytes would come back as this run's output."""
    if native.sha256_hex(data) == report.get(f"{name}_sha256"):
        return data
    why = "its file in the runner service's scratch was changed before it was read (not the bytes the run captured)"
    report.setdefault("unkept", []).append((name, len(data), why))
    return None
