"""What ``wait`` watches and what it reports (docs/control-plane.md §2.7).

Waiting needs no endpoint: it polls the registry's liveness locks. The outcome of a run seen
live comes from the terminal ``runner_exit`` event in the JSONL its record published, as the
reference reads it: a stream that cannot be read is ``unknown``, whatever else is known. The
runner writes that event just after it unregisters, so reading it allows a short grace, longer
when the run's tombstone says it ended on its normal path. The tombstone (``tombstones``, an
extension) answers alone only where there is no stream to read: a run that ended before the
wait began, or a record without a locator (a batch job's).
"""

from __future__ import annotations

import os
import time

from ..bounded import RUN_FILE, loads, open_input
from ..errors import Failure, Kind
from ..pathtrust import trusted
from . import tombstones
from .lock import Health
from .lookup import ambiguous
from .scan import Entry, read

OUTCOME_TAIL_BYTES = 64 * 1024
OUTCOME_RETRY_SECONDS = 0.5
OUTCOME_RETRY_ENDED_SECONDS = 3.0  # a tombstone says the runner_exit line is on its way
OUTCOME_RETRY_STEP = 0.01
OUTCOME_FIELDS = ("code", "source", "child_code")


class RunIdWatch:
    """Waits until no record named ``run_id`` is live or unprobed."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self._jsonl: str | None = None
        self._seen: Entry | None = None  # the entry seen live, whose tombstone is exact
        self._directory: str | None = None
        self._lodgings: list[str] = []  # live batches' directories, where their ended jobs' tombstones are
        self.unprobed = False  # the last look could not probe a matching entry

    def done(self) -> bool:
        view = read(Kind.REGISTRY_SETUP)
        self._directory = view.directory
        self._lodgings = view.lodgings
        matches = [e for e in view.entries if e.record.run_id == self.run_id]
        health = [(entry, entry.health()) for entry in matches]
        live = [entry for entry, state in health if state is Health.LIVE]
        if len(live) > 1:
            raise ambiguous("wait for", self.run_id, len(live))
        if live:
            self._seen = live[0]
            self._jsonl = live[0].record.jsonl
        elif matches and self._jsonl is None:  # never seen live: the newest leftover will do
            self._jsonl = max(matches, key=lambda e: e.record.started_at).record.jsonl
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
        if self._seen is not None:
            return outcome(self.run_id, self._jsonl, remembered=_tombstone_of(self._seen, self._directory))
        if self._directory is not None and self._jsonl is None:  # ended before the wait began
            remembered = tombstones.newest_of(self._directory, self.run_id, self._lodgings)
            return outcome(self.run_id, None, remembered=remembered)
        return outcome(self.run_id, self._jsonl)


class AllWatch:
    """Waits for the runs that were live on the first look (label-filtered) to end."""

    def __init__(self, labels: dict):
        view = read(Kind.REGISTRY_SETUP)
        self._directory = view.directory
        self._targets: list[Entry] = [e for e in view.entries if e.record.matches(labels) and e.health() is Health.LIVE]
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
        return [outcome(e.record.run_id, e.record.jsonl, remembered=_tombstone_of(e, self._directory)) for e in ordered]


def _tombstone_of(entry: Entry, registry: str | None) -> dict | None:
    """The tombstone of the entry seen live; a batch job's, once its batch ended, in the batch's
    outcomes in the registry."""
    found = tombstones.of_stem(entry.directory, entry.name.removesuffix(".json"))
    if found is None and entry.delegated and registry is not None:
        found = tombstones.newest_of(registry, entry.record.run_id)
    return found


def outcome(run_id: str, jsonl: str | None, *, remembered: dict | None = None) -> dict:
    """``runner_exit``'s code, source and child_code, or status unknown when it cannot be read.
    A ``remembered`` outcome (the run's tombstone, an extension) is the same three values,
    written just before the record went: it answers only when there is no stream to read (the
    reference's ``unknown`` for a stream it cannot read stays so), and otherwise lets the read
    wait longer for the line the runner is about to write."""
    remembered = remembered if remembered is not None and remembered["run_id"] == run_id else None
    if jsonl is None and remembered is not None:
        return {"run_id": run_id, "status": "reported", **{key: remembered[key] for key in OUTCOME_FIELDS}}
    if jsonl is not None:
        grace = OUTCOME_RETRY_SECONDS if remembered is None else OUTCOME_RETRY_ENDED_SECONDS
        deadline = time.monotonic() + grace
        while True:
            event = _runner_exit(jsonl)
            if event is not None:
                return {"run_id": run_id, "status": "reported", **event}
            if time.monotonic() >= deadline:
                break
            time.sleep(OUTCOME_RETRY_STEP)
    return {"run_id": run_id, "status": "unknown", "code": None, "source": None, "child_code": None}


def _runner_exit(path: str) -> dict | None:
    """The last complete ``runner_exit`` line in the file's final 64 KiB, of a file whose owner
    ``pathtrust`` trusts (this user, root). The runner writes its stream as this user, so a file
    of another user's at the path was put there since (a ``--jsonl`` in their directory, renamed
    away and replaced while the run went on): its outcome would be theirs to choose. (A stream
    the user kept in another user's file in a private directory of their own reads as unknown.)"""
    try:
        fd = open_input(path, RUN_FILE)  # a regular file only: a FIFO's open never waits
    except (OSError, ValueError):  # ValueError: bounded.InputError
        return None
    try:
        info = os.fstat(fd)
        if not trusted(info.st_uid):  # not the runner's: planted in its place
            return None
        offset = max(0, info.st_size - OUTCOME_TAIL_BYTES)
        data = os.pread(fd, OUTCOME_TAIL_BYTES, offset)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = data.split(b"\n")[:-1]  # the last piece has no newline yet
    if offset > 0 and lines:
        lines = lines[1:]  # the first piece may start mid-line
    for line in reversed(lines):
        try:
            event = loads(line.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError too
            continue
        if isinstance(event, dict) and event.get("event") == "runner_exit":
            code, source, child_code = event.get("code"), event.get("source"), event.get("child_code")
            if type(code) is int and isinstance(source, str) and (child_code is None or type(child_code) is int):
                return {"code": code, "source": source, "child_code": child_code}
            return None
    return None
