"""The by-id client: resolve a run id to one live run (``registry.lookup``), exchange one verb with it
(``transport``) and accept only a reply that keeps the contract (``replies``). ``--all`` is
``fanout``. Every failure is a Failure with a CONTROL-family kind."""

from __future__ import annotations

from . import protocol
from ..registry.lookup import refusal, resolve
from .replies import Check
from .transport import Channel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..registry.records import Record

    Mine = Callable[[Record], bool]


def request_by_id(run_id: str, verb: str, check: Check, mine: Mine | None = None) -> dict:
    """Resolve, connect and exchange one verb; a stop verb re-resolves on the open connection
    and goes ahead only if the registry still names the same endpoint. ``mine``: the runs the
    caller may mean (``lookup.resolve``)."""
    entry = resolve(run_id, verb, mine)
    with Channel(entry.record.endpoint, run_id, verb) as channel:
        if verb in protocol.STOP_VERBS and resolve(run_id, verb, mine).record.endpoint != entry.record.endpoint:
            raise refusal(
                verb,
                run_id,
                "the resolved run changed identity between resolution and dispatch; refusing to guess which one "
                "to act on",
            )
        return check(channel.request(verb), run_id, verb)
