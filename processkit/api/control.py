"""The API's one door to the control plane and the registry.

Every call the API makes to ``processkit.control.client`` and ``processkit.registry`` goes
through here, so a change of those modules' public functions is absorbed in this file alone.
A Failure from them becomes a :class:`ControlError` carrying the CLI's exit code and kind.
"""

from __future__ import annotations

from ..control import client, replies
from ..errors import Failure, Kind
from ..registry import lookup, scan
from ..registry.records import Record
from ..registry.waiting import RunIdWatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    Mine = Callable[[Record], bool]


class ControlError(RuntimeError):
    """A control-plane or registry request failed; ``code`` is what the CLI would exit with."""

    def __init__(self, message: str, code: int, kind: str):
        super().__init__(message)
        self.code = code
        self.kind = kind

    def __reduce__(self):
        return (type(self), (str(self), self.code, self.kind))


def _calling(function, *args):
    try:
        return function(*args)
    except Failure as failure:
        raise _error(failure) from None


def _error(failure: Failure) -> ControlError:
    return ControlError(failure.message, failure.code, failure.kind.label)


def inspect(run_id: str, mine: Mine) -> dict:
    """The live run's snapshot (members, mechanism, root pid, ...). ``mine``: which registered
    runs of that id are the handle's own (``registry.lookup.resolve``): a handle whose run ended
    never reaches a later run given the same id."""
    return _calling(client.request_by_id, run_id, "inspect", replies.check_snapshot, mine)


def usage(run_id: str, mine: Mine) -> dict:
    """The live run's accounting so far (the ``usage`` extension: ``inspect --usage``)."""
    return _calling(client.request_by_id, run_id, "usage", replies.check_usage, mine)


def stop(run_id: str, verb: str, mine: Mine) -> dict:
    """``cancel`` (graceful, the run exits 108) or ``kill`` (hard, 109); returns the acknowledgement."""
    return _calling(client.request_by_id, run_id, verb, replies.ack_check(verb), mine)


def ended(run_id: str, verb: str) -> ControlError:
    """The refusal (103, not_found) of a handle's control call once its own run has ended."""
    return _error(lookup.refusal(verb, run_id, "the run this handle holds has ended", Kind.NOT_FOUND))


def live_record(run_id: str) -> Record:
    """The registry record of the one live run named ``run_id``."""
    return _calling(lookup.resolve, run_id, "attach to").record


def entries() -> list[tuple[Record, str]]:
    """Every readable registry record with its health word (live, stale, unprobed)."""
    view = _calling(scan.read, Kind.REGISTRY_SETUP)
    return [(entry.record, entry.health().value) for entry in view.entries]


def run_id_watch(run_id: str, endpoint: str | None) -> RunIdWatch:
    """Polled by ``done()`` until no live record names ``run_id`` (the one at ``endpoint``, when given)."""
    return RunIdWatch(run_id, endpoint)


def watch_done(watch: RunIdWatch) -> bool:
    return _calling(watch.done)


def ended_code(watch: RunIdWatch, jsonl: str) -> int:
    """The ended run's code, as ``wait --report-outcome`` reads it; a ControlError (``stale``,
    as for a dead runner's entry) when that says ``unknown``: there is no code to give as
    Popen's would, and none is made up."""
    outcome = watch.report()
    if outcome["status"] != "reported":
        raise ControlError(
            f"run `{watch.run_id}` ended, but its outcome is unknown: no runner_exit of this run could be read "
            f"from {jsonl} (its runner died, its stream was replaced or cannot be read, or another run held "
            "that --jsonl file, so its events were not written)",
            Kind.STALE.code,
            Kind.STALE.label,
        )
    return outcome["code"]
