"""Which live run a by-id client means: exactly one live registry entry named ``run_id`` that
publishes an endpoint, or a Failure that says why not (docs/control-plane.md §1.3).

Every message names the action ("cannot cancel run `x`: ..."), as the reference's do; ``wait``
reads the registry alone and shares the wording."""

from __future__ import annotations

from ..errors import Failure, Kind
from ..rundir import BATCH_LABEL
from . import scan
from .lock import Health

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .records import Record


def refusal(action: str, run_id: str, detail: str, kind: Kind = Kind.CONTROL_UNREACHABLE) -> Failure:
    """The one wording of every by-id client failure."""
    return Failure(kind, f"{_refusing(action, run_id)}: {detail}")


# A verb that is no English verb, said as what it does ("cannot read the usage of run `x`").
_SAID = {"usage": "read the usage of"}


def _refusing(action: str, run_id: str) -> str:
    return f"cannot {_SAID.get(action, action)} run `{run_id}`"


def ambiguous(action: str, run_id: str, live: int) -> Failure:
    """Several live runs share the id: the client never guesses which one is meant."""
    return refusal(
        action,
        run_id,
        f"ambiguous run id — {live} live runs are registered under it; re-run with a run id that is "
        "unique among live runs",
        Kind.AMBIGUOUS_RUN_ID,
    )


def a_batch(run_id: str) -> str:
    """What a live batch's own id is to a by-id client: its record publishes no endpoint and no
    stream (as the reference would read it: a run with neither); its jobs are runs of their own."""
    labelled = f"{BATCH_LABEL}={run_id}"
    return (
        f"it is a batch: its jobs are runs of their own, labelled `{labelled}` (`list --label {labelled}` "
        f"names them; `wait --run-id {run_id}` waits for the batch)"
    )


def resolve(run_id: str, action: str, mine: Callable[[Record], bool] | None = None) -> scan.Entry:
    """The one live run named ``run_id`` that publishes an endpoint. ``mine``: only a run it
    says is the caller's own (an API handle's: its stream, or the endpoint it attached to), so a
    handle whose run ended never reaches a later run given the same id. A live batch's own
    record (read in its jobs' place) is the reference's live run without an endpoint, said so."""
    view = scan.read(Kind.REGISTRY_BY_ID, _refusing(action, run_id))
    found = [(entry, entry.health()) for entry in view.entries if entry.record.run_id == run_id]
    live = [entry for entry, health in found if health is Health.LIVE]
    if (
        mine is None
        and not live
        and any(entry.record.run_id == run_id and entry.health() is Health.LIVE for entry in view.batches)
    ):  # a Dask batch's chunks lodge one record each: one batch
        raise refusal(action, run_id, f"the run is live but exposes no control endpoint: {a_batch(run_id)}")
    if mine is not None and live:
        live = [entry for entry in live if mine(entry.record)]
        if not live:
            raise refusal(
                action,
                run_id,
                "the run this handle holds is not registered (it ended, or the registry refused it); the live run "
                "of that id is another",
                Kind.NOT_FOUND,
            )
    if len(live) > 1:
        raise ambiguous(action, run_id, len(live))
    if not live:
        if not found:
            raise refusal(action, run_id, "no run with that id is registered", Kind.NOT_FOUND)
        if any(health is Health.UNPROBED for _, health in found):
            raise refusal(
                action,
                run_id,
                "its liveness could not be probed — the entry's lock file would not open, or the lock call "
                "itself failed — so the runner is not confirmed gone; `list` reports this entry as `unprobed`",
                Kind.UNPROBED,
            )
        raise refusal(
            action,
            run_id,
            "its registry entry is stale — the runner is gone (it exited without cleaning up)",
            Kind.STALE,
        )
    entry = live[0]
    if entry.record.endpoint is None:
        said = f": {a_batch(run_id)}" if entry.record.batch_records is not None else ""
        raise refusal(action, run_id, f"the run is live but exposes no control endpoint{said}")
    return entry
