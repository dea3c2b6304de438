"""Builds the child's environment: clear → remove → files → --env → --run-id-env, later wins."""

from __future__ import annotations

import errno
import os
import stat

from ..errors import Failure, Kind, setup_failure
from ..spec import EnvPlan

# An env file is read whole into memory, so it is bounded. A run carried alone (``run``) may read
# a pipe or FIFO, since ``--env-file <(secret-tool ...)`` keeps secrets off the disk: that wait
# holds up no other run, and a stop signal keeps its default effect there (``launch``). A run
# carried beside others (a batch's job) reads only a regular file or /dev/null (empty at once):
# the open is non-blocking and what it opened is checked, so a file swapped for a FIFO since the
# manifest was read fails that job, never freezes the batch.
ENV_FILE_LIMIT = 1 << 20


def _read_env_file(path: str, *, alone: bool) -> list[tuple[str, str]]:
    """Parse an env file like repeated ``--env``; errors name the line, never the value."""
    from ..text import WHITESPACE, env_key_problem  # here: a run without an env file loads no ``text``
    from ..userfiles import open_input

    try:
        fd = open_input(path, never_wait=not alone)
        try:  # closed even when the wait is broken into (KeyboardInterrupt)
            if alone and stat.S_ISFIFO(os.fstat(fd).st_mode):
                _writer_seen(fd)
            raw = _to_end(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise setup_failure(f"could not read environment file `{path}`", exc) from None
    if len(raw) > ENV_FILE_LIMIT:
        raise Failure(
            Kind.SETUP,
            f"invalid environment file `{path}`: it holds more than {ENV_FILE_LIMIT >> 20} MiB, the most it may",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Failure(
            Kind.SETUP, f"invalid environment file `{path}`: environment file must contain valid UTF-8"
        ) from None
    entries = []
    # A byte order mark an editor put first (Notepad's UTF-8) is no part of the first key, as
    # Docker's --env-file reads it: kept, the child got "\ufeffA", not A, without a word.
    pieces = text.removeprefix("\ufeff").split("\n")
    for number, line in enumerate(pieces, start=1):
        if number < len(pieces) and line.endswith("\r"):  # as Rust's str::lines: "\r\n" ends a line
            line = line[:-1]
        stripped = line.strip(WHITESPACE)
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        problem = "expected KEY=VALUE" if not sep else env_key_problem(key)
        if problem is None and "\0" in value:
            problem = "the value holds a NUL byte, which no environment can carry"
        if problem:
            raise Failure(Kind.SETUP, f"invalid environment file `{path}`: line {number}: {problem}")
        entries.append((key, value))
    return entries


def _writer_seen(fd: int) -> None:
    """Wait on the FIFO or pipe ``fd`` (this run's own non-blocking open: the FIFO judged, whatever
    the name holds now) until it has something to read or a writer came and went, then make its
    reads wait, so it is read to its writer's close: a writerless non-blocking read end would read
    as an empty file, where the writer of ``<(producer)`` or a FIFO may come later. The kernel
    reports no hang-up on a FIFO's read end before a writer has opened it. Never an open again:
    that waits for a *new* writer, and one that wrote and closed in between (``producer > FIFO &``,
    whose open waited for this one) left the run waiting for ever, its lines unread in the pipe."""
    import select

    waiting = select.poll()  # not ``select.select``: a descriptor past 1023 (a caller's many) is fine
    waiting.register(fd, select.POLLIN)  # a hang-up is reported whatever the mask
    waiting.poll()
    os.set_blocking(fd, True)


def _to_end(fd: int) -> bytes:
    """The file to its end of file, at most ``ENV_FILE_LIMIT`` + 1 bytes. A read that would wait
    (the descriptor is non-blocking but for a FIFO's) is a file that waits for data: a kernel file
    (``trace_pipe``), a terminal in line mode (a line each read). What came before that wait was
    taken for the whole file, its later lines lost without a word; it is refused instead (OSError
    EAGAIN), as one with nothing yet: no end of file, so no whole to parse."""
    raw = bytearray()
    while len(raw) <= ENV_FILE_LIMIT:
        try:
            chunk = os.read(fd, ENV_FILE_LIMIT + 1 - len(raw))
        except BlockingIOError:
            found = f"its first {len(raw)} bytes came, then no end of file" if raw else "it has nothing to read yet"
            raise OSError(errno.EAGAIN, f"{found} (a file that waits for data: none of it is used)") from None
        if not chunk:
            break
        raw += chunk
    return bytes(raw)


def _inherited() -> dict[str, str]:
    """``os.environ`` as text. Decoding it costs three conversions per variable, and a batch's jobs
    mostly find it as the job before found it: the decoded copy is kept with the bytes it came
    from, and made again only when those changed (a caller's ``os.environ[...] = ...`` or
    ``putenv``-backed change shows there; the read is ``os.environ``'s own mapping)."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):  # not CPython's POSIX os.environ: decoded as it comes
        return dict(os.environ)
    kept_raw, kept = _INHERITED[0]
    if raw != kept_raw:
        kept_raw, kept = dict(raw), dict(os.environ)
        _INHERITED[0] = (kept_raw, kept)  # one store: a thread sees the old pair or the new
    return kept


_INHERITED: list[tuple[dict, dict[str, str]]] = [({None: None}, {})]  # (os.environ's bytes, their text)


def build_environment(
    plan: EnvPlan, run_id: str, base: dict[str, str] | None = None, *, alone: bool = True
) -> dict[str, str]:
    """``alone``: no other run shares the loop, so an env file may be a pipe (waited for)."""
    env = {} if plan.clear else dict(_inherited() if base is None else base)
    for key in plan.remove:
        env.pop(key, None)
    for path in plan.files:
        env.update(_read_env_file(path, alone=alone))
    env.update(plan.assignments)
    if plan.run_id_key is not None:
        env[plan.run_id_key] = run_id
    return env
