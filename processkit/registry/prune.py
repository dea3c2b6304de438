"""Reaping the registry entries of dead runners, and never anything else (docs/control-plane.md §2.6).

Each record is probed with its lock held through the reaping, so a verdict cannot go stale
while files are removed. Live and unprobed entries are kept, unreadable records are never
deleted, and a lock file is reaped only when it is confirmed stale. A pruner does not count an
entry another pruner's unlink removed first, so concurrent pruners' ``pruned`` tallies add up
to what was reaped (their ``live`` do not: a pruner counts as live an entry whose lock another
is holding to reap it); an entry whose unlink fails otherwise is counted, as the reference does.

A stale entry's run directory is the sweep's (``containment.sweep``), which ends what the run
left first: the candidates name it, and the caller hands it on.
"""

from __future__ import annotations

import os
import time

from .. import rundir_shape
from .lock import Health, probe
from .scan import Entry, View
from .tombstones import expire, remove_quietly
from ..plain import Plain

ORPHAN_MIN_AGE_SECONDS = 5.0


class Report(Plain):
    pruned: int = 0
    live: int = 0
    unprobed: int = 0
    orphaned_locks: int = 0
    candidates: list = []

    def tally(self) -> dict:
        return {
            "pruned": self.pruned,
            "live": self.live,
            "unprobed": self.unprobed,
            "orphaned_locks": self.orphaned_locks,
        }


def prune(view: View, labels: dict, *, dry_run: bool) -> Report:
    report = Report()
    for entry in view.entries:
        if entry.record.matches(labels):
            _entry_pass(entry, report, dry_run)
    if not labels and view.directory is not None:
        for name in view.orphan_locks():
            _orphan_pass(view.directory, name, report, dry_run)
        expire(view.directory, dry_run=dry_run)  # ended runs' outcomes age out (not in the tally)
    return report


def _entry_pass(entry: Entry, report: Report, dry_run: bool) -> None:
    if entry.delegated:  # a live batch's job: its lock and directory are the batch's (and the sweep's)
        report.live += entry.health() is Health.LIVE
        return
    health, held = entry.probe(hold=True)
    try:
        if health is Health.LIVE:
            report.live += 1
        elif health is Health.UNPROBED:
            report.unprobed += 1
        elif dry_run or remove_quietly(entry.path):  # gone already: a concurrent pruner's to count
            record = entry.record
            report.pruned += 1
            report.candidates.append(
                {
                    "kind": "entry",
                    "run_id": record.run_id,
                    "started_at": record.started_at,
                    "socket_dir": rundir_shape.reapable_dir(record.endpoint) or _lodging(record.batch_records),
                }
            )
            if not dry_run:
                remove_quietly(os.path.join(entry.directory, record.lock_file))
    finally:
        if held is not None:
            os.close(held)


def _lodging(path: str | None) -> str | None:
    """A dead batch's directory, which the sweep removes (its name is all it takes from here)."""
    return path if path is not None and rundir_shape.shaped(path) else None


def _orphan_pass(directory: str, name: str, report: Report, dry_run: bool) -> None:
    """A lock with no record: a runner between its two writes is young, so only old ones count;
    an old one held or unprobeable is counted as an entry would be (the reference's tally)."""
    path = os.path.join(directory, name)
    try:
        if os.stat(path, follow_symlinks=False).st_mtime > time.time() - ORPHAN_MIN_AGE_SECONDS:
            return
    except OSError:
        return
    health, held = probe(directory, name, hold=True)
    report.live += health is Health.LIVE
    report.unprobed += health is Health.UNPROBED
    if held is None:  # live, unprobed, or already gone
        return
    try:
        if dry_run or remove_quietly(path):
            report.orphaned_locks += 1
            report.candidates.append({"kind": "orphaned_lock", "lock_file_name": name})
    finally:
        os.close(held)
