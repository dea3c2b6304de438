"""A run's own entry: lock first, record second, both removed at every ending the runner
lives to see (docs/control-plane.md §2.2)."""

from __future__ import annotations

import os

from . import lock, tombstones
from ..errors import os_error_words
from .location import RegistryError
from .records import MAX_RECORD_BYTES, Record


class Registration:
    """A held lock and, once ``write`` succeeds, the record that names it."""

    def __init__(self, directory: str):
        self.directory = directory
        self.stem, lock_fd = lock.create(directory)
        self._lock_fd: int | None = lock_fd  # None once closed
        self._record_written = False
        self._run_id: str | None = None

    @property
    def lock_name(self) -> str:
        return self.stem + ".lock"

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory, self.stem + suffix)

    def write(self, record: Record) -> None:
        """Publish ``record``; raises RegistryError (the caller then closes, dropping the lock)."""
        self._record_written = write_record(self._path(".json"), record)
        self._run_id = record.run_id

    def close(self, ended: tuple[int, str, int | None] | None = None, *, kept: dict | None = None) -> None:
        """Remove the record, then the lock, then let the lock go. Idempotent. ``ended``
        (``runner_exit``'s code, source, child_code) is first remembered: the lock file
        becomes the run's tombstone; ``kept``, a batch's job outcomes, its ``.outcomes`` file
        (none for a batch none of whose jobs was published: an empty list answers no ``wait``)."""
        if self._lock_fd is None:
            return
        suffixes = (".json", ".lock") if self._record_written else (".lock",)
        remembered = None
        if kept is not None:
            remembered = (kept, tombstones.BATCH_SUFFIX) if kept.get("outcomes") else None
        elif ended is not None and self._run_id is not None:
            remembered = (tombstones.document(self._run_id, *ended), tombstones.SUFFIX)
        if remembered is not None and self._record_written:
            if tombstones.bury(self.directory, self.stem, self._lock_fd, *remembered):
                suffixes = (".json",)  # the lock file is the tombstone now
        for suffix in suffixes:
            try:
                os.unlink(self._path(suffix))
            except OSError:
                pass
        os.close(self._lock_fd)
        self._lock_fd = None


def write_record(path: str, record: Record) -> bool:
    """Write ``record`` as the new file ``path`` (True once the file exists, so its writer
    removes it); raises RegistryError."""
    try:
        data = record.encode()
    except UnicodeEncodeError:
        raise RegistryError(_not_utf8(record)) from None
    if len(data) > MAX_RECORD_BYTES:  # the reference's words (serialize_record_for_publication)
        raise RegistryError(
            f"serialized registry record is {len(data)} bytes; maximum supported size is {MAX_RECORD_BYTES} bytes"
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise RegistryError(os_error_words(exc)) from None  # the reference says the error alone
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        os.close(fd)
        tombstones.remove_quietly(path)
        raise RegistryError(os_error_words(exc)) from None  # the reference says the error alone
    os.close(fd)
    return True


def _not_utf8(record: Record) -> str:
    """Why a record with a path that is not UTF-8 (undecoded bytes, ``--jsonl $'ev\\xe9.jsonl'``)
    is not written, naming the path and what follows: a record holds text, and one whose path
    named another file (the reference writes it lossily) would send a client elsewhere."""

    paths = (record.jsonl, record.capture_dir, record.batch_records, record.endpoint)
    named = next((path for path in paths if path is not None and any("\ud800" <= ch <= "\udfff" for ch in path)), None)
    what = "a recorded path" if named is None else f"the path {named}"
    return f"{what} is not valid UTF-8, so the run is not listed: list, inspect, cancel and wait cannot reach it by id"
