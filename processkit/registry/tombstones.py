"""Ended runs' outcomes, remembered for a ``wait`` that starts after the run ended (an
extension: docs/differences.md).

A runner that ends turns its lock file into ``<stem>.ended`` (the run id and ``runner_exit``'s
code, source and child_code) just before it removes its record, so there is no moment when a
waiter finds neither (a record whose lock is gone reads as ended). The files are bounded: a
registry's first one, and every ``TRIM_EVERY``-th after it (counted in the directory's
``TRIM_COUNT`` attribute, whichever processes leave them), trims the registry to the newest
``MAX_KEPT`` (stems sort by start time), so neither a ``run`` nor a batch lists the registry per
tombstone (about ``TRIM_EVERY - 1`` more meanwhile: two runs ending at once may count one);
``prune`` removes those older than ``MAX_AGE_SECONDS``. They live in the user's own 0700
registry, as records do; best effort, as a tombstone only ever adds to what ``wait`` can say.

A batch's jobs leave theirs in the batch's directory while it lives (``registry.lodging``);
when it ends, its delegating record's lock becomes ``<stem>.outcomes``, the newest ``MAX_KEPT``
job outcomes in one file. A batch none of whose jobs was published (``bench``'s session of
short runs, each published only after 50 ms) leaves none: an empty list answers no ``wait``,
yet the file would count towards ``MAX_KEPT`` and push an older run's outcome out (and the
listing and unlink of that trim were most of a ``bench``'s end on a loaded host). Both kinds
count towards the registry's ``MAX_KEPT`` files and age out alike, and ``newest_of`` reads all
three places.
"""

from __future__ import annotations

import errno
import os
import time

from ..jsontext import dumps
from ..plain import counter

SUFFIX = ".ended"
BATCH_SUFFIX = ".outcomes"
KEPT_SUFFIXES = (SUFFIX, BATCH_SUFFIX)
VERSION = 1
MAX_KEPT = 256
MAX_AGE_SECONDS = 24 * 3600
MAX_BYTES = 4096
MAX_BATCH_BYTES = 256 * 1024
TRIM_EVERY = 16
TRIM_COUNT = "user.processkit.trim"  # the registry directory's attribute: tombstones since its last trim
_kept = counter()  # this process's tombstones so far, where the attribute cannot be kept


def document(run_id: str, code: int, source: str, child_code: int | None) -> dict:
    """One run's remembered outcome."""
    return {"tombstone_version": VERSION, "run_id": run_id, "code": code, "source": source, "child_code": child_code}


def bury(directory: str, stem: str, lock_fd: int, kept: dict, suffix: str = SUFFIX) -> bool:
    """Turn the run's held ``<stem>.lock`` into its tombstone: ``kept`` written into it, then
    renamed to ``<stem><suffix>`` (cheaper than a new file, and the lock is going anyway); then,
    on this process's turn, trim the oldest beyond ``MAX_KEPT``. False when it could not be
    done: the caller removes the lock as usual."""
    try:
        data = dumps(kept).encode("utf-8")
        if len(data) > MAX_BATCH_BYTES:
            return False
        os.pwrite(lock_fd, data, 0)
        os.rename(os.path.join(directory, stem + ".lock"), os.path.join(directory, stem + suffix))
    except (OSError, UnicodeEncodeError):
        return False
    if not _trim_due(directory):
        return True
    try:
        ended = sorted(name for name in os.listdir(directory) if name.endswith(KEPT_SUFFIXES))
    except OSError:
        return True
    for name in ended[:-MAX_KEPT]:
        remove_quietly(os.path.join(directory, name))
    return True


def _trim_due(directory: str) -> bool:
    """Whether this tombstone is the one that trims: the first in a registry, then every
    ``TRIM_EVERY``-th, counted in the directory's ``TRIM_COUNT`` attribute (two system calls,
    where listing a registry of a few hundred files costs ~140 us a run). Where the attribute
    cannot be kept (a file system without user attributes, another user's shared registry), a
    process's first tombstone and every ``TRIM_EVERY``-th after it trim instead. Concurrent
    runs may lose a count, so a trim may come a few tombstones late, never skipped."""
    try:
        counted = int(os.getxattr(directory, TRIM_COUNT))
    except OSError as error:
        if error.errno != errno.ENODATA:
            return next(_kept) % TRIM_EVERY == 0
        counted = TRIM_EVERY - 1  # none yet: a registry's first tombstone trims
    except ValueError:
        counted = TRIM_EVERY - 1
    counted = (counted + 1) % TRIM_EVERY
    try:
        os.setxattr(directory, TRIM_COUNT, b"%d" % counted)
    except OSError:
        return next(_kept) % TRIM_EVERY == 0
    return counted == 0


