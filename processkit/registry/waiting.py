"""What ``wait`` watches and what it reports (docs/control-plane.md §2.7).

Waiting needs no endpoint: it polls the registry's liveness locks. The outcome of a run seen
live comes from the terminal ``runner_exit`` event in the JSONL its record published, read as
the reference reads it (``stream_outcome``: only a stream whose head names this run counts): a
stream that cannot be read is ``unknown``, whatever else is known, and so is a ``runner_exit``
the run's own tombstone contradicts (another run's of the same id: a later one that wrote the
path again, or the one that held this run's ``--jsonl`` where an earlier build's record does not
say ``jsonl_held``).
The runner writes that event just after it unregisters, so reading it allows a short grace,
longer when the run's tombstone says it ended on its normal path; a stream that can never be
read ends the grace at once. The tombstone (``tombstones``, an extension) answers alone where there is no stream to read: a run
that ended before the wait began, a record without a locator, or one whose ``--jsonl`` another run
held (``Record.stream``: that file's head may name its very id); and for a batch's job (the
reference has no batch), whose published stream a batch under ``--keep failed`` writes only for
a job that failed.
"""

from __future__ import annotations

import time

from ..errors import Failure, Kind
from . import stream_outcome, tombstones
from .lock import Health
from .lookup import ambiguous
from .scan import Entry, read

OUTCOME_RETRY_SECONDS = 0.5
OUTCOME_RETRY_ENDED_SECONDS = 3.0  # a tombstone says the runner_exit line is on its way
OUTCOME_RETRY_STEP = 0.01
OUTCOME_FIELDS = ("code", "source", "child_code")


class RunIdWatch:
    """Waits until no record named ``run_id`` is live or unprobed (a live batch's own record, by
    its label, too: until the batch ends; a Dask batch's chunks each leave one, all one batch); with ``endpoint`` (an API
    handle attached to one run), only the record of that run counts: a later run given the same
    id is another run's to wait for."""

    def __init__(self, run_id: str, endpoint: str | None = None):
        self.run_id = run_id
        self.endpoint = endpoint
        self._seen: Entry | None = None  # the entry seen live, whose tombstone is exact
        self._leftover: Entry | None = None  # never seen live: the newest record left of the id
        self._directory: str | None = None
        self._lodgings: list[str] = []  # live batches' directories, where their ended jobs' tombstones are
        self.unprobed = False  # the last look could not probe a matching entry

    def done(self) -> bool:
        view = read(Kind.REGISTRY_SETUP)
        self._directory = view.directory
        self._lodgings = view.lodgings
        runs, batches = (
            [e for e in found if e.record.run_id == self.run_id and self.endpoint in (None, e.record.endpoint)]
            for found in (view.entries, view.batches)
        )
        matches = [*runs, *batches]
        health = [(entry, entry.health()) for entry in matches]
        live = [entry for entry, state in health if state is Health.LIVE]
        # the records of one batch share its label (a Dask batch's chunks lodge one each): one run
        count = sum(1 for entry in live if entry in runs) + any(entry in batches for entry in live)
        if count > 1:
            raise ambiguous("wait for", self.run_id, count)
        if live:
            self._seen = live[0]
        elif matches and self._seen is None:  # never seen live: the newest leftover will do
            self._leftover = max(matches, key=lambda e: e.record.started_at)
        self.unprobed = not live and any(state is Health.UNPROBED for _, state in health)
        return not live and not self.unprobed

    def timed_out(self, limit: str) -> Failure:
        observed = (
            "it was not confirmed finished — a matching registry entry could not be probed, and an "
            "unprobeable entry is never read as a completed run"
            if self.unprobed
            else "it is still live and was left running"
        )
        return Failure(
            Kind.WAIT_TIMEOUT,
            f"stopped waiting for run `{self.run_id}` after {limit}: {observed} — raise or drop `--timeout` to keep waiting",
        )

    def report(self) -> dict:
        """The outcome of the record seen live, else of the newest leftover, each by its own
        tombstone (none for a runner that died: unknown, never an earlier run's of the id);
        the newest tombstone of the id only where no record matched: it ended before the wait."""
        entry = self._seen if self._seen is not None else self._leftover
        if entry is not None:
            return outcome(
                self.run_id,
                entry.record.stream,
                remembered=_tombstone_of(entry, self._directory),
                delegated=entry.delegated,
            )
        if self._directory is not None:
            remembered = tombstones.newest_of(self._directory, self.run_id, self._lodgings)
            return outcome(self.run_id, None, remembered=remembered)
        return outcome(self.run_id, None)


