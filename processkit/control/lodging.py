"""A batch's lodging: its jobs' host state in ONE directory the batch holds for its life.

The directory is a run directory (``rundir.RunDir``, its ``live.lock`` held by the batch) made
in ``rundir.batch_base()``, a tmpfs when one is usable (the facts are in ``rundir``). Every job
takes a slot in it (``rundir.JobSlot``): its control socket ``j<seq>.sock`` (a fresh one per
job, so a client holding an old job's endpoint never reaches the next job), its registry
record ``j<seq>.json`` whose liveness lock is the batch's ``live.lock``, and, once it ended,
its tombstone ``j<seq>.ended`` (the newest ``MAX_KEPT`` are kept). The user's registry holds ONE
record of the batch's own, which delegates to the directory (``batch_records``, an extension
field a v1 reader ignores); ``registry.scan`` follows a live delegation, so every reader sees
the jobs as if their records were in the registry (a job's ``Publication`` writes through ``register``). When the batch ends, its record's lock
becomes ``<stem>.outcomes``: the newest ``MAX_KEPT`` job outcomes in one file.

So a job makes no inode on the host's ordinary file systems but what ``--out`` keeps.
"""

from __future__ import annotations

import collections
import os

from ..diagnostics import warn
from ..events.emitter import utc_timestamp
from ..plain import counter
from ..registry import tombstones
from ..registry.location import RegistryError, open_for_writing
from ..registry.records import Record
from ..registry.registration import Registration, write_record
from ..rundir import BATCH_LABEL, LOCK_NAME, JobSlot, RunDir, batch_base
from ..text import is_valid_run_id

BATCH_HINT = "batch"


def lodge(label: str) -> Lodging | None:
    """A host's lodging, for the runs carried from it: their sockets, records and tombstones in
    one directory, none in the registry or the temp dir. Best effort: without it (None) each
    run makes its own, as ``run`` does."""
    try:
        return Lodging(label)
    except OSError as exc:
        warn(f"no batch directory, so each job makes its own: {exc.strerror or exc}")
        return None


class Lodging:
    """The batch's directory, its delegating record, and its jobs' remembered outcomes."""

    def __init__(self, label: str) -> None:
        """Make the directory and take its lock (raises OSError), then register the batch;
        a registry that refuses is remembered, and each job's publication meets it."""
        self.home = RunDir(batch_base())
        self.home.holds_jobs = True
        self._slots = counter(1)
        self._outcomes: collections.deque[dict] = collections.deque(maxlen=tombstones.MAX_KEPT)
        self._ended: collections.deque[str] = collections.deque()  # the tombstone files in home
        self.refused: RegistryError | None = None
        self._registration: Registration | None = None
        try:
            registration = Registration(open_for_writing())
        except RegistryError as exc:
            self.refused = exc
            return
        run_id = label if is_valid_run_id(label) else f"batch-{self.home.token}"
        try:
            registration.write(
                Record(
                    run_id=run_id,
                    endpoint=None,
                    started_at=utc_timestamp(),
                    argv_sha256=None,
                    hint=BATCH_HINT,
                    labels={BATCH_LABEL: label},
                    jsonl=None,
                    capture_dir=None,
                    lock_file=registration.lock_name,
                    batch_records=self.home.path,
                )
            )
        except RegistryError as exc:
            registration.close()
            self.refused = exc
            return
        self._registration = registration

    def slot(self) -> JobSlot:
        """A fresh slot for the next job."""
        return JobSlot(self.home, next(self._slots))

    def register(self, slot: JobSlot) -> JobRecord:
        """The job's registration in its slot; raises the registry's refusal, as ``run``'s would."""
        if self.refused is not None:
            raise self.refused
        return JobRecord(self, slot)

    def remember(self, stem: str, kept: dict) -> None:
        """A job ended: its tombstone in the directory (the oldest beyond ``MAX_KEPT`` go), and
        its outcome for the batch's one file."""
        self._outcomes.append(kept)
        if tombstones.write_new(self.home.path, stem + tombstones.SUFFIX, kept):
            self._ended.append(stem + tombstones.SUFFIX)
        while len(self._ended) > tombstones.MAX_KEPT:
            tombstones.remove_quietly(os.path.join(self.home.path, self._ended.popleft()))

    def close(self) -> None:
        """The outcomes into the registry, the delegating record gone, then the directory. Idempotent."""
        if self._registration is not None:
            kept = {"tombstone_version": tombstones.VERSION, "outcomes": list(self._outcomes)}
            self._registration.close(kept=kept)
            self._registration = None
        self.home.close()


class JobRecord:
    """A job's registration in its batch's directory: the record, then (ended) its tombstone;
    the lock is the batch's, held as long as the batch lives."""

    def __init__(self, lodging: Lodging, slot: JobSlot) -> None:
        self._lodging = lodging
        self.directory = slot.path
        self.stem = slot.stem
        self.lock_name = LOCK_NAME
        self._run_id: str | None = None
        self._path = os.path.join(self.directory, self.stem + ".json")

    def write(self, record: Record) -> None:
        """Publish ``record``; raises RegistryError."""
        write_record(self._path, record)
        self._run_id = record.run_id

    def close(self, ended: tuple[int, str, int | None] | None = None) -> None:
        """The tombstone first, then the record (no moment with neither). Idempotent."""
        run_id, self._run_id = self._run_id, None
        if run_id is None:
            return
        if ended is not None:
            self._lodging.remember(self.stem, tombstones.document(run_id, *ended))
        tombstones.remove_quietly(self._path)
