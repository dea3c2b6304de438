"""``subprocess.run``'s standard-stream keywords, mapped onto the runner's own flags.

- ``stdout=PIPE`` / ``stderr=PIPE`` / ``capture_output=True`` fill ``result.stdout`` /
  ``result.stderr`` from the run's capture files, which the runner service reads and sends
  back: bounded by ``capture_max_bytes`` like every capture (``result.stdout_capture.truncated``
  says when the child wrote more). Without a ``capture_dir`` the service captures into its
  private scratch directory and removes the files once sent.
- ``text=True`` (or ``universal_newlines``, ``encoding``, ``errors``) decodes them, with
  universal newlines, as subprocess does; ``input`` is then a str.
- ``input=`` travels with the request; the service feeds the child's stdin from a file in
  memory holding it (``--stdin-file`` on a memfd): any size, and no pipe between this process
  and the child that could deadlock.
- ``DEVNULL`` (or None) keeps a stream out of the result; with ``echo=True`` the runner
  forwards both streams, so DEVNULL is refused there. Anything else (``STDOUT``, a file, a
  descriptor, ``stdin=PIPE``) raises ValueError saying what to use instead.
"""

from __future__ import annotations

import codecs
import locale
import subprocess

from .wire import SCRATCH_CAPTURE, SCRATCH_INPUT


KEYWORDS = ("stdin", "stdout", "stderr", "capture_output", "text", "universal_newlines", "encoding", "errors", "input")
STREAMS = ("stdout", "stderr")


class Streams:
    """What one call asked of the standard streams."""

    def __init__(self, options: dict, *, echo: bool):
        """Take the stream keywords out of ``options`` and check them (TypeError/ValueError)."""
        given = {key: options.pop(key) for key in KEYWORDS if key in options}
        capture_output = given.get("capture_output", False)
        if not isinstance(capture_output, bool):
            raise TypeError(f"capture_output must be True or False, not {capture_output!r}")
        self.piped = {name: self._mode(name, given.get(name), echo) for name in STREAMS}
        if capture_output:
            if any(given.get(name) is not None for name in STREAMS):
                raise ValueError("stdout and stderr arguments may not be used with capture_output")
            self.piped = dict.fromkeys(STREAMS, True)
        self.encoding: str | None = given.get("encoding")
        self.errors: str | None = given.get("errors")
        self.text = bool(given.get("text") or given.get("universal_newlines") or self.encoding or self.errors)
        self.input = self._input(given.get("input"))
        stdin = given.get("stdin")
        if stdin not in (None, subprocess.DEVNULL):
            raise ValueError(
                "stdin takes DEVNULL (the runner's default) only: pass input= for data, stdin_file= for a "
                "file, inherit_stdin=True for this process's stdin"
            )
        if self.input is not None and stdin is not None:
            raise ValueError("stdin and input arguments may not both be used")

    @staticmethod
    def _mode(name: str, value, echo: bool) -> bool:
        if value is None:
            return False
        if value == subprocess.PIPE:
            return True
        if value == subprocess.DEVNULL:
            if echo:
                raise ValueError(f"{name}=DEVNULL cannot be honoured with echo=True, which forwards both streams")
            return False
        if value == subprocess.STDOUT:
            raise ValueError(f"{name}=STDOUT is not supported: each stream is captured on its own")
        raise ValueError(
            f"{name} takes PIPE, DEVNULL or None: to keep the output in files, pass capture_dir= (bounded by "
            "capture_max_bytes)"
        )

    def _input(self, value) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str):
            if not self.text:
                raise TypeError("input is a str: pass text=True (or encoding=), or give bytes")
            return value.encode(self._encoding(), self.errors or "strict")
        if isinstance(value, (bytes, bytearray, memoryview)):
            if self.text:
                raise TypeError("input must be a str when text=True")
            return bytes(value)
        raise TypeError(f"input must be bytes or a str, not {type(value).__name__}")

    def _encoding(self) -> str:
        return self.encoding or locale.getpreferredencoding(False)

    @property
    def wanted(self) -> bool:
        return any(self.piped.values())

    def options(self, options: dict) -> dict[str, str]:
        """The run options that serve this call (by dest: the service's stand-ins for its
        scratch places, ``wire``); refuses the combinations the runner cannot serve (ValueError)."""
        fixed = {}
        if self.wanted and options.get("inherit_stdio"):
            raise ValueError("stdout=PIPE / capture_output cannot be used with inherit_stdio=True")
        if self.input is not None:
            if options.get("stdin_file") is not None or options.get("inherit_stdin") or options.get("pty"):
                raise ValueError("input cannot be used with stdin_file, inherit_stdin or pty")
            fixed["stdin_file"] = SCRATCH_INPUT
        if self.wanted and options.get("capture_dir") is None:
            fixed["capture_dir"] = SCRATCH_CAPTURE
        return fixed

    def collect(self, report: dict, captures: dict) -> dict[str, bytes | str | None]:
        """``{"stdout": ..., "stderr": ...}`` from the capture files' content the service sent
        (``captures``: stream -> CaptureInfo or None); a stream not asked for, or never
        captured, is None."""
        found: dict[str, bytes | str | None] = dict.fromkeys(STREAMS)
        for name in STREAMS:
            info = captures.get(name)
            data = report.get(name)
            if not self.piped[name] or info is None or data is None:
                continue
            data = data[: info.bytes_written or 0]
            found[name] = self._decoded(data, complete=not info.truncated) if self.text else data
        return found

    def _decoded(self, data: bytes, *, complete: bool) -> str:
        """Universal newlines, as subprocess's text mode; a capture cut at its cap may end
        inside a character, which is then left out rather than refused."""
        decoder = codecs.getincrementaldecoder(self._encoding())(self.errors or "strict")
        text = decoder.decode(data, final=complete)
        return text.replace("\r\n", "\n").replace("\r", "\n")
