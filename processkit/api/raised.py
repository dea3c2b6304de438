"""What ``subprocess.run`` raises for a run it could not start or whose timeout ended, raised
for the same run here (apart from ``result``: what a finished run gives back)."""

from __future__ import annotations

import subprocess

from ..events.types import SpawnFailed, Timeout
from .result import RunResult, cut_words, with_discarded


class RunTimeout(subprocess.TimeoutExpired):
    """subprocess's TimeoutExpired for a run its timeout ended, carrying the result; its text,
    as RunError's, says what a cut lost of the output and when nothing kept the child's output
    (``RunResult.output_discarded``)."""

    def __init__(self, result: RunResult, timeout: float):
        super().__init__(result.args, timeout, output=result.stdout, stderr=result.stderr)  # type: ignore[arg-type]
        self.result = result

    def __reduce__(self):
        return (type(self), (self.result, self.timeout))

    def __str__(self) -> str:
        return with_discarded("; ".join((super().__str__(), *cut_words(self.result))), self.result)


def raise_as_subprocess(result: RunResult, spec, waits: dict) -> None:
    """What ``subprocess.run`` raises for the same run: the OSError of a program or working
    directory that could not be used (same errno and filename), or TimeoutExpired (``RunTimeout``)
    for a run its timeout ended (with the output captured so far), whose ``timeout`` is the
    number the caller gave for it (``waits``, by the ending's reason), as subprocess keeps it: an
    int stays an int; a duration string is its seconds. Each carries the result as ``result``."""
    if result.source == "spawn_error":
        failed = next((event for event in reversed(result.events) if isinstance(event, SpawnFailed)), None)
        message = failed.message if failed is not None and failed.message else result.message or ""
        if message.startswith("cannot use --cwd"):
            reason = message.rpartition(": ")[2]
            number, filename = _errnos().get(reason), spec.cwd
        else:
            from ..spawn_words import cause

            number, reason = cause(message) or (None, "")
            filename = spec.argv[0]
        if number is None:
            return
        error = OSError(number, reason, filename)
        error.result = result  # type: ignore[attr-defined]
        raise error
    if result.source != "timeout":  # the stream is not walked for an ending that cannot be one
        return
    ending = result.ending
    if isinstance(ending, Timeout):
        given = waits.get(ending.reason)
        raise RunTimeout(result, (ending.timeout_ms or 0) / 1000 if given is None else given)


_ERRNOS: dict[str, int] = {}


def _errnos() -> dict[str, int]:
    """strerror text -> errno: a bad cwd's message names the reason as ``os.strerror`` did."""
    if not _ERRNOS:
        import errno
        import os

        _ERRNOS.update((os.strerror(number), number) for number in sorted(errno.errorcode, reverse=True))
    return _ERRNOS