def write_new(directory: str, name: str, kept: dict) -> bool:
    """A new tombstone file (a batch job's, in the batch's private directory); best effort."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(os.path.join(directory, name), flags, 0o600)
    except OSError:
        return False
    try:
        os.write(fd, dumps(kept).encode("utf-8"))
    except (OSError, UnicodeEncodeError):
        return False
    finally:
        os.close(fd)
    return True


def _load(path: str, limit: int):
    """The JSON document in the regular file ``path`` (at most ``limit`` bytes), or None."""
    from ..bounded import REGISTRY_FILE, loads, read_start  # a reader's: a run writes its tombstone, reads none

    try:
        data = read_start(path, limit + 1, REGISTRY_FILE)  # not a link, a FIFO or a device
        return loads(data.decode("utf-8")) if len(data) <= limit else None
    except (OSError, ValueError):  # bounded.InputError, UnicodeDecodeError, not JSON
        return None


def _checked(document) -> dict | None:
    if not isinstance(document, dict) or document.get("tombstone_version") != VERSION:
        return None
    run_id, code, source, child_code = (document.get(key) for key in ("run_id", "code", "source", "child_code"))
    if not isinstance(run_id, str) or type(code) is not int or not isinstance(source, str):
        return None
    if child_code is not None and type(child_code) is not int:
        return None
    return {"run_id": run_id, "code": code, "source": source, "child_code": child_code}


def read(directory: str, name: str) -> dict | None:
    """``{"code", "source", "child_code"}`` and the ``run_id`` of one tombstone, or None."""
    return _checked(_load(os.path.join(directory, name), MAX_BYTES))


def read_batch(directory: str, name: str) -> list[dict]:
    """A batch's remembered job outcomes, oldest first (the malformed ones left out)."""
    document = _load(os.path.join(directory, name), MAX_BATCH_BYTES)
    if not isinstance(document, dict) or document.get("tombstone_version") != VERSION:
        return []
    outcomes = document.get("outcomes")
    if not isinstance(outcomes, list):
        return []
    return [found for found in map(_checked, outcomes) if found is not None]


def of_stem(directory: str, stem: str) -> dict | None:
    return read(directory, stem + SUFFIX)


def newest_of(directory: str, run_id: str, lodgings: list[str] | tuple = ()) -> dict | None:
    """The outcome of the ended run named ``run_id`` that ended last, if one is remembered: in a
    live batch's directory (``lodgings``, newest there), else in the registry's tombstones and
    ended batches' outcomes. Last to end, not last to start: of two runs sharing an id at once,
    the one whose ``runner_exit`` came last is the id's last word (docs/control-plane.md)."""
    for place in lodgings:
        found = _newest_in(place, run_id, (SUFFIX,))
        if found is not None:
            return found
    return _newest_in(directory, run_id, KEPT_SUFFIXES)


def _newest_in(directory: str, run_id: str, suffixes: tuple) -> dict | None:
    """A file's modification time is its end: the runner writes its tombstone as it ends (a
    batch's outcomes as the batch ends, its jobs there in the order they ended)."""
    try:
        with os.scandir(directory) as listed:
            ended = sorted(((_written_at(e), e.name) for e in listed if e.name.endswith(suffixes)), reverse=True)
    except OSError:
        return None
    for _, name in ended:
        if name.endswith(BATCH_SUFFIX):
            found = next((kept for kept in reversed(read_batch(directory, name)) if kept["run_id"] == run_id), None)
        else:
            found = read(directory, name)
        if found is not None and found["run_id"] == run_id:
            return found
    return None


def _written_at(entry: os.DirEntry) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_mtime_ns
    except OSError:  # trimmed meanwhile: read (and found gone) last
        return -1


def expire(directory: str, *, dry_run: bool) -> int:
    """Remove the tombstones older than ``MAX_AGE_SECONDS``; how many were (or would be)."""
    oldest = time.time() - MAX_AGE_SECONDS
    try:
        names = [name for name in os.listdir(directory) if name.endswith(KEPT_SUFFIXES)]
    except OSError:
        return 0
    count = 0
    for name in names:
        path = os.path.join(directory, name)
        try:
            if os.stat(path, follow_symlinks=False).st_mtime >= oldest:
                continue
        except OSError:
            continue
        count += 1
        if not dry_run:
            remove_quietly(path)
    return count


def remove_quietly(path: str) -> bool:
    """Unlink ``path`` if it can be: a file that cannot go is left to the next pass. False only
    when it was already gone (a concurrent pruner's removal, not this one's to count); a file
    that cannot go still counts, as the reference counts a stale entry whether or not it went."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError:
        pass
    return True
