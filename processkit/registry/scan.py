"""Reading the registry directory: every record that passes the read-side checks, and the lock
files no record accounts for (docs/control-plane.md §2.5, §2.6).

A live batch's record delegates to its directory (``batch_records``, ``control.lodging``): the
records there, its jobs', are read in its place, as if they were in the registry, once the
directory is shown to be a run directory in one of ``rundir.bases()``, this user's, mode 0700,
not a link, on a path only this user and root can change (``safepath``). A delegating record that is not live, or whose directory fails a check, is read as the
record it is (so ``prune`` removes a dead batch's like any stale entry)."""

from __future__ import annotations

import errno
import os

from .. import rundir_shape
from ..bounded import REGISTRY_FILE, read_start
from ..errors import Failure, Kind, utf8_error_words
from ..rundir_records import job_files
from ..safepath import private_directory
from . import lock
from .location import RegistryError, open_for_reading, unreadable
from .records import MAX_RECORD_BYTES, Record, parse
from ..plain import Frozen

RECORD_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"


class Entry(Frozen):
    """One readable record and where it lives."""

    directory: str
    name: str
    record: Record
    delegated: bool = False  # a batch job's, in its batch's directory: the batch's lock, never pruned

    @property
    def path(self) -> str:
        return os.path.join(self.directory, self.name)

    def sort_key(self) -> tuple:
        return (self.record.run_id, self.record.started_at, self.path)

    def probe(self, *, hold: bool = False) -> tuple[lock.Health, int | None]:
        return lock.probe(self.directory, self.record.lock_file, hold=hold)

    def health(self) -> lock.Health:
        return self.probe()[0]

    def exists(self) -> bool:
        return os.path.lexists(self.path)


def load(path: str) -> Record | None:
    """The record at ``path``, or None when it is unreadable or fails its checks; raises
    FileNotFoundError when there is no file at all."""
    try:
        return reread(path)
    except FileNotFoundError:
        raise
    except OSError:
        return None


def reread(path: str) -> Record | None:
    """``load`` telling an unreadable record (its OSError raised, as the reference's
    probe_entry; one too large or not UTF-8 too, in its read_record_text's words) from one
    failing its checks (None)."""
    try:
        data = read_start(path, MAX_RECORD_BYTES + 1, REGISTRY_FILE)  # not a link, a FIFO or a device
    except ValueError:  # bounded.InputError: a link, FIFO or device at the record's name
        return None
    if len(data) > MAX_RECORD_BYTES:
        raise OSError(errno.EFBIG, "registry record exceeds the maximum supported size")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OSError(errno.EILSEQ, utf8_error_words(exc)) from None
    return parse(text)


def names(directory: str | None) -> list[str]:
    """The directory's file names; an absent directory has none."""
    if directory is None:
        return []
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RegistryError(unreadable(exc)) from None


def entries(
    directory: str | None, listing: list[str], lodgings: list[str] | None = None, batches: list[Entry] | None = None
) -> list[Entry]:
    """Every readable record, in the reference order: run_id, then started_at, then path; a
    live delegation's records in its place (their directories added to ``lodgings``, the
    delegating entries themselves to ``batches``)."""
    if directory is None:  # no registry yet, so nothing listed
        return []
    found = []
    for name in listing:
        if not name.endswith(RECORD_SUFFIX):
            continue
        try:
            record = load(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        if record is None:
            continue
        lodging = _followed(directory, record)
        if lodging is None:
            found.append(Entry(directory, name, record))
            continue
        if lodgings is not None:
            lodgings.append(lodging)
        if batches is not None:
            batches.append(Entry(directory, name, record))
        for job in job_files(lodging, RECORD_SUFFIX):
            try:
                delegated = load(os.path.join(lodging, job))
            except FileNotFoundError:
                continue
            if delegated is not None and delegated.batch_records is None:
                found.append(Entry(lodging, job, delegated, True))
    return sorted(found, key=Entry.sort_key)


def _followed(directory: str, record: Record) -> str | None:
    """The directory a live delegating record names, when it may be read as the registry is."""
    target = record.batch_records
    if target is None or lock.probe(directory, record.lock_file)[0] is not lock.Health.LIVE:
        return None
    if not rundir_shape.shaped(target):
        return None
    try:  # this user's, not a link, on a path only this user and root can change
        fd = private_directory(target, create=False)
    except OSError:
        return None
    if fd is None:
        return None
    try:
        private = not os.fstat(fd).st_mode & 0o077
    finally:
        os.close(fd)
    return target if private else None


class View(Frozen):
    """The registry as one read-only pass saw it."""

    directory: str | None
    listing: list[str]
    entries: list[Entry]
    lodgings: list[str] = []  # the live batches' directories the entries were read from
    # The live batches' own records, read in their jobs' place: ``wait`` waits for them as the
    # reference's reader would, which sees each as a run (no job), live until its batch ends.
    batches: list[Entry] = []

    def orphan_locks(self) -> list[str]:
        """Lock files claimed neither by a record file (readable or not) nor by a record."""
        stems = {name[: -len(RECORD_SUFFIX)] for name in self.listing if name.endswith(RECORD_SUFFIX)}
        claimed = {entry.record.lock_file for entry in self.entries}
        return sorted(
            name
            for name in self.listing
            if name.endswith(LOCK_SUFFIX) and name[: -len(LOCK_SUFFIX)] not in stems and name not in claimed
        )


def read(failure_kind: Kind, refusing: str | None = None) -> View:
    """One read-only pass over the registry; an unreadable registry is a ``failure_kind``
    Failure (``registry`` under 103 for a by-id client, under 111 for the others), after the
    by-id client's ``refusing`` words (``cannot inspect run `x```) when it gives them."""
    try:
        directory = open_for_reading()
        listing = names(directory)
    except RegistryError as exc:
        raise Failure(failure_kind, f"{refusing}: {exc}" if refusing else str(exc)) from None
    lodgings: list[str] = []
    batches: list[Entry] = []
    return View(directory, listing, entries(directory, listing, lodgings, batches), lodgings, batches)
