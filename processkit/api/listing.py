"""``processkit.runs``: the registry as ``processkit-cli list --json`` shows it, one record per run
this user's registry holds, read through the API's one door to it (``control``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from . import control


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """One registry record, as ``processkit-cli list --json`` shows it."""

    run_id: str
    health: str
    started_at: str
    hint: str | None
    argv_sha256: str | None
    labels: dict
    jsonl: str | None
    capture_dir: str | None
    endpoint: str | None


def runs(labels: Mapping[str, str] | Iterable[str] | None = None) -> list[RunInfo]:
    """The runs this user's registry holds (live, stale or unprobed), optionally only those
    carrying every one of ``labels``."""
    wanted = _wanted(labels)
    found = []
    for record, health in control.entries():
        if record.matches(wanted):
            fields = {
                key: value
                for key, value in record._asdict().items()
                if key not in ("lock_file", "batch_records", "jsonl_held")
            }
            found.append(RunInfo(health=health, **fields))
    return found


def _wanted(labels) -> dict[str, str]:
    """``labels`` read as ``run``'s ``labels=`` is (a mapping of strings or a list of ``K=V``), through
    the label grammar, as ``inspect --all --label`` reads its own: a bad key or value (an escape
    sequence) matched no run and returned ``[]`` without a word, a NUL raised the grammar's
    internal ``Failure``; each is a ValueError in ``run``'s words."""
    from ..errors import Failure
    from ..grammar import KEYWORDS
    from ..grammar.keywords import options
    from ..grammar.run import read
    from ..refusal import refused

    try:
        return dict(read(options({"labels": labels}, KEYWORDS, function="runs"), KEYWORDS).get("label", ()))
    except Failure as failure:
        raise refused(failure.message) from None
