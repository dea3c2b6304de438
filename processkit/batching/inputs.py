"""A job's ``inputs`` (paths or globs), as Bazel decides what runs again: by content. Each
matched file's SHA-256 is taken as the job starts (the content it ran with) and recorded in its
summary line (``inputs_sha256``); ``--resume`` runs a job again when a digest it finds now
differs, a file is new or gone, whatever the files' times say. Outputs are not tracked.

Paths are the job's: relative ones from its ``cwd`` (else the batch's). A pattern that matches
nothing is recorded with an empty digest, so its file appearing later is a change too. Files
are read through ``bounded`` (opened without waiting; a FIFO, a device or a directory is no
input's content and is recorded as its kind), a chunk at a time.
"""

from __future__ import annotations

import glob
import hashlib
import os

from ..bounded import InputError, Limits
from ..userfiles import open_judged

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .manifest import Job

INPUT = Limits("job input", total=None)
CHUNK = 1 << 20
MAX_MATCHES = 100_000  # files one job's inputs may name in all


def digests(job: Job) -> dict[str, str] | None:
    """``{path: hex SHA-256}`` for every file the job's inputs match (None: it names none)."""
    patterns = job.plan.inputs
    if not patterns:
        return None
    base = job.template.cwd or os.getcwd()
    found: dict[str, str] = {}
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
        matches = sorted(glob.glob(full, recursive=True)) if glob.has_magic(pattern) else [full]
        if not any(os.path.lexists(path) for path in matches):
            found[pattern] = ""
            continue
        for path in matches[: MAX_MATCHES - len(found)]:
            shown = path if os.path.isabs(pattern) else os.path.relpath(path, base)
            found[shown] = _sha256(path)
    return found


def _sha256(path: str) -> str:
    try:
        fd = open_judged(path, INPUT)
    except InputError as exc:
        return f"not a regular file: {str(exc).rsplit('it is ', 1)[-1]}"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        os.set_blocking(fd, True)
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def changed(job: Job, recorded: dict[str, str] | None) -> str | None:
    """Why ``job`` must run again although it exited 0 (an input's content changed since), or None."""
    now = digests(job)
    if now is None or now == recorded:
        return None
    if recorded is None:
        return "its inputs were not recorded when it exited 0"
    for path in sorted(set(now) | set(recorded)):
        if now.get(path) != recorded.get(path):
            what = "is new" if path not in recorded else "is gone" if path not in now else "changed"
            return f"its input {path} {what}"
    return None