class AllWatch:
    """Waits for the runs that were live on the first look (label-filtered) to end, a live
    batch's own record among them (so the jobs it starts later too)."""

    def __init__(self, labels: dict):
        view = read(Kind.REGISTRY_SETUP)
        self._directory = view.directory
        self._targets: list[Entry] = [
            e for e in (*view.entries, *view.batches) if e.record.matches(labels) and e.health() is Health.LIVE
        ]
        self._outstanding = [(entry, Health.LIVE) for entry in self._targets]

    def done(self) -> bool:
        """Re-probes the outstanding entries: a stale or vanished one is over; an unprobeable
        one is never read as over."""
        looked = [(entry, entry.health() if entry.exists() else Health.STALE) for entry, _ in self._outstanding]
        self._outstanding = [(entry, health) for entry, health in looked if health is not Health.STALE]
        return not self._outstanding

    def timed_out(self, limit: str) -> Failure:
        count = len(self._outstanding)
        noun = "run" if count == 1 else "runs"
        if any(health is Health.UNPROBED for _, health in self._outstanding):
            observed = (
                "at least one of them is not confirmed finished — a matching registry entry could not be "
                "re-probed, and an unprobeable entry is never read as a completed run"
            )
        else:
            observed = "all of them are still live and were left running"
        return Failure(
            Kind.WAIT_TIMEOUT,
            f"stopped waiting for all runs after {limit}: {count} snapshot {noun} still outstanding — {observed} — "
            "raise or drop `--timeout` to keep waiting",
        )

    def report(self) -> list:
        ordered = sorted(self._targets, key=lambda e: (e.record.run_id, e.path))
        since = time.monotonic()  # one grace for all: the runs had all ended by now
        return [
            outcome(
                e.record.run_id,
                e.record.stream,
                remembered=_tombstone_of(e, self._directory),
                delegated=e.delegated,
                since=since,
            )
            for e in ordered
        ]


def _tombstone_of(entry: Entry, registry: str | None) -> dict | None:
    """The tombstone of the entry seen live; a batch job's, once its batch ended, in the batch's
    outcomes in the registry."""
    found = tombstones.of_stem(entry.directory, entry.name.removesuffix(".json"))
    if found is None and entry.delegated and registry is not None:
        found = tombstones.newest_of(registry, entry.record.run_id)
    return found


def outcome(
    run_id: str,
    jsonl: str | None,
    *,
    remembered: dict | None = None,
    delegated: bool = False,
    since: float | None = None,
) -> dict:
    """``runner_exit``'s code, source and child_code, or status unknown when it cannot be read.
    A ``remembered`` outcome (the run's tombstone, an extension) is the same three values,
    written just before the record went: it answers when there is no stream to read, and for a
    batch's job (``delegated``); elsewhere the reference's ``unknown`` for a stream it cannot
    read stays so, and the tombstone only lets the read wait longer for the line the runner is
    about to write. The grace runs from ``since`` (now by default)."""
    remembered = remembered if remembered is not None and remembered["run_id"] == run_id else None
    if remembered is not None and (jsonl is None or delegated):
        return {"run_id": run_id, "status": "reported", **{key: remembered[key] for key in OUTCOME_FIELDS}}
    if jsonl is not None:
        grace = OUTCOME_RETRY_SECONDS if remembered is None else OUTCOME_RETRY_ENDED_SECONDS
        deadline = (time.monotonic() if since is None else since) + grace
        stream = stream_outcome.Stream(jsonl, run_id)
        while True:
            found = stream.read()
            if isinstance(found, dict) and _theirs(found, remembered):
                break  # another run's of this id (``_theirs``)
            if isinstance(found, dict):
                return {"run_id": run_id, "status": "reported", **found}
            if found == stream_outcome.SETTLED or time.monotonic() >= deadline:
                break
            time.sleep(OUTCOME_RETRY_STEP)
    return {"run_id": run_id, "status": "unknown", "code": None, "source": None, "child_code": None}


def _theirs(found: dict, remembered: dict | None) -> bool:
    """Whether a ``runner_exit`` naming this run id is another run's: the run's own outcome (its
    tombstone, the entry seen live's) says otherwise: a later run of the id that wrote the path
    again within the grace, or the run of the id that held this one's ``--jsonl`` where the record,
    an earlier build's, does not say ``jsonl_held`` (a record that does names no stream to read
    here); the file's head names the id all the same. (A runner
    whose release failed after its tombstone ends 104 instead: unknown too, never a wrong code.)"""
    return remembered is not None and any(found[key] != remembered[key] for key in OUTCOME_FIELDS)
